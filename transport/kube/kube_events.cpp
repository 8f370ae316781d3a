#include "transport/kube/kube_events.hpp"

#include <memory>

#include "transport/thread_name.hpp"
#include "transport/kube/kube_client.hpp"

namespace leasehold {

namespace {

event_transport_actor::behavior_type event_transport(event_transport_actor::pointer self,
                                                     connection_config cfg) {
  name_this_thread("lh.events");
  auto client = std::make_shared<kube_client>(std::move(cfg));
  (void) self;
  return {
    [client](post_event_atom, const kube_event& e) { return client->create_event(e); },
  };
}

} // namespace

event_transport_actor spawn_kube_event_transport(caf::actor_system& sys, connection_config cfg) {
  return sys.spawn<caf::detached>(event_transport, std::move(cfg));
}

} // namespace leasehold
