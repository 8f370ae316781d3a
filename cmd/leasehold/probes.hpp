// Health decisions (the HTTP server only serves them).
//   liveness (/livez): the process is alive and election runs: fails when the
//              runner does not answer, has stopped, is not electing although
//              not idle, or believes it leads but has not renewed for
//              lease_duration + grace (watchdog). A crash-looping module
//              does not fail it (a restart of the process would not fix it).
//   module_health: fails while a module is over its restart intensity
//              (failed) or the replica backs off after handing over
//              leadership for a crash-looping leader-only module.
//   health (/healthz): liveness, then module_health.
//   readiness (/readyz): the runner is electing (or idle with nothing to
//              elect for), the API has answered at least once with no error
//              outstanding, and module_health.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/observer.hpp"
#include "actors/runner.hpp"
#include "leasehold/timings.hpp"

namespace leasehold::agent {

struct probe_result {
  bool ok = false;
  nlohmann::json body;   // {"status":"ok"} or {"status":"unhealthy","reason":...}
};

/// Tracks, from runtime events, whether the API has answered and whether an
/// error is outstanding.
class api_health {
public:
  struct view {
    bool answered = false;
    std::string error_kind;    // empty: no error outstanding
  };
  event_sink sink();
  void record(const runtime_event& e);
  view get() const;

private:
  mutable std::mutex mtx_;
  view v_;
};

/// The watchdog's allowance beyond lease_duration.
caf::timespan watchdog_grace(const election_timings& t);

probe_result liveness(const std::optional<runner_status>& st, const election_timings& t);
probe_result module_health(const runner_status& st);
probe_result health(const std::optional<runner_status>& st, const election_timings& t);
probe_result readiness(const std::optional<runner_status>& st, const api_health::view& api);

} // namespace leasehold::agent
