// Election timings and the safety budget (docs/safety.md).
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <caf/timespan.hpp>

#include "transport/backoff.hpp"

namespace leasehold {

struct election_timings {
  caf::timespan lease_duration = std::chrono::seconds(15);
  caf::timespan renew_deadline = std::chrono::seconds(10);
  caf::timespan retry_period = std::chrono::seconds(2);
  /// How long a stopped module may take before it is killed. Must be smaller
  /// than lease_duration - renew_deadline so that a leader that lost its
  /// lease has stopped leader-only work before any other replica may take it.
  caf::timespan module_stop_timeout = std::chrono::seconds(4);
  /// Bound for one API request. 0 (the default): retry_period, but at most
  /// (renew_deadline - retry_period) / 2, so that a renew that times out can
  /// be retried once before the renew deadline.
  caf::timespan request_timeout = caf::timespan{0};
  /// Elector respawn backoff after a lost term or an elector crash.
  caf::timespan backoff_min = std::chrono::seconds(1);
  caf::timespan backoff_max = std::chrono::seconds(30);
  double backoff_jitter = 0.2;         // +-20 %
  /// Bound for releasing the lease on shutdown (re-read and retry on 409).
  caf::timespan release_timeout = std::chrono::seconds(2);

  caf::timespan effective_request_timeout() const {
    if (request_timeout.count() > 0)
      return request_timeout;
    auto room = (renew_deadline - retry_period) / 2;
    return std::max(caf::timespan{std::chrono::milliseconds(1)}, std::min(retry_period, room));
  }
};

/// Followers wait retry_period * (1 + U[0, retry_jitter)) between attempts
/// (client-go's JitterFactor 1.2).
constexpr double retry_jitter = 0.2;

/// The relations the safety budget needs (docs/safety.md explains each):
///   lease_duration > renew_deadline > 1.2 * retry_period > 0
///   module_stop_timeout < lease_duration - renew_deadline
///   request_timeout <= renew_deadline
///   renew_deadline >= retry_period + 2 * request_timeout
/// Returns one message per broken relation, naming the fields and the
/// values; empty when valid.
std::vector<std::string> validate(const election_timings& t);


} // namespace leasehold
