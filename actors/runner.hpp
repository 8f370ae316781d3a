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

/// get_elector_atom -> elector_handle: the current elector, if any (tests kill it
/// to exercise supervision). Sent on the runner's dynamically typed handle,
/// `caf::actor_cast<caf::actor>(runner)`.
using get_elector_atom = caf::atom_constant<caf::atom("lh_elector")>;

/// Everything the runner takes: runner_actor, plus its electors' reports
/// (actors/messages.hpp), its own timers and get_elector_atom. The runner
/// implementation (actors/runner_impl.hpp) derives from this interface, so
/// the compiler checks its handlers against it; a runner_internal_actor
/// converts to the public runner_actor.
using runner_internal_actor = runner_actor::extend<
  caf::reacts_to<leadership_acquired>,
  caf::reacts_to<leadership_lost>,
  caf::reacts_to<lease_observed>,
  caf::reacts_to<leader_observed>,
  caf::reacts_to<fatal_atom, int>,
  caf::reacts_to<stop_timeout_atom, std::uint64_t>,
  caf::reacts_to<restart_atom, std::string, std::uint64_t>,
  caf::reacts_to<respawn_atom, std::uint64_t>,
  caf::reacts_to<yield_timeout_atom, std::uint64_t>,
  caf::replies_to<get_elector_atom>::with<elector_handle>>;

/// Spawns the runner actor without checking `opts` (spawn_runner checks them).
runner_actor spawn_runner_actor(caf::actor_system& sys, runner_options opts);

} // namespace leasehold
