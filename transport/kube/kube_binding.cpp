#include "transport/kube/kube_binding.hpp"

#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

// The objects and fields: docs/design.md, "Bound leases".

namespace leasehold {

using json = nlohmann::json;

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s)
    h = (h ^ c) * 16777619u;
  return h;
}

std::string incarnation_key(const session_binding& b) {
  return b.uid + "/" + std::to_string(b.incarnation);
}

std::string binding_text(const session_binding& b) {
  return b.session + "/" + incarnation_key(b) + "/" + std::to_string(b.term);
}

std::optional<session_binding> parse_binding(const std::string& text) {
  session_binding b;
  auto a = text.find('/');
  auto c = a == std::string::npos ? a : text.find('/', a + 1);
  auto d = c == std::string::npos ? c : text.find('/', c + 1);
  if (d == std::string::npos || a == 0)
    return std::nullopt;
  b.session = text.substr(0, a);
  b.uid = text.substr(a + 1, c - a - 1);
  try {
    b.incarnation = std::stoi(text.substr(c + 1, d - c - 1));
    b.term = std::stoi(text.substr(d + 1));
  } catch (...) {
    return std::nullopt;
  }
  return b;
}

namespace {

const json* metadata_member(const lease& l, const char* member) {
  if (!l.raw.is_object())
    return nullptr;
  auto m = l.raw.find("metadata");
  if (m == l.raw.end() || !m->is_object())
    return nullptr;
  auto x = m->find(member);
  return x != m->end() && x->is_object() ? &*x : nullptr;
}

} // namespace

void set_binding(lease& l, const std::optional<session_binding>& b) {
  if (!l.raw.is_object())
    l.raw = json::object();
  auto& meta = l.raw["metadata"];
  if (!meta.is_object())
    meta = json::object();
  for (const char* part : {"annotations", "labels"}) {
    auto& m = meta[part];
    if (!m.is_object())
      m = json::object();
    if (b)
      m[part[0] == 'a' ? session_annotation : session_label]
        = part[0] == 'a' ? binding_text(*b) : b->session;
    else
      m.erase(part[0] == 'a' ? session_annotation : session_label);
    if (m.empty())
      meta.erase(part);
  }
}

bool released_in(const lease& s, const session_binding& b) {
  return s.uid == b.uid && s.spec.lease_transitions == b.incarnation && released_record(s.spec);
}

bool has_binding_text(const lease& l) {
  auto a = metadata_member(l, "annotations");
  return a && a->contains(session_annotation);
}

std::optional<session_binding> binding_of(const lease& l) {
  auto a = metadata_member(l, "annotations");
  if (!a)
    return std::nullopt;
  auto v = a->find(session_annotation);
  if (v == a->end() || !v->is_string())
    return std::nullopt;
  auto b = parse_binding(v->get<std::string>());
  if (!b || b->term != l.spec.lease_transitions)
    return std::nullopt;   // stale: another writer took the Lease since (client-go keeps metadata)
  return b;
}

bool in_incarnation(const lease& s, const session_binding& b) {
  return s.uid == b.uid && s.spec.lease_transitions == b.incarnation
         && !s.spec.holder_identity.empty();
}

std::string session_lease_name(const std::string& identity) {
  std::string s;
  bool changed = false;
  for (char c : identity) {
    char low = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (low >= 'a' && low <= 'z') || (low >= '0' && low <= '9') || low == '-' || low == '.';
    s += ok ? low : '-';
    changed = changed || low != c || !ok;
  }
  std::string name = "lh-session-" + s;
  // A name and a label value both: at most 63 characters, alphanumeric at
  // the end; a hash keeps names apart that cutting or lowering would join.
  if (changed || name.size() > 63 || name.back() == '-' || name.back() == '.') {
    char h[10];
    std::snprintf(h, sizeof h, "-%08x", fnv1a(identity));
    name = name.substr(0, 54) + h;
  }
  return name;
}

} // namespace leasehold
