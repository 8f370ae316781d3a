// Which lease each module of an agent's config runs under: docs/balance.md,
// 'Balance groups in leasehold run'.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "leasehold/modules.hpp"

namespace leasehold::agent {

struct lease_plan {
  std::string lease;     // the Lease's name (namespace: the agent's)
  std::string group;     // "" for a lease that is not balanced
  module_config modules; // the modules that run under it
};

struct lease_layout {
  lease_plan main;                 // the agent's lease: always there
  std::vector<lease_plan> others;  // in the order of their first module in the config
  /// group -> its settle time (ms), for the groups whose modules set one.
  std::map<std::string, std::int64_t> settle_ms;

  /// The groups, each with its leases (in config order).
  std::vector<std::pair<std::string, std::vector<std::string>>> groups() const;
  /// True when both have the same leases, each in the same group, and the
  /// same settle times (what a config reload can apply without a restart).
  bool same_leases(const lease_layout& o) const;
};

/// The layout of `modules` under the agent's lease `main_lease`; every error,
/// in one pass, names the module's JSON path (`modules[3].balance: ...`).
std::vector<std::string> plan_leases(const module_config& modules, const std::string& main_lease,
                                     lease_layout& out);

} // namespace leasehold::agent
