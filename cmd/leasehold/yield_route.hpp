// A yield asked of any member of a lease (POST /yield on any agent), not only
// of its holder (docs/operations.md, "Handing leadership over"). The
// holder's own agent hands over at once; another agent carries the request through the
// store: it writes `preferredHolder` (the target, or itself without one) on
// the lease's record, which the holder honours as a yield, and answers once
// the lease changed hands.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "leasehold/protocol.hpp"
#include "leasehold/runner.hpp"

namespace leasehold::agent {

struct yield_route {
  std::string identity;   // this agent
  lease_key lease;
  /// This agent's own yield of the lease (its runner's, or its group's,
  /// which refuses a target that is no settled member, on any agent).
  std::function<std::optional<yield_result>(const std::string& to)> local;
  /// The lease's runner's status on this agent (who holds it).
  std::function<std::optional<runner_status>()> status;
  /// The store route (null: none): the lease's record, and a write of it
  /// on the version read (a conflict when it changed since). On etcd the
  /// write keeps the key's etcd lease: it must stay the holder's.
  std::function<lease_reply()> read;
  std::function<lease_reply(const leasehold::lease&)> write;
  caf::timespan timeout{std::chrono::seconds(30)};   // the whole handover
};

/// The yield of `route.lease` to `to` ("" anyone) from this agent, wherever
/// the holder runs. nullopt: this agent's runner did not answer.
std::optional<yield_result> yield_anywhere(const yield_route& route, const std::string& to);

} // namespace leasehold::agent
