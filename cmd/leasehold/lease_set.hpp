// The runners of an agent's leases (cmd/leasehold/lease_layout.hpp), one per
// lease, a balance group over the runners of each group's leases, and a
// candidate set over each lease outside any group.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cmd/leasehold/lease_layout.hpp"
#include "leasehold/balance_group.hpp"
#include "leasehold/runtime.hpp"

namespace leasehold::agent {

/// One lease as this replica sees it.
struct lease_state {
  std::string lease;                  // name (the agent's namespace)
  std::string group;                  // "" when not balanced
  std::optional<runner_status> status;   // nullopt: its runner did not answer
};

/// One balance group as this replica sees it.
struct group_state {
  std::string group;
  std::optional<balance_status> status;
};

struct lease_set_options {
  /// Every field but lease, modules, events and compete: the same for each runner.
  runner_options base;
  std::function<event_sink(const lease_key&)> events;
  /// The membership backend of the groups and candidate sets (none: no
  /// candidate sets, and no groups allowed).
  membership_actor membership;
  /// A group's settle time unless its modules set one (lease_layout::settle_ms).
  caf::timespan settle{std::chrono::seconds(1)};
};

class lease_set {
public:
  /// Spawns a runner per lease (the agent's first) and a group per balance
  /// group. Errors: the runners' (invalid modules), nothing spawned then.
  std::vector<std::string> spawn(caf::actor_system& sys, const lease_layout& layout,
                                 lease_set_options opts);
  /// The agent's own lease's runner.
  const runner_actor& main() const { return runners_.front().runner; }
  /// Every lease's (group's) status, asked one after the other within
  /// `timeout` in all.
  std::vector<lease_state> leases(caf::actor_system& sys, caf::timespan timeout) const;
  std::vector<group_state> groups(caf::actor_system& sys, caf::timespan timeout) const;
  /// Applies each lease's modules of `next` (the same leases:
  /// lease_layout::same_leases); the errors of every runner that rejected its part.
  std::vector<std::string> apply(caf::actor_system& sys, const lease_layout& next,
                                 caf::timespan timeout);
  /// Every lease's name, the agent's own first.
  std::vector<std::string> names() const;
  /// Hands `lease` over to `to` ("" anyone): a balanced lease through its group
  /// (the yield hold), any other through its runner. nullopt: no such lease or answer.
  std::optional<yield_result> yield(caf::actor_system& sys, const std::string& lease,
                                    const std::string& to, caf::timespan timeout) const;
  /// The status of lease `lease`'s runner (nullopt: no such lease, or no answer).
  std::optional<runner_status> status_of(caf::actor_system& sys, const std::string& lease,
                                         caf::timespan timeout) const;
  /// Every group leaves (withdraws, then shuts its runners down) and every other
  /// runner shuts down, all at once; true when all confirmed within `bound`.
  bool shut_down(caf::actor_system& sys, caf::timespan bound);
  /// Ends every actor left (the process is exiting).
  void kill_all();

private:
  struct entry {
    std::string lease;
    std::string group;
    runner_actor runner;
    /// Outside a group: the actor that announces this replica for the lease
    /// (balance_group_options::assign false); null when there is none.
    caf::actor candidates;
  };
  std::vector<entry> runners_;   // the agent's lease first
  std::vector<std::pair<std::string, caf::actor>> groups_;
};

} // namespace leasehold::agent
