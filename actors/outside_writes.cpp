#include "actors/outside_writes.hpp"

#include <algorithm>

namespace leasehold {

using namespace std::chrono_literals;

bool released_record(const lease_spec& s) {
  return s.holder_identity.empty()
         && (!s.lease_duration_seconds || *s.lease_duration_seconds <= 1);
}

bool ttl_tells_expiry(const election_timings& t, caf::timespan ttl) {
  return t.renew_deadline + t.effective_request_timeout() + 1s <= ttl;
}

namespace {

/// An etcd mod_revision as the transport reports it (resource_version); 0
/// when it is not one.
std::int64_t revision_of(const std::string& rv) {
  if (rv.empty() || rv.size() > 18 || rv.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return std::stoll(rv);
}

} // namespace

vanish_verdict judge_vanished_key(const lease_memory& m, caf::actor_clock::time_point seen_by,
                                  const election_timings& t, caf::timespan ttl, bool gapless,
                                  std::int64_t store_revision) {
  if (m.record && released_record(m.record->spec) && store_revision > 0
      && store_revision == revision_of(m.record->resource_version) + 1)
    return {seen_by, false};
  auto rt = t.effective_request_timeout();
  bool fresh = m.ttl_read_at && seen_by <= *m.ttl_read_at + 100ms + rt;
  // A stream can be up and still late: the freeing also needs the store
  // revision of the read of 0, so that the create's history check covers
  // everything from that read on (a term that came and went since shows).
  if (ttl_tells_expiry(t, ttl) && gapless && fresh && m.ttl_left == 0 && m.ttl_zero_since
      && m.ttl_zero_revision > 0)
    return {std::max(seen_by, *m.ttl_zero_since + 1s), false, m.ttl_zero_revision};
  return {seen_by, true};
}

caf::timespan next_ttl_read(const lease_memory& m, const election_timings& t,
                            caf::actor_clock::time_point now, caf::timespan otherwise,
                            double spread) {
  if (!m.ttl_read_at)
    return otherwise;
  // A reading of n whole seconds (truncated) leaves [n, n + 1) s: read when
  // half a second of it would be left without a keepalive, so one read lands
  // in the key's last second, where it says 0. A live holder's keepalives
  // keep n high, so this costs nothing while the holder lives. After a 0:
  // every half request timeout (100 ms to 1 s) until the key goes, so the
  // read that finds it gone follows a reading by less than request_timeout
  // + 100 ms (judge_vanished_key's freshness).
  caf::timespan after =
    m.ttl_left == 0
      ? std::clamp<caf::timespan>(t.effective_request_timeout() / 2, 100ms, 1s)
      : std::max<caf::timespan>(100ms, std::chrono::seconds(m.ttl_left) - 500ms);
  if (m.ttl_left >= 2) {
    auto span = std::min<caf::timespan>(1s, after / 4);
    after -= caf::timespan{static_cast<caf::timespan::rep>(
      std::clamp(spread, 0.0, 1.0) * static_cast<double>(span.count()))};
  }
  return std::min(otherwise, std::max(caf::timespan{0}, *m.ttl_read_at + after - now));
}

} // namespace leasehold
