#include "transport/etcd_transport.hpp"
#include "transport/thread_name.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "transport/kube_config.hpp"
#include "transport/lease_watch.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

/// One key-value as /v3/kv/range returns it (int64 fields are JSON strings,
/// absent when zero; key and value base64).
struct etcd_kv {
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::string lease_id;   // "0" or absent: no lease
  std::string value;
};

/// An int64 field sent as a JSON string (or number); 0 when absent.
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

/// gRPC status code (in the gateway's error body) to an error kind.
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

/// Errors after which another endpoint may answer.
bool fail_over_on(error_kind k) {
  return k == error_kind::connection_refused || k == error_kind::disconnected
         || k == error_kind::timeout
         || k == error_kind::server_error || k == error_kind::tls_error;
}

/// One key-value object of a range reply or a watch event (`where` names
/// it in errors: "kvs[0]", "events[1].kv").
parse_result<etcd_kv> parse_kv(const json& j, const std::string& where) {
  parse_result<etcd_kv> out;
  if (!j.is_object()) {
    out.error = where + ": expected an object";
    return out;
  }
  etcd_kv kv;
  if (!int64_field(j, "create_revision", kv.create_revision) || kv.create_revision <= 0) {
    out.error = where + ".create_revision: expected a positive int64";
    return out;
  }
  if (!int64_field(j, "mod_revision", kv.mod_revision) || kv.mod_revision <= 0) {
    out.error = where + ".mod_revision: expected a positive int64";
    return out;
  }
  kv.lease_id = id_field(j, "lease");
  auto v = j.find("value");
  auto decoded = v != j.end() && v->is_string() ? decode_base64(v->get<std::string>())
                                                 : std::optional<std::string>{""};
  if (!decoded) {
    out.error = where + ".value: invalid base64";
    return out;
  }
  kv.value = std::move(*decoded);
  out.value = std::move(kv);
  return out;
}

/// kvs[0] of a range reply; nullopt when the key does not exist.
parse_result<std::optional<etcd_kv>> first_kv(const json& reply) {
  parse_result<std::optional<etcd_kv>> out;
  auto it = reply.find("kvs");
  if (it == reply.end() || (it->is_array() && it->empty())) {
    out.value = std::optional<etcd_kv>{};
    return out;
  }
  if (!it->is_array()) {
    out.error = "kvs: expected an array of objects";
    return out;
  }
  auto kv = parse_kv((*it)[0], "kvs[0]");
  if (!kv.ok()) {
    out.error = kv.error;
    return out;
  }
  out.value = std::move(kv.value);
  return out;
}

/// The lease record for `kv` (of a range reply or a watch event, `where`):
/// the value's holder, duration and acquire time, leaseTransitions =
/// create_revision, resourceVersion = mod_revision.
parse_result<lease> to_lease(const lease_key& k, const etcd_kv& kv,
                             const std::string& where = "kvs[0]") {
  parse_result<lease> out;
  auto v = json::parse(kv.value, nullptr, false);
  if (!v.is_object()) {
    out.error = where + ".value: not a JSON object";
    return out;
  }
  lease l;
  l.ns = k.ns;
  l.name = k.name;
  l.resource_version = std::to_string(kv.mod_revision);
  if (kv.create_revision > INT_MAX) {
    out.error = where + ".create_revision: " + std::to_string(kv.create_revision)
                + " exceeds the fencing token range (int32)";
    return out;
  }
  l.spec.lease_transitions = static_cast<int>(kv.create_revision);
  if (auto h = v.find("holderIdentity"); h != v.end() && h->is_string())
    l.spec.holder_identity = h->get<std::string>();
  if (auto d = v.find("leaseDurationSeconds"); d != v.end() && d->is_number_integer())
    l.spec.lease_duration_seconds = d->get<int>();
  if (auto a = v.find("acquireTime"); a != v.end() && a->is_string())
    l.spec.acquire_time = parse_micro_time(a->get<std::string>());
  out.value = std::move(l);
  return out;
}

