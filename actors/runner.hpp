// The runner's spawn without checks (its whole typed interface,
// runner_internal_actor, is in include/leasehold/protocol.hpp).
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/runner.hpp"

namespace leasehold {

/// Spawns the runner actor without checking `opts` (spawn_runner checks them).
runner_actor spawn_runner_actor(caf::actor_system& sys, runner_options opts);

} // namespace leasehold
