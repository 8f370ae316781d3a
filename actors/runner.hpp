// The runner's internals beyond its public face (include/leasehold/runner.hpp):
// its whole typed interface (the public one plus what only its electors, its
// own timers and the tests send it) and the spawn without checks.
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/runner.hpp"

namespace leasehold {


/// Spawns the runner actor without checking `opts` (spawn_runner checks them).
runner_actor spawn_runner_actor(caf::actor_system& sys, runner_options opts);

} // namespace leasehold
