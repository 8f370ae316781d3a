// The module types leasehold ships with: ticker, exec, webhook and
// leader_endpoint (cmd/leasehold/README.md).
#pragma once

#include <memory>

#include "leasehold/modules.hpp"
#include "modules/leader_endpoint.hpp"

namespace leasehold::modules {

/// Objects the built-in modules share with the embedding process.
struct builtin_options {
  /// Read by the process's HTTP server (see leader_endpoint.hpp). When null,
  /// the leader_endpoint type is not registered: nothing could serve it, so a
  /// config that uses it is rejected as an unknown module type.
  std::shared_ptr<leader_view> leader;
};

void register_builtin_modules(module_registry& reg, const builtin_options& opts = {});

} // namespace leasehold::modules

namespace leasehold {
using modules::builtin_options;
using modules::register_builtin_modules;
} // namespace leasehold
