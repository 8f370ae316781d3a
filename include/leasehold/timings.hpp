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
/// so replicas started together do not ask in lockstep (client-go's
/// JitterFactor, 1.2, is 1 + this). validate() requires renew_deadline >
/// (1 + jitter_factor) * retry_period, so that one whole jittered retry
/// fits within a renew deadline (docs/safety.md).
constexpr double jitter_factor = 0.2;

/// When a replica acquires, renews, gives up and competes again. Every
/// duration is judged on this replica's own monotonic clock (the actor
/// clock), never on the times written in the Lease: clocks of different
/// machines are not compared. The defaults are client-go's and the original
/// agent's (15 s / 10 s / 2 s).
struct election_timings {
  /// How long a lease holds without a renew. A follower considers the lease
  /// expired lease_duration after it last *saw the record change* (a new
  /// resourceVersion, by its own clock), and only then tries to take it.
  /// Written to the Lease as leaseDurationSeconds (rounded up). Default 15 s.
  caf::timespan lease_duration = std::chrono::seconds(15);
  /// How long the leader keeps trying to renew. Measured from the *send
  /// time* of its last successful renew (not its reply): when it passes
  /// without another success, the term ends, leader-only work is stopped and
  /// the fence expires. Default 10 s.
  caf::timespan renew_deadline = std::chrono::seconds(10);
  /// Spacing of attempts: the leader renews every retry_period (measured
  /// from the send time of the previous successful renew); a follower polls
  /// every retry_period plus jitter (see jitter_factor) while it has no
  /// working watch. Default 2 s.
  caf::timespan retry_period = std::chrono::seconds(2);
  /// How long a module asked to stop (an exit message) may take before it is
  /// killed. Must be below lease_duration - renew_deadline so that a leader
  /// that lost its lease has stopped leader-only work before any other
  /// replica may take it. Default 4 s.
  caf::timespan module_stop_timeout = std::chrono::seconds(4);
  /// Bound for one API request, from its send. 0 (the default): retry_period,
  /// but at most (renew_deadline - retry_period) / 2, so that a renew that
  /// times out can be retried once before the renew deadline.
  caf::timespan request_timeout = caf::timespan{0};
  /// Elector respawn delay after a lost term or an ended elector: capped
  /// exponential from backoff_min to backoff_max, each delay varied by
  /// +-backoff_jitter (a fraction). Reset by a term that lasted at least
  /// lease_duration. Defaults 1 s, 30 s, 0.2.
  caf::timespan backoff_min = std::chrono::seconds(1);
  caf::timespan backoff_max = std::chrono::seconds(30);
  double backoff_jitter = 0.2;
  /// A leader-only module over its restart intensity makes the replica hand
  /// over leadership (step down, release) and not compete again for a capped
  /// exponential delay between these, measured from the handover (reset by
  /// a module config change, or by a term of at least lease_duration in
  /// which no module failed). Defaults 10 s, 5 min.
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

/// The relations the safety budget needs (docs/safety.md explains each):
///   lease_duration > renew_deadline > (1 + jitter_factor) * retry_period > 0
///   module_stop_timeout < lease_duration - renew_deadline
///   request_timeout <= renew_deadline
///   renew_deadline >= retry_period + 2 * request_timeout
/// Returns one message per broken relation, naming the fields and the
/// values; empty when valid.
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
