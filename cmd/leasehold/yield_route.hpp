// A yield asked of any member of a lease (POST /yield on any agent), not only
// of its holder (docs/operations.md, "Handing leadership over"). The
// holder's own agent hands over at once; another agent carries the request through the
// store: it writes `preferredHolder` (the target, or itself without one) on
// the Lease, which the holder honours as a yield, and answers once the
// lease changed hands. Kubernetes only: on etcd another agent answers
// not_leading naming the holder.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "leasehold/lease_transport.hpp"
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
  /// The store route (null: none, etcd).
  lease_transport_actor transport;
  caf::timespan request_timeout{std::chrono::seconds(5)};
  caf::timespan timeout{std::chrono::seconds(30)};   // the whole handover
};

/// The yield of `route.lease` to `to` ("" anyone) from this agent, wherever
/// the holder runs. nullopt: this agent's runner did not answer.
std::optional<yield_result> yield_anywhere(caf::actor_system& sys, const yield_route& route,
                                           const std::string& to);

} // namespace leasehold::agent
