#include "actors/elector_rules.hpp"

#include <algorithm>
#include <cmath>

#include "actors/handover.hpp"

namespace leasehold {

const char* to_string(elector_state s) {
  switch (s) {
    case elector_state::following: return "following";
    case elector_state::holding: return "holding";
    case elector_state::leading: return "leading";
    case elector_state::closing: return "closing";
    case elector_state::releasing: return "releasing";
    case elector_state::ended: return "ended";
  }
  return "?";
}

bool legal_transition(elector_state from, elector_state to) {
  using st = elector_state;
  switch (from) {
    case st::following: return to == st::holding || to == st::leading || to == st::closing;
    case st::holding: return to == st::following || to == st::leading || to == st::closing;
    case st::leading: return to == st::releasing || to == st::ended;
    case st::closing: return to == st::releasing || to == st::ended;
    case st::releasing: return to == st::ended;
    case st::ended: return false;
  }
  return false;
}

lease_spec acquired_spec(const lease_spec& old, const std::string& identity,
                         caf::timespan lease_duration, wall_time now, std::int64_t max_term_seen) {
  lease_spec s;
  s.holder_identity = identity;
  s.lease_duration_seconds = duration_seconds(lease_duration);
  s.acquire_time = now;
  s.renew_time = now;
  s.lease_transitions
    = static_cast<int>(std::max<std::int64_t>(old.lease_transitions, max_term_seen) + 1);
  s.preferred_holder = old.preferred_holder;   // another writer's: kept for its own term
  s.strategy = old.strategy;
  drop_stale_preference(s, identity);
  return s;
}

lease_spec renewed_spec(const lease_spec& held, caf::timespan lease_duration, wall_time now) {
  lease_spec s = held;
  s.lease_duration_seconds = duration_seconds(lease_duration);
  s.renew_time = now;
  return s;
}

bool same_term(const lease_spec& a, const lease_spec& b) {
  return a.holder_identity == b.holder_identity && a.acquire_time == b.acquire_time
         && a.lease_transitions == b.lease_transitions;
}

lease_spec released_spec(const lease_spec& held, wall_time now) {
  lease_spec s = held;
  s.holder_identity.clear();
  s.lease_duration_seconds = 1;
  s.acquire_time = now;
  s.renew_time = now;
  return s;
}

std::optional<int> compare_versions(const std::string& rv, const std::string& known) {
  auto parse = [](const std::string& v) -> std::optional<unsigned long long> {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoull(v);
  };
  auto a = parse(rv);
  auto b = parse(known);
  if (!a || !b)
    return std::nullopt;
  return *a < *b ? -1 : (*a == *b ? 0 : 1);
}

caf::timespan renew_ride_limit(const election_timings& t) {
  return std::max(caf::timespan{0},
                  std::min(t.retry_period / 2, (t.renew_deadline - t.retry_period) / 4));
}

bool may_have_applied(error_kind k) {
  switch (k) {
    case error_kind::timeout:
    case error_kind::connection_refused:   // also a reset after the request left
    case error_kind::disconnected:
    case error_kind::server_error:
    case error_kind::malformed_body:
    case error_kind::other:
      return true;
    default:
      return false;
  }
}

} // namespace leasehold
