// Health decisions (the HTTP server only serves them), all from the runner's
// status. What each probe judges: cmd/leasehold/README.md, 'HTTP endpoints'.
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
