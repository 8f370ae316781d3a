#include "transport/lease_json.hpp"

#include <charconv>
#include <climits>

#include "transport/json_cursor.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

constexpr std::string_view lease_api_version = "coordination.k8s.io/v1";

/// The top level's members the writer writes, in key order.
constexpr std::array<std::string_view, 4> written_top = {"apiVersion", "kind", "metadata", "spec"};

// --- reading -------------------------------------------------------------------

bool ascii(std::string_view text) {
  for (unsigned char c : text)
    if (c >= 0x80)
      return false;
  return true;
}

/// A plain string next (no escape: its contents are its value).
bool read_plain(json_cursor& c, std::string& out) {
  std::string_view v;
  bool plain;
  if (!c.string(v, plain) || !plain)
    return false;
  out.assign(v.data(), v.size());
  return true;
}

/// An integer next that fits an int.
bool read_int(json_cursor& c, int& out) {
  std::string_view t;
  bool integer;
  if (!c.number(t, integer) || !integer)
    return false;
  long long v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || end != t.data() + t.size() || v < INT_MIN || v > INT_MAX)
    return false;
  out = static_cast<int>(v);
  return true;
}

bool read_time(json_cursor& c, std::optional<wall_time>& out) {
  std::string text;
  if (!read_plain(c, text))
    return false;
  out = parse_micro_time(text);
  return out.has_value();
}

/// A member leasehold does not model: its value kept in `into[key]`.
bool keep(json_cursor& c, std::string_view key, json& into) {
  std::string_view span;
  if (!c.value(&span))
    return false;
  auto v = json::parse(span.begin(), span.end(), nullptr, /*allow_exceptions*/ false);
  if (v.is_discarded())
    return false;
  into[std::string(key)] = std::move(v);
  return true;
}

// --- writing -------------------------------------------------------------------

/// Written by nlohmann as is, between quotes.
bool safe(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
      return false;
  return true;
}

void put_string(std::string& out, std::string_view s) {
  out += '"';
  out += s;
  out += '"';
}

/// An object's members in key order, as nlohmann writes an object: the
/// modelled `keys` (sorted) whose `present` is set, written by
/// `write(out, i)`, merged with `raw`'s members (if it is an object) whose
/// keys are not modelled.
template <std::size_t N, class Write>
void merge_object(std::string& out, const std::array<std::string_view, N>& keys,
                  const std::array<bool, N>& present, const json* raw, Write write) {
  out += '{';
  bool first = true;
  std::size_t i = 0;
  auto modelled = [&](std::size_t k) {
    if (!present[k])
      return;
    if (!first)
      out += ',';
    first = false;
    put_string(out, keys[k]);
    out += ':';
    write(out, k);
  };
  if (raw && raw->is_object())
    for (auto it = raw->begin(); it != raw->end(); ++it) {
      std::string_view rk = it.key();
      for (; i < N && keys[i] < rk; ++i)
        modelled(i);
      if (i < N && keys[i] == rk)
        continue;   // written from the lease's member
      if (!first)
        out += ',';
      first = false;
      out += json(it.key()).dump();
      out += ':';
      out += it->dump();
    }
  for (; i < N; ++i)
    modelled(i);
  out += '}';
}

const json* part_of(const json& raw, const char* key) {
  if (!raw.is_object())
    return nullptr;
  auto it = raw.find(key);
  return it != raw.end() ? &*it : nullptr;
}

} // namespace

const std::array<std::string_view, 5> modelled_metadata = {
  "creationTimestamp", "name", "namespace", "resourceVersion", "uid"};
const std::array<std::string_view, 7> modelled_spec = {
  "acquireTime", "holderIdentity", "leaseDurationSeconds", "leaseTransitions",
  "preferredHolder", "renewTime", "strategy"};

