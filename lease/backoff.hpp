// Capped exponential backoff with jitter: elector respawns (runner), module
// restarts (supervisor) and watch reconnects (transport) all use this one.
#pragma once

#include <caf/timespan.hpp>

namespace leasehold {

/// Capped exponential backoff with jitter (Akka's restartWithBackoff).
class backoff {
public:
  backoff(caf::timespan min, caf::timespan max, double jitter)
    : min_(min), max_(max), jitter_(jitter) {}
  /// Next delay; `unit` in [0,1) is the random draw (callers own the RNG so
  /// scripted tests are reproducible).
  caf::timespan next(double unit);
  void reset() { failures_ = 0; }
  /// The largest delay next() can return.
  caf::timespan cap() const;

private:
  caf::timespan min_, max_;
  double jitter_;
  int failures_ = 0;
};

} // namespace leasehold
