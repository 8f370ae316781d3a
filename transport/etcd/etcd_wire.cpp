#include "transport/etcd/etcd_wire.hpp"

#include <algorithm>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <utility>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "lease/json_read.hpp"

namespace leasehold {

using json = nlohmann::json;

bool int64_field(const json& j, const char* name, std::int64_t& out) {
  out = 0;
  auto it = j.find(name);
  if (it == j.end())
    return true;
  if (it->is_number_integer()) {
    out = it->get<std::int64_t>();
    return true;
  }
  if (!it->is_string())
    return false;
  auto text = it->get<std::string>();
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && end && *end == '\0' && errno == 0;
}

std::string id_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end())
    return "0";
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_number_integer())
    return std::to_string(it->get<std::int64_t>());
  return "";
}

error_kind grpc_kind(int code, int http_status) {
  switch (code) {
    case 3: return error_kind::invalid;          // INVALID_ARGUMENT
    case 4: return error_kind::timeout;          // DEADLINE_EXCEEDED
    case 5: return error_kind::not_found;        // NOT_FOUND
    case 7: return error_kind::forbidden;        // PERMISSION_DENIED
    case 8: return error_kind::throttled;        // RESOURCE_EXHAUSTED
    case 14: return error_kind::server_error;    // UNAVAILABLE
    case 16: return error_kind::unauthorized;    // UNAUTHENTICATED
    default:
      return http_status >= 500 ? error_kind::server_error : error_kind::other;
  }
}

namespace {

/// A failed parse of any type: its error names the field.
struct failed {
  std::string error;
  template <class T>
  operator parse_result<T>() && { return {std::nullopt, std::move(error)}; }
};

/// A base64 field's bytes ("" when absent); nullopt when it is not base64.
std::optional<std::string> bytes_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string())
    return std::string{};
  return decode_base64(it->get<std::string>());
}

} // namespace

parse_result<etcd_kv> parse_kv(const json& j, const std::string& where) {
  if (!j.is_object())
    return failed{where + ": expected an object"};
  etcd_kv kv;
  if (!int64_field(j, "create_revision", kv.create_revision) || kv.create_revision <= 0)
    return failed{where + ".create_revision: expected a positive int64"};
  if (!int64_field(j, "mod_revision", kv.mod_revision) || kv.mod_revision <= 0)
    return failed{where + ".mod_revision: expected a positive int64"};
  kv.lease_id = id_field(j, "lease");
  for (auto [name, field] : {std::pair{"key", &kv.key}, std::pair{"value", &kv.value}}) {
    auto bytes = bytes_field(j, name);
    if (!bytes)
      return failed{where + "." + name + ": invalid base64"};
    *field = std::move(*bytes);
  }
  return {std::move(kv), {}};
}

parse_result<std::optional<etcd_kv>> first_kv(const json& reply) {
  auto it = reply.find("kvs");
  if (it == reply.end() || (it->is_array() && it->empty()))
    return {std::optional<etcd_kv>{}, {}};
  if (!it->is_array())
    return failed{"kvs: expected an array of objects"};
  auto kv = parse_kv((*it)[0], "kvs[0]");
  if (!kv.ok())
    return failed{kv.error};
  return {std::move(kv.value), {}};
}


namespace {

/// The record's members that to_lease reads, from `value` read in place when
/// it is plain; false leaves it to the document path, whose answer stands.
/// Other values are grammar-checked, so nlohmann reads what this accepts alike.
bool read_plain_record(std::string_view value, lease_spec& spec) {
  json_text t(value);
  od::object o;
  json_members_seen seen;
  bool ok = t.object(o) && each_member(o, [&](std::string_view k, od::value& v) {
    if (k == "holderIdentity")
      return seen.first(1) && read_plain(v, spec.holder_identity);
    if (k == "leaseDurationSeconds") {
      int d = 0;
      if (!seen.first(2) || !read_int(v, d))
        return false;
      spec.lease_duration_seconds = d;
      return true;
    }
    if (k == "acquireTime")
      return seen.first(4) && read_time(v, spec.acquire_time);
    if (k == "preferredHolder")
      return seen.first(8) && read_plain(v, spec.preferred_holder);
    if (k == "strategy")
      return seen.first(16) && read_plain(v, spec.strategy);
    return skip(v);
  });
  return ok && t.at_end();
}

} // namespace

