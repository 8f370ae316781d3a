// Election timings tests use: a set from its four numbers, and the short
// timings of the real-time tests and the agent tests (lease 2 s, renew
// 1.5 s, retry 300 ms, stop 400 ms).
#pragma once

#include <chrono>

#include "leasehold/timings.hpp"

namespace leasehold::test {

/// lease / deadline / retry / request_timeout (0: the default), and a
/// module stop timeout of half the room between lease and deadline.
inline election_timings make_timings(caf::timespan lease, caf::timespan deadline,
                                     caf::timespan retry, caf::timespan request) {
  election_timings t;
  t.lease_duration = lease;
  t.renew_deadline = deadline;
  t.retry_period = retry;
  t.module_stop_timeout = (lease - deadline) / 2;
  t.request_timeout = request;
  return t;
}

/// The real-time tests' timings: lease 2 s, renew 1.5 s, retry 300 ms, stop
/// 400 ms, respawn backoff 200 ms .. 1 s.
inline election_timings short_timings() {
  using namespace std::chrono_literals;
  election_timings t;
  t.lease_duration = 2s;
  t.renew_deadline = 1500ms;
  t.retry_period = 300ms;
  t.module_stop_timeout = 400ms;
  t.backoff_min = 200ms;
  t.backoff_max = 1s;
  return t;
}

} // namespace leasehold::test
