#include "actors/outside_writes.hpp"

#include <algorithm>

namespace leasehold {

bool released_record(const lease_spec& s) {
  return s.holder_identity.empty()
         && (!s.lease_duration_seconds || *s.lease_duration_seconds <= 1);
}

caf::actor_clock::time_point vanished_key_wait(const lease_memory& m,
                                               caf::actor_clock::time_point seen_by,
                                               caf::timespan ttl) {
  if (m.ttl_until && seen_by >= *m.ttl_until)
    return seen_by;   // the lease could have run out: an expiry frees the key at once
  return seen_by + ttl;
}

caf::timespan next_ttl_read(const lease_memory& m, caf::actor_clock::time_point now,
                            caf::timespan otherwise) {
  if (!m.ttl_read_at || !m.ttl_until)
    return otherwise;
  // ttl_until = read + TTL + 1 s: half the TTL after the read.
  auto half = (*m.ttl_until - std::chrono::seconds(1) - *m.ttl_read_at) / 2;
  auto due = *m.ttl_read_at + half;
  return std::min(otherwise, std::max<caf::timespan>(std::chrono::milliseconds(100), due - now));
}

} // namespace leasehold
