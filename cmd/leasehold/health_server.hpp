// The observability HTTP server (httplib, its own threads) on --health-addr.
// Handlers ask the runner for its status with a blocking request: fine on
// these threads, which are not CAF scheduler threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "leasehold/runner.hpp"
#include "leasehold/timings.hpp"
#include "cmd/leasehold/metrics.hpp"
#include "cmd/leasehold/probes.hpp"

namespace httplib {
class Server;
}

namespace leasehold::agent {

// The paths and their bodies: cmd/leasehold/README.md, 'HTTP endpoints'.
using yield_function =
  std::function<std::optional<yield_result>(const std::string& lease, const std::string& target)>;

struct health_sources {
  std::function<std::optional<runner_status>()> status;
  /// The body the leader_endpoint module publishes at a path, if any.
  std::function<std::optional<std::string>(const std::string& path)> leader;
  /// Hands `lease` over to `target` ("" anyone); nullopt when the runner did not answer.
  yield_function yield;
  /// The agent's leases, its own first (POST /yield's "lease").
  std::function<std::vector<std::string>()> lease_names;
  /// Every lease of the agent (its own first) and every balance group (required).
  std::function<std::vector<lease_state>()> leases;
  std::function<std::vector<group_state>()> groups;
  const metrics* counters = nullptr;
  election_timings timings;
};

/// The holder as this replica knows it, "unknown" once older than
/// `lease_duration` (cmd/leasehold/README.md, '/debug/state').
nlohmann::json holder_json(const std::optional<runner_status>& st, caf::timespan lease_duration);
/// POST /yield's status code and body; a body without "lease" names the
/// agent's own, `lease_names`' first.
std::pair<int, nlohmann::json> yield_reply(const std::string& remote_addr, const std::string& body,
                                           const std::vector<std::string>& lease_names,
                                           const yield_function& yield);
/// /debug/state: the runner's status with holder_json's fields.
nlohmann::json status_json(const runner_status& st, caf::timespan lease_duration);

class health_server {
public:
  explicit health_server(health_sources src);
  ~health_server();   // stops
  health_server(const health_server&) = delete;
  health_server& operator=(const health_server&) = delete;

  /// Binds `addr` ("host:port"; port 0 picks one). Returns the bound
  /// port, or -1 (see error()).
  int bind(const std::string& addr);
  /// Serves on a thread (after bind; the sources must be ready).
  void serve();
  void stop();
  const std::string& error() const { return error_; }

private:
  /// A probe over every lease of the agent (its own first): the first that
  /// fails, its reason prefixed "lease NAME: " for a module's lease.
  probe_result every_lease(
    probe_result (*probe)(const std::optional<runner_status>&, const election_timings&)) const;

  health_sources src_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string error_;
};

} // namespace leasehold::agent
