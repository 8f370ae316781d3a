// leader_endpoint: serves who leads the lease, as this replica sees it.
//
// settings: {"path": string starting with "/" (default "/leader")}
//
// The module runs on every replica by default, subscribes to the runner and
// publishes {"leader": holder ("" unknown), "term": term (-1 unknown),
// "self": identity, "leading": bool} at its path from start until it stops
// (then the path is withdrawn and respond() returns nullopt for it).
//
// The HTTP port is the embedding process's: see leader_view below.
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

// The HTTP port belongs to the embedding process (the agent's health server),
// so the module does not listen itself: it publishes into a shared
// leader_view, and the process's HTTP server asks the view for each request:
//
//   auto view = std::make_shared<leasehold::modules::leader_view>();
//   leasehold::modules::register_builtin_modules(reg, {view});   // builtin.hpp
//   server.Get(".*", [view](const httplib::Request& req, httplib::Response& res) {
//     if (auto body = view->respond(req.path))
//       res.set_content(*body, "application/json");
//     else
//       res.status = 404;
//   });
//
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
