#include "modules/subscription.hpp"

#include "leasehold/protocol.hpp"

namespace leasehold::modules {

void follow_leadership(caf::scheduled_actor* self, const leadership_publisher& runner) {
  if (!runner)
    return;
  auto me = caf::actor_cast<caf::actor>(self);
  caf::anon_send(runner, subscribe_atom::value, me);
  // The functor holds `me` until the actor's cleanup runs it and drops it.
  self->attach_functor([runner, me] { caf::anon_send(runner, unsubscribe_atom::value, me); });
}

} // namespace leasehold::modules
