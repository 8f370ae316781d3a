// The runner's internals beyond its public face (include/leasehold/runner.hpp):
// the messages only the runtime itself and its tests send it.
#pragma once

#include <caf/all.hpp>

#include "leasehold/runner.hpp"

namespace leasehold {

/// get_elector_atom -> caf::actor: the current elector, if any (tests kill it
/// to exercise supervision). Sent on the runner's dynamically typed handle,
/// `caf::actor_cast<caf::actor>(runner)`.
using get_elector_atom = caf::atom_constant<caf::atom("lh_elector")>;

/// Spawns the runner actor without checking `opts` (spawn_runner checks them).
runner_actor spawn_runner_actor(caf::actor_system& sys, runner_options opts);

} // namespace leasehold