/// header.revision of a reply; 0 when absent or not an int64.
std::int64_t header_revision(const json& reply) {
  std::int64_t rev = 0;
  auto header = reply.find("header");
  if (header == reply.end() || !header->is_object() || !int64_field(*header, "revision", rev))
    return 0;
  return rev;
}

} // namespace

std::vector<std::string> validate(const etcd_config& cfg) {
  std::vector<std::string> errs;
  if (cfg.endpoints.empty())
    errs.push_back("etcd.endpoints: must list at least one endpoint");
  for (size_t i = 0; i < cfg.endpoints.size(); ++i) {
    auto& ep = cfg.endpoints[i];
    bool https = ep.rfind("https://", 0) == 0;
    if (!https && ep.rfind("http://", 0) != 0)
      errs.push_back("etcd.endpoints[" + std::to_string(i)
                     + "]: must start with http:// or https:// (is \"" + ep + "\")");
    else if (!https && !cfg.http.ca_file.empty())
      errs.push_back("etcd.endpoints[" + std::to_string(i)
                     + "]: ca_file is set but the endpoint is http://");
  }
  if (cfg.prefix.empty() || cfg.prefix.front() != '/')
    errs.push_back("etcd.prefix: must start with / (is \"" + cfg.prefix + "\")");
  if (cfg.http.client_cert_file.empty() != cfg.http.client_key_file.empty())
    errs.push_back("etcd.cert_file, etcd.key_file: must be set together");
  if (cfg.username.empty() != cfg.password.empty())
    errs.push_back("etcd.username, etcd.password: must be set together");
  return errs;
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

parse_result<etcd_watch_message> parse_etcd_watch_line(const std::string& line,
                                                       const lease_key& k) {
  parse_result<etcd_watch_message> out;
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "not a JSON object";
    return out;
  }
  etcd_watch_message m;
  if (auto e = j.find("error"); e != j.end()) {
    if (!e->is_object()) {
      out.error = "error: expected an object";
      return out;
    }
    m.error = true;
    m.grpc_code = int_field(*e, "grpc_code");
    m.http_code = int_field(*e, "http_code");
    m.message = string_field(*e, "message");
    out.value = std::move(m);
    return out;
  }
  auto r = j.find("result");
  if (r == j.end() || !r->is_object()) {
    out.error = "result: expected an object";
    return out;
  }
  bool ok = true;
  m.created = bool_field(*r, "created", ok);
  if (!ok) {
    out.error = "result.created: expected a boolean";
    return out;
  }
  m.canceled = bool_field(*r, "canceled", ok);
  if (!ok) {
    out.error = "result.canceled: expected a boolean";
    return out;
  }
  if (!int64_field(*r, "compact_revision", m.compact_revision) || m.compact_revision < 0) {
    out.error = "result.compact_revision: expected an int64";
    return out;
  }
  m.cancel_reason = string_field(*r, "cancel_reason");
  auto evs = r->find("events");
  if (evs != r->end() && !evs->is_array()) {
    out.error = "result.events: expected an array";
    return out;
  }
  for (std::size_t i = 0; evs != r->end() && i < evs->size(); ++i) {
    auto where = "result.events[" + std::to_string(i) + "]";
    auto& e = (*evs)[i];
    if (!e.is_object()) {
      out.error = where + ": expected an object";
      return out;
    }
    etcd_watch_message::event ev;
    // mvccpb.Event.EventType: PUT is 0, the default, which the gateway omits.
    auto t = e.find("type");
    if (t == e.end() || (t->is_string() && t->get<std::string>() == "PUT")
        || (t->is_number_integer() && t->get<int>() == 0))
      ev.deleted = false;
    else if ((t->is_string() && t->get<std::string>() == "DELETE")
             || (t->is_number_integer() && t->get<int>() == 1))
      ev.deleted = true;
    else {
      out.error = where + ".type: expected PUT or DELETE (is " + t->dump() + ")";
      return out;
    }
    auto kv = e.find("kv");
    if (kv == e.end() || !kv->is_object()) {
      out.error = where + ".kv: expected an object";
      return out;
    }
    if (ev.deleted) {
      // A deleted key keeps only its key and the deletion's revision.
      if (!int64_field(*kv, "mod_revision", ev.mod_revision) || ev.mod_revision <= 0) {
        out.error = where + ".kv.mod_revision: expected a positive int64";
        return out;
      }
    } else {
      auto parsed = parse_kv(*kv, where + ".kv");
      if (!parsed.ok()) {
        out.error = parsed.error;
        return out;
      }
      auto rec = to_lease(k, *parsed.value, where + ".kv");
      if (!rec.ok()) {
        out.error = rec.error;
        return out;
      }
      ev.mod_revision = parsed.value->mod_revision;
      ev.record = std::move(rec.value);
    }
    m.events.push_back(std::move(ev));
  }
  out.value = std::move(m);
  return out;
}

