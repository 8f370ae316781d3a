#include "leasehold/timings.hpp"

#include <cstdio>

namespace leasehold {

namespace {
std::string secs(caf::timespan t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
  return std::to_string(ms) + "ms";
}

/// "1.2": 1 + jitter_factor as written in the messages.
std::string factor() {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%g", 1.0 + jitter_factor);
  return buf;
}
} // namespace

std::vector<std::string> validate(const election_timings& t) {
  std::vector<std::string> errs;
  if (t.retry_period.count() <= 0)
    errs.push_back("retry_period: must be > 0 (is " + secs(t.retry_period) + ")");
  if (!(t.renew_deadline.count() > (1.0 + jitter_factor) * t.retry_period.count()))
    errs.push_back("renew_deadline: must be > " + factor() + " * retry_period ("
                   + secs(t.renew_deadline) + " <= " + factor() + " * " + secs(t.retry_period)
                   + ")");
  if (!(t.lease_duration > t.renew_deadline))
    errs.push_back("lease_duration: must be > renew_deadline (" + secs(t.lease_duration)
                   + " <= " + secs(t.renew_deadline) + ")");
  if (t.module_stop_timeout.count() <= 0)
    errs.push_back("module_stop_timeout: must be > 0");
  else if (!(t.module_stop_timeout < t.lease_duration - t.renew_deadline))
    errs.push_back("module_stop_timeout: must be < lease_duration - renew_deadline ("
                   + secs(t.module_stop_timeout) + " >= " + secs(t.lease_duration - t.renew_deadline)
                   + "), or a lost leader could still run leader-only work when another takes over");
  if (t.request_timeout.count() < 0) {
    errs.push_back("request_timeout: must be >= 0");
  } else if (t.request_timeout > t.renew_deadline) {
    errs.push_back("request_timeout: must be <= renew_deadline (" + secs(t.request_timeout) + " > "
                   + secs(t.renew_deadline)
                   + "), or a reply could arrive after the term it acquires has already ended");
  } else if (t.retry_period.count() > 0
             && t.renew_deadline < t.retry_period + 2 * t.effective_request_timeout()) {
    errs.push_back("renew_deadline: must be >= retry_period + 2 * request_timeout ("
                   + secs(t.renew_deadline) + " < " + secs(t.retry_period) + " + 2 * "
                   + secs(t.effective_request_timeout())
                   + "), or a renew that times out once cannot be retried before the deadline");
  }
  if (t.backoff_min.count() <= 0 || t.backoff_max < t.backoff_min)
    errs.push_back("backoff_min/backoff_max: need 0 < backoff_min <= backoff_max");
  if (t.handover_backoff_min.count() <= 0 || t.handover_backoff_max < t.handover_backoff_min)
    errs.push_back("handover_backoff_min/handover_backoff_max: need 0 < handover_backoff_min <= "
                   "handover_backoff_max");
  if (t.backoff_jitter < 0 || t.backoff_jitter >= 1)
    errs.push_back("backoff_jitter: must be in [0, 1)");
  if (t.release_timeout.count() <= 0)
    errs.push_back("release_timeout: must be > 0");
  return errs;
}

caf::timespan preferred_holder_wait(const election_timings& t) {
  auto poll = std::chrono::duration_cast<caf::timespan>(t.retry_period * (1 + jitter_factor));
  return poll + t.effective_request_timeout();
}

caf::timespan yield_window(const election_timings& t, bool targeted) {
  return preferred_holder_wait(t) * (targeted ? 2 : 1);
}

} // namespace leasehold
