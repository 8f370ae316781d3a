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
//              elect for); a leader while its fence is valid; a follower
//              once the API has answered, unless it has been failing for
//              longer than renew_deadline; and module_health. All from the
//              runner's status (one source; docs/operations.md).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "leasehold/events.hpp"
#include "leasehold/runner.hpp"
#include "leasehold/timings.hpp"

namespace leasehold::agent {

struct probe_result {
  bool ok = false;
  nlohmann::json body;   // {"status":"ok"} or {"status":"unhealthy","reason":...}
};

probe_result liveness(const std::optional<runner_status>& st, const election_timings& t);
probe_result module_health(const runner_status& st);
probe_result health(const std::optional<runner_status>& st, const election_timings& t);
probe_result readiness(const std::optional<runner_status>& st, const election_timings& t);

} // namespace leasehold::agent