struct etcd_client::impl {
  etcd_config cfg;
  std::vector<std::unique_ptr<kube_client>> servers;
  size_t current = 0;
  std::string token;   // auth token ("" without auth or before authenticate)

  explicit impl(etcd_config c) : cfg(std::move(c)) {
    for (auto& ep : cfg.endpoints) {
      auto conn = cfg.http;
      conn.server = ep;
      servers.push_back(std::make_unique<kube_client>(std::move(conn)));
    }
  }

  /// One exchange with the current server: the parsed JSON body of a 2xx
  /// reply, or the error (gRPC code mapped) of anything else.
  api_result<json> exchange(kube_client& server, const std::string& path, const json& body) {
    http_headers headers;
    if (!token.empty())
      headers.emplace_back("Authorization", token);
    auto text = body.dump();
    auto r = server.send("POST", path, &text, headers);
    if (!r.ok())
      return api_result<json>::failure(r.error);
    auto parsed = json::parse(r.value->body, nullptr, false);
    int status = r.value->status;
    if (status >= 200 && status < 300) {
      if (!parsed.is_object())
        return api_result<json>::failure(api_error{error_kind::malformed_body, status, "POST", path,
            "body: not a JSON object"});
      return api_result<json>::success(std::move(parsed));
    }
    int code = 0;
    std::string reason = "HTTP " + std::to_string(status);
    if (parsed.is_object()) {
      if (auto c = parsed.find("code"); c != parsed.end() && c->is_number_integer())
        code = c->get<int>();
      if (auto m = parsed.find("message"); m != parsed.end() && m->is_string())
        reason = m->get<std::string>();
    }
    return api_result<json>::failure(
      api_error{grpc_kind(code, status), status, "POST", path, reason});
  }

  bool authenticate(kube_client& server, api_error& err) {
    const std::string path = "/v3/auth/authenticate";
    auto r = exchange(server, path, {{"name", cfg.username}, {"password", cfg.password}});
    if (!r.ok()) {
      err = r.error;
      return false;
    }
    auto it = r.value->find("token");
    if (it == r.value->end() || !it->is_string() || it->get<std::string>().empty()) {
      err = api_error{error_kind::malformed_body, 0, "POST", path, "token: missing"};
      return false;
    }
    token = it->get<std::string>();
    return true;
  }

