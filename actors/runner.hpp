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

} // namespace leasehold