parse_result<lease> to_lease(const lease_key& k, const etcd_kv& kv, const std::string& where) {
  lease_spec spec;
  if (!read_plain_record(kv.value, spec)) {
    spec = lease_spec{};   // what was read before it gave up is not the document's
    auto v = json::parse(kv.value, nullptr, false);
    if (!v.is_object())
      return failed{where + ".value: not a JSON object"};
    if (auto h = v.find("holderIdentity"); h != v.end() && h->is_string())
      spec.holder_identity = h->get<std::string>();
    if (auto d = v.find("leaseDurationSeconds"); d != v.end() && d->is_number_integer())
      spec.lease_duration_seconds = d->get<int>();
    if (auto a = v.find("acquireTime"); a != v.end() && a->is_string())
      spec.acquire_time = parse_micro_time(a->get<std::string>());
    for (auto [field, dst] : {std::pair{"preferredHolder", &spec.preferred_holder},
                              std::pair{"strategy", &spec.strategy}})
      if (auto f = v.find(field); f != v.end() && f->is_string())
        *dst = f->get<std::string>();
  }
  if (kv.create_revision > INT_MAX)
    return failed{where + ".create_revision: " + std::to_string(kv.create_revision)
                    + " exceeds the fencing token range (int32)"};
  spec.lease_transitions = static_cast<int>(kv.create_revision);
  lease l;
  l.ns = k.ns;
  l.name = k.name;
  l.resource_version = std::to_string(kv.mod_revision);
  l.etcd_lease_id = kv.lease_id;
  l.spec = std::move(spec);
  return {std::move(l), {}};
}

etcd_record etcd_record::of(const lease& l) {
  etcd_record r{l.resource_version, l.etcd_lease_id, l.spec.holder_identity,
                l.spec.lease_duration_seconds, l.spec.acquire_time, l.spec.lease_transitions, {}};
  if (!l.spec.preferred_holder.empty() || !l.spec.strategy.empty())
    r.rare = std::make_shared<const seldom>(seldom{l.spec.preferred_holder, l.spec.strategy});
  return r;
}

lease etcd_record::to_lease(const lease_key& k) const {
  lease l;
  l.ns = k.ns;
  l.name = k.name;
  l.resource_version = resource_version;
  l.etcd_lease_id = etcd_lease_id;
  l.spec.holder_identity = holder_identity;
  l.spec.lease_duration_seconds = lease_duration_seconds;
  l.spec.acquire_time = acquire_time;
  l.spec.lease_transitions = lease_transitions;
  if (rare) {
    l.spec.preferred_holder = rare->preferred_holder;
    l.spec.strategy = rare->strategy;
  }
  return l;
}

int etcd_key_ttl(const lease_spec& s) {
  int ttl = std::max(1, s.lease_duration_seconds.value_or(1));
  return s.holder_identity.empty() ? 2 * ttl : ttl;
}

std::int64_t header_revision(const json& reply) {
  std::int64_t rev = 0;
  auto header = reply.find("header");
  if (header == reply.end() || !header->is_object() || !int64_field(*header, "revision", rev))
    return 0;
  return rev;
}

std::string etcd_scope::range_end() const {
  auto end = dir();   // ends in '/': never 0xff, so one increment suffices
  end.back() = static_cast<char>(end.back() + 1);
  return end;
}

std::optional<std::string> etcd_scope::name_of(const std::string& key) const {
  auto d = dir();
  if (key.size() <= d.size() || key.compare(0, d.size(), d) != 0)
    return std::nullopt;
  return key.substr(d.size());
}