  /// POST `body` to `path`, failing over between endpoints.
  api_result<json> call(const std::string& path, const json& body) {
    api_error last = api_error{error_kind::other, 0, "POST", path, "no endpoints"};
    bool reauthenticated = false;
    for (size_t tries = 0; tries < servers.size(); ++tries) {
      auto& server = *servers[current];
      if (!cfg.username.empty() && token.empty() && !authenticate(server, last)) {
        if (!fail_over_on(last.kind))
          return api_result<json>::failure(last);
        current = (current + 1) % servers.size();
        continue;
      }
      auto r = exchange(server, path, body);
      if (r.ok())
        return r;
      last = r.error;
      last.reason += " (endpoint " + cfg.endpoints[current] + ")";
      if (r.kind() == error_kind::unauthorized && !cfg.username.empty() && !reauthenticated) {
        token.clear();   // simple tokens expire: authenticate again, once
        reauthenticated = true;
        --tries;
        continue;
      }
      if (!fail_over_on(r.kind()))
        return api_result<json>::failure(last);
      current = (current + 1) % servers.size();
    }
    return api_result<json>::failure(last);
  }

  /// One streaming POST (a watch) to the current endpoint, authenticated
  /// like call(). A failure after which another endpoint may answer moves
  /// the next call to the next endpoint, except a stream that opened and
  /// then went quiet for `idle` (kind timeout): nothing says its member is
  /// unwell.
  api_error stream(const std::string& path, const json& body, std::chrono::milliseconds idle,
                   const std::function<void()>& on_open,
                   const std::function<bool(const char*, std::size_t)>& on_data) {
    auto& server = *servers[current];
    api_error err;
    if (!cfg.username.empty() && token.empty() && !authenticate(server, err)) {
      err.reason += " (endpoint " + cfg.endpoints[current] + ")";
      if (fail_over_on(err.kind))
        current = (current + 1) % servers.size();
      return err;
    }
    http_headers headers;
    if (!token.empty())
      headers.emplace_back("Authorization", token);
    auto text = body.dump();
    bool opened = false;
    err = server.stream("POST", path, &text, headers, idle, [&] {
      opened = true;
      on_open();
    }, on_data);
    if (err.kind == error_kind::none)
      return err;
    err.reason += " (endpoint " + cfg.endpoints[current] + ")";
    if (err.kind == error_kind::unauthorized)
      token.clear();   // authenticate again on the next stream
    if (fail_over_on(err.kind) && !(opened && err.kind == error_kind::timeout))
      current = (current + 1) % servers.size();
    return err;
  }

  // -- the lease mapping -------------------------------------------------------

  std::string key_of(const lease_key& k) const { return cfg.prefix + "/" + k.ns + "/" + k.name; }

  static std::string value_of(const lease_spec& s) {
    json v = {{"holderIdentity", s.holder_identity}};
    if (s.lease_duration_seconds)
      v["leaseDurationSeconds"] = *s.lease_duration_seconds;
    if (s.acquire_time)
      v["acquireTime"] = format_micro_time(*s.acquire_time);
    return v.dump();
  }

  struct current_key {
    std::optional<etcd_kv> kv;
    std::optional<lease> record;
    std::int64_t revision = 0;   // the store's revision the range was read at
  };

