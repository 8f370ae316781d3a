// Election timings and the safety budget (docs/safety.md derives each
// relation; validate() enforces them).
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <caf/timespan.hpp>

namespace leasehold {

/// Followers wait retry_period * (1 + U[0, jitter_factor)) between attempts,
/// as client-go (its JitterFactor, 1.2, is 1 + this), so replicas started
/// together do not ask in lockstep.
constexpr double jitter_factor = 0.2;

/// When a replica acquires, renews, gives up and competes again, each judged
/// on its own monotonic clock (docs/safety.md, 'Clocks').
struct election_timings {
  /// How long a lease holds without a renew, from when a follower last saw
  /// the record change. leaseDurationSeconds (rounded up).
  caf::timespan lease_duration = std::chrono::seconds(15);
  /// How long the leader keeps trying to renew, from the send time of its
  /// last successful renew; then the term ends.
  caf::timespan renew_deadline = std::chrono::seconds(10);
  /// The leader renews every retry_period from the last renew's send; a
  /// follower without a working watch polls every retry_period plus jitter.
  caf::timespan retry_period = std::chrono::seconds(2);
  /// How long a module asked to stop may take before it is killed.
  caf::timespan module_stop_timeout = std::chrono::seconds(4);
  /// Bound for one API request, from its send. 0: effective_request_timeout().
  caf::timespan request_timeout = caf::timespan{0};
  /// Elector respawn delay after a lost term or an ended elector: capped
  /// exponential, +-backoff_jitter; reset by a term of lease_duration.
  caf::timespan backoff_min = std::chrono::seconds(1);
  caf::timespan backoff_max = std::chrono::seconds(30);
  double backoff_jitter = 0.2;
  /// After a crash-looping leader-only module's handover the replica stays
  /// out this long (cmd/leasehold/README.md, 'Restart policy (per module)').
  caf::timespan handover_backoff_min = std::chrono::seconds(10);
  caf::timespan handover_backoff_max = std::chrono::minutes(5);
  /// Bound for releasing the lease on shutdown or step-down (re-read and
  /// retry on 409), from the release request. Default 2 s.
  caf::timespan release_timeout = std::chrono::seconds(2);

  caf::timespan effective_request_timeout() const {
    if (request_timeout.count() > 0)
      return request_timeout;
    auto room = (renew_deadline - retry_period) / 2;
    return std::max(caf::timespan{std::chrono::milliseconds(1)}, std::min(retry_period, room));
  }
};

/// One message per broken relation (docs/safety.md, 'Every timing relation
/// the code enforces'), naming the fields and the values; empty when valid.
std::vector<std::string> validate(const election_timings& t);

/// How long a replica leaves a released lease whose preferredHolder names
/// another replica to that replica: one jittered poll plus a request, by
/// when the preferred replica has seen and taken it, watching or polling.
caf::timespan preferred_holder_wait(const election_timings& t);

/// How long a replica that yielded stays out after its release:
/// preferred_holder_wait without a target; twice that with one (the target
/// first, then the others).
caf::timespan yield_window(const election_timings& t, bool targeted);

} // namespace leasehold
