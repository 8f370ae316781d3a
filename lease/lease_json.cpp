#include "lease/lease_json.hpp"

#include "lease/json_read.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

constexpr std::string_view lease_api_version = "coordination.k8s.io/v1";

// --- reading -------------------------------------------------------------------

/// A member leasehold does not model: its value kept in `into[key]`, read
/// by nlohmann from its text (which checks what simdjson stepped over).
bool keep(od::value& v, std::string_view key, json& into) {
  std::string_view span;
  if (!raw_value(v, span))
    return false;
  auto j = json::parse(span.begin(), span.end(), nullptr, /*allow_exceptions*/ false);
  if (j.is_discarded())
    return false;
  into[std::string(key)] = std::move(j);
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

/// `s` between quotes; false when it needs escaping.
bool put_plain(std::string& out, std::string_view s) {
  if (!safe(s))
    return false;
  put_string(out, s);
  return true;
}

// --- the members ---------------------------------------------------------------

/// One modelled member of a Lease object, for the reader and the writer
/// (which skips it as to_json_value's set_or_erase does); in key order.
struct member {
  std::string_view key;
  bool (*read)(od::value&, lease&);
  bool (*present)(const lease&);
  bool (*write)(std::string&, const lease&);
};

template <std::size_t N>
constexpr bool in_key_order(const std::array<member, N>& m) {
  for (std::size_t i = 1; i < N; ++i)
    if (!(m[i - 1].key < m[i].key))
      return false;
  return true;
}

template <std::size_t N>
constexpr std::array<std::string_view, N> keys_of(const std::array<member, N>& m) {
  std::array<std::string_view, N> k{};
  for (std::size_t i = 0; i < N; ++i)
    k[i] = m[i].key;
  return k;
}

template <std::string lease::*F, bool Always = false>
constexpr member metadata_string(std::string_view key) {
  return {key, [](od::value& v, lease& l) { return read_plain(v, l.*F); },
          [](const lease& l) { return Always || !(l.*F).empty(); },
          [](std::string& o, const lease& l) { return put_plain(o, l.*F); }};
}

template <std::string lease_spec::*F>
constexpr member spec_string(std::string_view key) {
  return {key, [](od::value& v, lease& l) { return read_plain(v, l.spec.*F); },
          [](const lease& l) { return !(l.spec.*F).empty(); },
          [](std::string& o, const lease& l) { return put_plain(o, l.spec.*F); }};
}

template <std::optional<wall_time> lease_spec::*F>
constexpr member spec_time(std::string_view key) {
  return {key, [](od::value& v, lease& l) { return read_time(v, l.spec.*F); },
          [](const lease& l) { return (l.spec.*F).has_value(); },
          [](std::string& o, const lease& l) {
            put_string(o, format_micro_time(*(l.spec.*F)));
            return true;
          }};
}

constexpr std::array<member, 5> metadata_members = {{
  metadata_string<&lease::creation_timestamp>("creationTimestamp"),
  metadata_string<&lease::name, /*always*/ true>("name"),
  metadata_string<&lease::ns>("namespace"),
  metadata_string<&lease::resource_version>("resourceVersion"),
  metadata_string<&lease::uid>("uid"),
}};
static_assert(in_key_order(metadata_members));

constexpr std::array<member, 7> spec_members = {{
  spec_time<&lease_spec::acquire_time>("acquireTime"),
  spec_string<&lease_spec::holder_identity>("holderIdentity"),
  {"leaseDurationSeconds",
   [](od::value& v, lease& l) {
     int d = 0;
     if (!read_int(v, d))
       return false;
     l.spec.lease_duration_seconds = d;
     return true;
   },
   [](const lease& l) { return l.spec.lease_duration_seconds.has_value(); },
   [](std::string& o, const lease& l) {
     o += std::to_string(*l.spec.lease_duration_seconds);
     return true;
   }},
  {"leaseTransitions", [](od::value& v, lease& l) { return read_int(v, l.spec.lease_transitions); },
   [](const lease&) { return true; },
   [](std::string& o, const lease& l) {
     o += std::to_string(l.spec.lease_transitions);
     return true;
   }},
  spec_string<&lease_spec::preferred_holder>("preferredHolder"),
  spec_time<&lease_spec::renew_time>("renewTime"),
  spec_string<&lease_spec::strategy>("strategy"),
}};
static_assert(in_key_order(spec_members));

const json* part_of(const json& raw, const char* key) {
  if (!raw.is_object())
    return nullptr;
  auto it = raw.find(key);
  return it != raw.end() ? &*it : nullptr;
}

/// An object's members in key order, as nlohmann writes an object: the
/// `members` present in `l`, merged with `raw`'s members (if it is an
/// object) whose keys are not modelled. False when a value needs escaping.
template <std::size_t N>
bool merge_object(std::string& out, const std::array<member, N>& members, const lease& l,
                  const json* raw) {
  out += '{';
  bool first = true;
  auto comma = [&] {
    if (!first)
      out += ',';
    first = false;
  };
  auto modelled = [&](const member& m) {
    if (!m.present(l))
      return true;
    comma();
    put_string(out, m.key);
    out += ':';
    return m.write(out, l);
  };
  std::size_t i = 0;
  if (raw && raw->is_object())
    for (auto it = raw->begin(); it != raw->end(); ++it) {
      std::string_view rk = it.key();
      for (; i < N && members[i].key < rk; ++i)
        if (!modelled(members[i]))
          return false;
      if (i < N && members[i].key == rk)
        continue;   // written from the lease's member
      comma();
      out += json(it.key()).dump();
      out += ':';
      out += it->dump();
    }
  for (; i < N; ++i)
    if (!modelled(members[i]))
      return false;
  out += '}';
  return true;
}

/// The top level, as the writer writes it (the reader reads it itself:
/// read_lease).
constexpr std::array<member, 4> top_members = {{
  {"apiVersion", nullptr, [](const lease&) { return true; },
   [](std::string& o, const lease&) { return put_plain(o, lease_api_version); }},
  {"kind", nullptr, [](const lease&) { return true; },
   [](std::string& o, const lease&) { return put_plain(o, "Lease"); }},
  {"metadata", nullptr, [](const lease&) { return true; },
   [](std::string& o, const lease& l) {
     return merge_object(o, metadata_members, l, part_of(l.raw, "metadata"));
   }},
  {"spec", nullptr, [](const lease&) { return true; },
   [](std::string& o, const lease& l) {
     return merge_object(o, spec_members, l, part_of(l.raw, "spec"));
   }},
}};
static_assert(in_key_order(top_members));

} // namespace