  api_result<current_key> range(const lease_key& k) {
    const std::string path = "/v3/kv/range";
    auto r = call(path, {{"key", encode_base64(key_of(k))}});
    if (!r.ok())
      return api_result<current_key>::failure(r.error);
    auto kv = first_kv(*r.value);
    if (!kv.ok())
      return api_result<current_key>::failure(
        api_error{error_kind::malformed_body, 200, "POST", path, kv.error});
    current_key out;
    out.kv = *kv.value;
    out.revision = header_revision(*r.value);
    if (out.kv) {
      auto rec = to_lease(k, *out.kv);
      if (!rec.ok())
        return api_result<current_key>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, rec.error});
      out.record = std::move(rec.value);
    }
    return api_result<current_key>::success(std::move(out));
  }

  void revoke(const std::string& id) {
    if (!id.empty() && id != "0")
      call("/v3/lease/revoke", {{"ID", id}});
  }

  api_error not_found(const lease_key& k, std::string why) {
    return api_error{error_kind::not_found, 404, "POST", "/v3/kv/range " + key_of(k),
        std::move(why)};
  }

  api_error conflict(const std::string& path, const lease& cur, error_kind kind) {
    return api_error{kind, 409, "POST", path,
        "key held by \"" + cur.spec.holder_identity + "\" in term "
          + std::to_string(cur.spec.lease_transitions)};
  }

  api_result<lease> get_lease(const lease_key& k) {
    auto cur = range(k);
    if (!cur.ok())
      return api_result<lease>::failure(cur.error);
    if (!cur.value->record) {
      auto e = not_found(k, "no key " + key_of(k));
      e.store_revision = cur.value->revision;
      return api_result<lease>::failure(std::move(e));
    }
    auto rec = *cur.value->record;
    // The remaining TTL of the key's etcd lease: a follower judges from it
    // whether the key could have expired when it vanishes (docs/safety.md,
    // "Writes from outside the protocol"). A key without a lease (written
    // by hand) has none; a failed read leaves it unknown (judged as "could
    // not have expired").
    auto& id = cur.value->kv->lease_id;
    if (!id.empty() && id != "0") {
      auto t = call("/v3/lease/timetolive", {{"ID", id}});
      std::int64_t ttl = 0;
      if (t.ok() && int64_field(*t.value, "TTL", ttl))
        rec.ttl_seconds = ttl;
    }
    return api_result<lease>::success(std::move(rec));
  }

  api_result<lease> create_lease(const lease& l) {
    const std::string grant_path = "/v3/lease/grant";
    int ttl = std::max(1, l.spec.lease_duration_seconds.value_or(1));
    auto g = call(grant_path, {{"TTL", std::to_string(ttl)}});
    if (!g.ok())
      return api_result<lease>::failure(g.error);
    auto id = id_field(*g.value, "ID");
    if (id.empty() || id == "0")
      return api_result<lease>::failure(
        api_error{error_kind::malformed_body, 200, "POST", grant_path, "ID: missing"});
    const std::string path = "/v3/kv/txn";
    auto key = encode_base64(key_of(l.key()));
    json txn = {
      {"compare",
       json::array({{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"},
                     {"create_revision", "0"}}})},
      {"success",
       json::array({{{"request_put",
                      {{"key", key}, {"value", encode_base64(value_of(l.spec))}, {"lease", id}}}}})},
      {"failure", json::array({{{"request_range", {{"key", key}}}}})},
    };
    auto t = call(path, txn);
    if (!t.ok()) {
      revoke(id);   // the put may or may not have happened: its key dies with the lease
      return api_result<lease>::failure(t.error);
    }
    if (t.value->value("succeeded", false)) {
      std::int64_t rev = header_revision(*t.value);
      if (rev <= 0) {
        revoke(id);
        return api_result<lease>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, "header.revision: missing"});
      }
      etcd_kv kv{rev, rev, id, value_of(l.spec)};
      auto rec = to_lease(l.key(), kv);
      if (!rec.ok()) {
        revoke(id);
        return api_result<lease>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, rec.error});
      }
      return api_result<lease>::success(std::move(*rec.value));
    }
    revoke(id);
    auto cur = range(l.key());
    if (cur.ok() && cur.value->record)
      return api_result<lease>::failure(conflict(path, *cur.value->record,
                                                 error_kind::already_exists));
    return api_result<lease>::failure(
      api_error{error_kind::already_exists, 409, "POST", path, "key exists"});
  }

  api_result<lease> update_lease(const lease& l) {
    auto cur = range(l.key());
    if (!cur.ok())
      return api_result<lease>::failure(cur.error);
    if (!cur.value->record)
      return api_result<lease>::failure(
        not_found(l.key(), "no key " + key_of(l.key()) + " (its etcd lease expired or was revoked)"));
    auto& rec = *cur.value->record;
    auto& kv = *cur.value->kv;
    bool same_term = rec.spec.lease_transitions == l.spec.lease_transitions;
    if (l.spec.holder_identity.empty()) {   // release
      if (!same_term)
        return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
      // The released record on the key (same lease, if the term is still
      // this one), and no revoke: followers tell the holder's own release
      // from a delete or revoke by somebody else by it, a polling follower
      // too (it may never see a key that is gone in between). A follower
      // takes it (delete if unchanged + create); untaken, it goes with the
      // etcd lease's TTL.
      const std::string path = "/v3/kv/txn";
      auto key = encode_base64(key_of(l.key()));
      json txn = {
        {"compare", json::array({{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"},
                                  {"create_revision", std::to_string(kv.create_revision)}}})},
        {"success", json::array({{{"request_put",
                                   {{"key", key}, {"value", encode_base64(value_of(l.spec))},
                                    {"lease", kv.lease_id}}}}})},
      };
      auto m = call(path, txn);
      if (!m.ok())
        return api_result<lease>::failure(m.error);
      if (!m.value->value("succeeded", false))
        return api_result<lease>::failure(conflict(path, rec, error_kind::conflict));
      lease out = rec;
      out.spec = l.spec;
      out.spec.lease_transitions = rec.spec.lease_transitions;
      if (auto rev = header_revision(*m.value); rev > 0)
        out.resource_version = std::to_string(rev);
      return api_result<lease>::success(std::move(out));
    }
    if (!rec.spec.holder_identity.empty() && rec.spec.holder_identity != l.spec.holder_identity)
      return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
    if (same_term) {   // renew
      const std::string path = "/v3/lease/keepalive";
      auto r = call(path, {{"ID", kv.lease_id}});
      if (!r.ok())
        return api_result<lease>::failure(r.error);
      std::int64_t ttl = 0;
      auto result = r.value->find("result");
      if (result == r.value->end() || !result->is_object() || !int64_field(*result, "TTL", ttl))
        return api_result<lease>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, "result.TTL: missing"});
      if (ttl <= 0)
        return api_result<lease>::failure(
          not_found(l.key(), "etcd lease " + kv.lease_id + " expired"));
      return api_result<lease>::success(rec);
    }
    // A new term on a released record (its revoke did not follow) or on a
    // record naming this holder (the elector re-takes its own ended term):
    // delete the old key if nobody wrote it since, then create it anew (a
    // new create_revision, so a new term).
    if (l.resource_version != rec.resource_version)
      return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
    const std::string path = "/v3/kv/txn";
    auto key = encode_base64(key_of(l.key()));
    json txn = {
      {"compare", json::array({{{"key", key}, {"target", "MOD"}, {"result", "EQUAL"},
                                {"mod_revision", rec.resource_version}}})},
      {"success", json::array({{{"request_delete_range", {{"key", key}}}}})},
    };
    auto d = call(path, txn);
    if (!d.ok())
      return api_result<lease>::failure(d.error);
    if (!d.value->value("succeeded", false))
      return api_result<lease>::failure(conflict(path, rec, error_kind::conflict));
    revoke(kv.lease_id);
    auto created = create_lease(l);
    if (!created.ok() && created.kind() == error_kind::already_exists)
      created.error.kind = error_kind::conflict;
    return created;
  }
};

