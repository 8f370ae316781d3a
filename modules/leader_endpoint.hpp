// leader_endpoint: serves who leads the lease, as this replica sees it, at
// its path from start until it stops (settings: cmd/leasehold/README.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

// The port is the embedding process's: the module publishes here, and the
// process's HTTP server asks respond() per request (cmd/leasehold/agent.cpp).
/// Thread-safe: modules publish from actor threads, HTTP handlers read from theirs.
class leader_view {
public:
  struct snapshot {
    std::string leader;     // holder; "" while unknown
    std::int64_t term = -1; // -1 while unknown
    std::string self;       // this replica's identity
    bool leading = false;
  };

  /// The JSON body to serve for `request_path`, nullopt if nothing is published there.
  std::optional<std::string> respond(const std::string& request_path) const;

  // Module side. Several instances may publish at different paths; at the
  // same path the last publisher wins.
  void publish(const std::string& path, const snapshot& s);
  void withdraw(const std::string& path);

private:
  mutable std::mutex mtx_;
  std::map<std::string, snapshot> published_;
};

struct leader_endpoint_settings {
  std::string path = "/leader";
};

parsed<leader_endpoint_settings> parse_leader_endpoint_settings(const nlohmann::json& settings);

/// The "leader_endpoint" module type (every replica by default), publishing into `view`.
module_type leader_endpoint_module(std::shared_ptr<leader_view> view);

} // namespace leasehold::modules