namespace {

/// An int field of the gateway's error object; 0 when absent or not an int.
int int_field(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

std::string string_field(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

/// A boolean field (absent: false); false in `ok` when it is something else.
bool bool_field(const json& j, const char* name, bool& ok) {
  auto it = j.find(name);
  if (it == j.end())
    return false;
  if (!it->is_boolean()) {
    ok = false;
    return false;
  }
  return it->get<bool>();
}


} // namespace

parse_result<etcd_scope_state> parse_scope_range(const json& reply, const etcd_scope& scope,
                                                 const std::string& from) {
  etcd_scope_state st;
  st.revision = header_revision(reply);
  if (st.revision <= 0)
    return failed{"header.revision: missing"};
  auto it = reply.find("kvs");
  if (it != reply.end() && !it->is_array())
    return failed{"kvs: expected an array of objects"};
  bool ok = true;
  bool more = bool_field(reply, "more", ok);
  if (!ok)
    return failed{"more: expected a boolean"};
  if (more && (it == reply.end() || it->empty()))
    return failed{"more: true with no kvs to continue after"};
  for (std::size_t i = 0; it != reply.end() && i < it->size(); ++i) {
    auto where = "kvs[" + std::to_string(i) + "]";
    auto kv = parse_kv((*it)[i], where);
    if (!kv.ok())
      return failed{kv.error};
    if (i + 1 == it->size() && more) {
      st.next_key = kv.value->key + '\0';   // the first key after this one
      if (st.next_key <= from)   // a page that does not move on would be read for ever
        return failed{"more: the next page would not move past key " + from};
    }
    auto name = scope.name_of(kv.value->key);
    if (!name)
      continue;
    auto rec = to_lease({scope.ns, *name}, *kv.value, where);
    if (rec.ok())
      st.records.emplace(std::move(*name), etcd_record::of(*rec.value));
  }
  return {std::move(st), {}};
}


parse_result<etcd_watch_message> parse_etcd_watch_line(const std::string& line,
                                                       const etcd_scope& scope) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return failed{"not a JSON object"};
  etcd_watch_message m;
  if (auto e = j.find("error"); e != j.end()) {
    if (!e->is_object())
      return failed{"error: expected an object"};
    m.error = true;
    m.grpc_code = int_field(*e, "grpc_code");
    m.http_code = int_field(*e, "http_code");
    m.message = string_field(*e, "message");
    return {std::move(m), {}};
  }
  auto r = j.find("result");
  if (r == j.end() || !r->is_object())
    return failed{"result: expected an object"};
  bool ok = true;
  m.created = bool_field(*r, "created", ok);
  if (!ok)
    return failed{"result.created: expected a boolean"};
  m.canceled = bool_field(*r, "canceled", ok);
  if (!ok)
    return failed{"result.canceled: expected a boolean"};
  if (!int64_field(*r, "compact_revision", m.compact_revision) || m.compact_revision < 0)
    return failed{"result.compact_revision: expected an int64"};
  m.cancel_reason = string_field(*r, "cancel_reason");
  auto evs = r->find("events");
  if (evs != r->end() && !evs->is_array())
    return failed{"result.events: expected an array"};
  for (std::size_t i = 0; evs != r->end() && i < evs->size(); ++i) {
    auto where = "result.events[" + std::to_string(i) + "]";
    auto& e = (*evs)[i];
    if (!e.is_object())
      return failed{where + ": expected an object"};
    etcd_watch_message::event ev;
    // mvccpb.Event.EventType: PUT is 0, the default, which the gateway omits.
    auto t = e.find("type");
    if (t == e.end() || (t->is_string() && t->get<std::string>() == "PUT")
        || (t->is_number_integer() && t->get<int>() == 0))
      ev.deleted = false;
    else if ((t->is_string() && t->get<std::string>() == "DELETE")
             || (t->is_number_integer() && t->get<int>() == 1))
      ev.deleted = true;
    else
      return failed{where + ".type: expected PUT or DELETE (is " + t->dump() + ")"};
    auto kv = e.find("kv");
    if (kv == e.end() || !kv->is_object())
      return failed{where + ".kv: expected an object"};
    std::string key;
    if (ev.deleted) {
      // A deleted key keeps only its key and the deletion's revision.
      if (!int64_field(*kv, "mod_revision", ev.mod_revision) || ev.mod_revision <= 0)
        return failed{where + ".kv.mod_revision: expected a positive int64"};
      key = bytes_field(*kv, "key").value_or("");
    } else {
      auto parsed = parse_kv(*kv, where + ".kv");
      if (!parsed.ok())
        return failed{parsed.error};
      key = parsed.value->key;
      ev.mod_revision = parsed.value->mod_revision;
      if (auto name = scope.name_of(key)) {
        auto rec = to_lease({scope.ns, *name}, *parsed.value, where + ".kv");
        if (rec.ok())
          ev.record = std::move(rec.value);
        else
          ev.error = rec.error;
      }
    }
    auto name = scope.name_of(key);
    if (!name)
      return failed{where + ".kv.key: expected a key under " + scope.dir() + " (is \"" + key
                    + "\")"};
    ev.name = std::move(*name);
    m.events.push_back(std::move(ev));
  }
  return {std::move(m), {}};
}

} // namespace leasehold