etcd_client::etcd_client(etcd_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {}

etcd_client::~etcd_client() = default;

template <class F>
api_result<lease> guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return api_result<lease>::failure(
      api_error{error_kind::other, 0, "POST", what, std::string("internal error: ") + e.what()});
  }
}

api_result<etcd_lease_state> etcd_client::read_lease(const lease_key& k) {
  const std::string path = "/v3/kv/range";
  try {
    auto cur = impl_->range(k);
    if (!cur.ok())
      return api_result<etcd_lease_state>::failure(cur.error);
    if (cur.value->revision <= 0)
      return api_result<etcd_lease_state>::failure(
        api_error{error_kind::malformed_body, 200, "POST", path, "header.revision: missing"});
    return api_result<etcd_lease_state>::success({cur.value->record, cur.value->revision});
  } catch (const std::exception& e) {
    return api_result<etcd_lease_state>::failure(
      api_error{error_kind::other, 0, "POST", path, std::string("internal error: ") + e.what()});
  }
}

api_error etcd_client::stream(const std::string& path, const nlohmann::json& body,
                              std::chrono::milliseconds idle_timeout,
                              const std::function<void()>& on_open,
                              const std::function<bool(const char*, std::size_t)>& on_data) {
  try {
    return impl_->stream(path, body, idle_timeout, on_open, on_data);
  } catch (const std::exception& e) {
    return api_error{error_kind::other, 0, "POST", path, std::string("internal error: ") + e.what()};
  }
}