const std::array<std::string_view, 5> modelled_metadata = keys_of(metadata_members);
const std::array<std::string_view, 7> modelled_spec = keys_of(spec_members);

namespace {

/// The members of a Lease object `top` into `l` (the rest kept in l.raw):
/// false when one is not plain, as read_plain_lease says.
bool read_lease(od::object& top, lease& l) {
  json rest;
  bool meta = false, spec = false;
  // A member of `part` (metadata or spec): into its member of l, or kept.
  auto in = [&](const auto& members, const char* part) {
    return [&, ms = &members, part](std::string_view k, od::value& v) {
      for (auto& m : *ms)
        if (k == m.key)
          return m.read(v, l);
      return keep(v, k, rest[part]);
    };
  };
  bool ok = each_member(top, [&](std::string_view k, od::value& v) {
    std::string kind;
    if (k == "apiVersion")
      return read_plain(v, kind);
    if (k == "kind")
      return read_plain(v, kind) && (kind.empty() || kind == "Lease");
    if (k == "metadata")   // a second one: the document keeps the last alone
      return !std::exchange(meta, true) && each_member(v, in(metadata_members, "metadata"));
    if (k == "spec")
      return !std::exchange(spec, true) && each_member(v, in(spec_members, "spec"));
    return keep(v, k, rest);
  });
  if (!ok || !meta || !spec || l.name.empty())
    return false;
  l.raw = std::move(rest);
  return true;
}

} // namespace

std::optional<lease> read_plain_lease(std::string_view text) {
  json_text t(text);
  od::object top;
  lease l;
  if (!t.object(top) || !read_lease(top, l) || !t.at_end())
    return std::nullopt;
  return l;
}

std::optional<std::vector<lease>> read_plain_lease_list(std::string_view text) {
  json_text t(text);
  od::object top;
  std::vector<lease> out;
  bool items = false;
  bool ok = t.object(top) && each_member(top, [&](std::string_view k, od::value& v) {
    if (k != "items")
      return skip(v);   // apiVersion, kind, metadata
    items = true;
    return each_element(v, [&](std::size_t, od::value& x) {
      od::object o;
      lease l;
      if (x.get_object().get(o) || !read_lease(o, l))
        return false;
      out.push_back(std::move(l));
      return true;
    });
  });
  if (!ok || !items || !t.at_end())
    return std::nullopt;
  return out;
}

std::optional<lease> read_plain_event(std::string_view line, std::string& type) {
  json_text t(line);
  od::object top;
  lease l;
  bool typed = false, has_object = false;
  bool ok = t.object(top) && each_member(top, [&](std::string_view k, od::value& v) {
    od::object o;
    if (k == "type")
      return !std::exchange(typed, true) && read_plain(v, type);
    if (k == "object")
      return !std::exchange(has_object, true) && !v.get_object().get(o) && read_lease(o, l);
    return false;   // another member: the document decides
  });
  if (!ok || !typed || !has_object || !t.at_end())
    return std::nullopt;
  return l;
}

bool write_plain_lease(const lease& l, std::string& out) {
  const auto size = out.size();
  bool ok = false;
  try {
    ok = merge_object(out, top_members, l, &l.raw);
  } catch (...) {
    // a raw value nlohmann cannot write: the document path says why
  }
  if (!ok)
    out.resize(size);
  return ok;
}

} // namespace leasehold
