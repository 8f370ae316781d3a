// How a Kubernetes Lease names the session it is bound to: the annotation
// and label, their text, and the session Lease's name. Shared by the
// session actor, the followers' evidence, `leasehold status` and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "leasehold/lease.hpp"

namespace leasehold {

/// The annotation that binds a Lease to a session: "<session>/<uid>/<incarnation>/<term>",
/// valid only while <term> is the Lease's own leaseTransitions.
constexpr const char* session_annotation = "leasehold.io/session";
/// The label naming a bound Lease's session (kubectl get leases -L leasehold.io/session).
constexpr const char* session_label = "leasehold.io/session";
/// The label every session Lease carries ("leasehold.io/role=session").
constexpr const char* role_label = "leasehold.io/role";

/// A Lease's binding to a session incarnation (its annotation), valid only
/// when written for the Lease's own term.
struct session_binding {
  std::string session;
  std::string uid;
  int incarnation = 0;
  int term = -1;
};
std::optional<session_binding> binding_of(const lease& l);
/// Whether session Lease `s` is still in the incarnation `b` names (held,
/// same uid and leaseTransitions).
bool in_incarnation(const lease& s, const session_binding& b);

/// The session Lease of replica `identity`: "lh-session-<identity>", made a
/// valid object name (lowercase, a hash suffix when too long).
std::string session_lease_name(const std::string& identity);

/// "<uid>/<incarnation>": a session incarnation, as the followers' table keys it.
std::string incarnation_key(const session_binding& b);
/// The annotation's text: "<session>/<uid>/<incarnation>/<term>".
std::string binding_text(const session_binding& b);
std::optional<session_binding> parse_binding(const std::string& text);
/// `l` bound by `b`, or (`b` empty) plain: the annotation and label set or removed.
void set_binding(lease& l, const std::optional<session_binding>& b);
/// Whether `l` carries a binding annotation at all (stale or not).
bool has_binding_text(const lease& l);
/// Whether session Lease `s` is the released form of the incarnation `b` names.
bool released_in(const lease& s, const session_binding& b);

std::uint32_t fnv1a(const std::string& s);

} // namespace leasehold
