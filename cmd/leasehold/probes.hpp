// Liveness and readiness decisions (the HTTP server only serves them).
//   liveness:  fails when the runner believes it leads but has not renewed
//              for lease_duration + grace (watchdog), when it reports itself
//              unhealthy (an every-replica module failed), or does not answer.
//   readiness: the runner is electing (or idle with nothing to elect for) and
//              the API has answered at least once with no error outstanding.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/observer.hpp"
#include "actors/runner.hpp"
#include "actors/timings.hpp"

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
probe_result readiness(const std::optional<runner_status>& st, const api_health::view& api);

} // namespace leasehold::agent
