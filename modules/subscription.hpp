// Following the runner's leadership_changed notifications for an actor's
// whole life: subscribe now, unsubscribe on every exit path (kill included).
#pragma once

#include <caf/all.hpp>

#include "leasehold/messages.hpp"

namespace leasehold::modules {

/// Does nothing when `runner` is invalid (a module spawned outside a runner).
void follow_leadership(caf::scheduled_actor* self, const leasehold::leadership_publisher& runner);

} // namespace leasehold::modules