std::optional<lease> read_plain_lease(std::string_view text) {
  if (!ascii(text))
    return std::nullopt;
  json_cursor c(text);
  lease l;
  json rest;
  bool meta = false, spec = false;
  auto in_meta = [&](std::string_view k) {
    if (k == "name")
      return read_plain(c, l.name);
    if (k == "namespace")
      return read_plain(c, l.ns);
    if (k == "resourceVersion")
      return read_plain(c, l.resource_version);
    if (k == "uid")
      return read_plain(c, l.uid);
    if (k == "creationTimestamp")
      return read_plain(c, l.creation_timestamp);
    return keep(c, k, rest["metadata"]);
  };
  auto in_spec = [&](std::string_view k) {
    auto& s = l.spec;
    if (k == "holderIdentity")
      return read_plain(c, s.holder_identity);
    if (k == "leaseDurationSeconds") {
      int v;
      if (!read_int(c, v))
        return false;
      s.lease_duration_seconds = v;
      return true;
    }
    if (k == "acquireTime")
      return read_time(c, s.acquire_time);
    if (k == "renewTime")
      return read_time(c, s.renew_time);
    if (k == "leaseTransitions")
      return read_int(c, s.lease_transitions);
    if (k == "preferredHolder")
      return read_plain(c, s.preferred_holder);
    if (k == "strategy")
      return read_plain(c, s.strategy);
    return keep(c, k, rest["spec"]);
  };
  bool ok = c.object([&](std::string_view k) {
    if (k == "apiVersion")
      return c.value();
    if (k == "kind") {
      std::string kind;
      return read_plain(c, kind) && (kind.empty() || kind == "Lease");
    }
    if (k == "metadata") {
      if (meta)
        return false;   // a second one: the document keeps the last alone
      meta = true;
      return c.object(in_meta);
    }
    if (k == "spec") {
      if (spec)
        return false;
      spec = true;
      return c.object(in_spec);
    }
    return keep(c, k, rest);
  });
  if (!ok || !c.at_end() || !meta || !spec || l.name.empty())
    return std::nullopt;
  l.raw = std::move(rest);
  return l;
}

bool write_plain_lease(const lease& l, std::string& out) {
  const auto& s = l.spec;
  for (const std::string* f : {&l.name, &l.ns, &l.resource_version, &l.uid,
                               &l.creation_timestamp, &s.holder_identity, &s.preferred_holder,
                               &s.strategy})
    if (!safe(*f))
      return false;
  const auto size = out.size();
  try {
    // Present as to_json_value writes them (set_or_erase: empty is absent).
    const std::array<bool, 4> all = {true, true, true, true};
    const std::array<bool, 5> meta_set = {!l.creation_timestamp.empty(), true, !l.ns.empty(),
                                          !l.resource_version.empty(), !l.uid.empty()};
    const std::array<bool, 7> spec_set = {s.acquire_time.has_value(), !s.holder_identity.empty(),
                                          s.lease_duration_seconds.has_value(), true,
                                          !s.preferred_holder.empty(), s.renew_time.has_value(),
                                          !s.strategy.empty()};
    merge_object(out, written_top, all, &l.raw, [&](std::string& o, std::size_t i) {
      switch (i) {
        case 0: put_string(o, lease_api_version); break;
        case 1: put_string(o, "Lease"); break;
        case 2:
          merge_object(o, modelled_metadata, meta_set, part_of(l.raw, "metadata"),
                       [&](std::string& m, std::size_t k) {
                         // modelled_metadata's order
                         const std::string* v[] = {&l.creation_timestamp, &l.name, &l.ns,
                                                   &l.resource_version, &l.uid};
                         put_string(m, *v[k]);
                       });
          break;
        default:
          merge_object(o, modelled_spec, spec_set, part_of(l.raw, "spec"),
                       [&](std::string& p, std::size_t k) {
                         switch (k) {   // modelled_spec's order
                           case 0: put_string(p, format_micro_time(*s.acquire_time)); break;
                           case 1: put_string(p, s.holder_identity); break;
                           case 2: p += std::to_string(*s.lease_duration_seconds); break;
                           case 3: p += std::to_string(s.lease_transitions); break;
                           case 4: put_string(p, s.preferred_holder); break;
                           case 5: put_string(p, format_micro_time(*s.renew_time)); break;
                           default: put_string(p, s.strategy); break;
                         }
                       });
      }
    });
  } catch (...) {
    out.resize(size);   // a raw value nlohmann cannot write: the document path says why
    return false;
  }
  return true;
}

} // namespace leasehold