void etcd_client::stream_failed(error_kind kind) {
  if (kind == error_kind::unauthorized)
    impl_->token.clear();   // an expired simple token: authenticate again
  if (fail_over_on(kind))
    impl_->current = (impl_->current + 1) % impl_->servers.size();
}

void etcd_client::stop() {
  for (auto& server : impl_->servers)
    server->stop();
}

const etcd_config& etcd_client::config() const {
  return impl_->cfg;
}

api_result<lease> etcd_client::get_lease(const lease_key& k) {
  return guarded("/v3/kv/range", [&] { return impl_->get_lease(k); });
}

api_result<lease> etcd_client::create_lease(const lease& l) {
  return guarded("/v3/kv/txn", [&] { return impl_->create_lease(l); });
}

api_result<lease> etcd_client::update_lease(const lease& l) {
  return guarded("/v3/kv/txn", [&] { return impl_->update_lease(l); });
}

std::string etcd_client::key_of(const lease_key& k) const {
  return impl_->key_of(k);
}

const std::string& etcd_client::current_endpoint() const {
  return impl_->cfg.endpoints.at(impl_->current);
}

namespace {

/// The etcd watch of one lease key: POST /v3/watch on the gateway from the
/// revision after the last one delivered (no revision: the key is read
/// first and its state delivered, then watched from the read's revision +
/// 1). PUT events are records, DELETE events (a revoked or expired etcd
/// lease, too) `deleted`. A watch canceled because its start revision was
/// compacted re-reads the current state; so does a stream that opened and
/// then stayed quiet for idle_timeout (a renew on etcd writes nothing: a
/// healthy leader's key is silent), without going down: a member that
/// stopped answering, or lost its quorum (a watch on it would stay open and
/// silent), fails that read, which moves to the next endpoint; so does a
/// broken or failed stream. The loop itself is lease_watch_loop's.
class etcd_lease_watcher : public lease_watch_loop {
public:
  etcd_lease_watcher(etcd_config cfg, lease_watch_request req)
    : lease_watch_loop(std::move(req)), client_(std::move(cfg)) {
    auto& rv = watch_request().resource_version;
    auto last = parse_revision(rv);
    next_ = last > 0 ? last + 1 : 0;
    present_ = last > 0;
    start();
  }
  ~etcd_lease_watcher() override { halt(); }

private:
  static std::int64_t parse_revision(const std::string& rv) {
    if (rv.empty() || rv.size() > 18 || rv.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    return std::stoll(rv);
  }

  api_error prepare() override {
    if (next_ > 0)
      return {};
    auto st = client_.read_lease(watch_request().lease);   // fails over by itself
    if (!st.ok())
      return st.error;
    if (st.value->record) {
      present_ = true;
      send({lease_watch_event::kind::record, std::move(st.value->record), {}});
    } else if (present_) {
      present_ = false;   // gone while we were not watching (compacted away)
      send({lease_watch_event::kind::deleted, std::nullopt, {}});
    }
    next_ = st.value->revision + 1;
    return {};
  }

  request next_request() override { return {"POST", "/v3/watch"}; }

  std::string endpoint_note() const override {
    return " (endpoint " + client_.current_endpoint() + ")";
  }

  api_error open(const request& r, std::chrono::milliseconds idle,
                 const std::function<void()>& on_open,
                 const std::function<bool(const char*, std::size_t)>& on_data) override {
    json body = {{"create_request",
                  {{"key", encode_base64(client_.key_of(watch_request().lease))},
                   {"start_revision", std::to_string(next_)},
                   {"progress_notify", true}}}};
    bool opened = false;
    auto err = client_.stream(r.path, body, idle, [&] {
      opened = true;
      on_open();
    }, on_data);
    if (opened && err.kind == error_kind::timeout) {
      // Quiet, not broken: read the key again (a linearizable range, so a
      // member cut off from its quorum fails it and the read, then the
      // stream, move to the next endpoint), then watch on from that read.
      next_ = 0;
      return api_error{};
    }
    return err;
  }

  void abort() override { client_.stop(); }

  std::optional<api_error> on_line(const std::string& line, const request& r,
                                   bool& delivered) override {
    auto parsed = parse_etcd_watch_line(line, watch_request().lease);
    if (!parsed.ok())
      return malformed(r, "malformed watch message: " + parsed.error + " (endpoint "
                          + client_.current_endpoint() + ")");
    auto& m = *parsed.value;
    if (m.error) {
      api_error err{grpc_kind(m.grpc_code, m.http_code), m.http_code, r.verb, r.path,
                    "watch error: " + m.message + " (endpoint " + client_.current_endpoint() + ")",
                    0};
      client_.stream_failed(err.kind);
      return err;
    }
    if (m.canceled) {
      if (m.compact_revision > 0) {
        next_ = 0;   // the revision we wanted is gone: read the current state again
        return api_error{};
      }
      return api_error{error_kind::other, 200, r.verb, r.path,
                       "watch canceled by the server"
                         + (m.cancel_reason.empty() ? std::string{} : ": " + m.cancel_reason)
                         + " (endpoint " + client_.current_endpoint() + ")",
                       0};
    }
    delivered = true;
    for (auto& ev : m.events) {
      next_ = std::max(next_, ev.mod_revision + 1);
      present_ = !ev.deleted;
      if (ev.deleted)
        send({lease_watch_event::kind::deleted, std::nullopt, {}});
      else
        send({lease_watch_event::kind::record, std::move(ev.record), {}});
    }
    return std::nullopt;
  }

  etcd_client client_;
  std::int64_t next_ = 0;   // the revision the next stream starts at (0: read first)
  bool present_ = false;    // what the subscriber was last told: the key exists
};

lease_transport_actor::behavior_type etcd_transport(lease_transport_actor::pointer self,
                                                    std::shared_ptr<etcd_client> client) {
  name_this_thread("lh.etcd");   // detached: this runs on the actor's own thread
  // One watch per subscriber, each on its own thread with its own client
  // (own connections, own endpoint failover).
  auto watch = watch_per_subscriber(self, [client](lease_watch_request req) {
    return std::make_unique<etcd_lease_watcher>(client->config(), std::move(req));
  });
  return {
    [client](get_lease_atom, const lease_key& k) -> lease_reply {
      return client->get_lease(k);
    },
    [client](create_lease_atom, const lease& l) -> lease_reply {
      return client->create_lease(l);
    },
    [client](update_lease_atom, const lease& l) -> lease_reply {
      return client->update_lease(l);
    },
    [](post_event_atom, const kube_event&) -> event_reply {
      return event_reply::success(true);   // etcd keeps no Events
    },
    [watch](watch_lease_atom, lease_watch_request& req) { watch(req); },
  };
}

} // namespace

lease_transport_actor spawn_etcd_transport(caf::actor_system& sys, etcd_config cfg) {
  return sys.spawn<caf::detached>(etcd_transport, std::make_shared<etcd_client>(std::move(cfg)));
}

} // namespace leasehold
