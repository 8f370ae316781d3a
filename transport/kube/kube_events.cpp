#include "transport/kube/kube_events.hpp"

#include <memory>

#include "transport/thread_name.hpp"
#include "transport/kube/kube_client.hpp"

namespace leasehold {

event_transport_actor spawn_kube_event_transport(caf::actor_system& sys, connection_config cfg) {
  return sys.spawn<caf::detached>([cfg]() -> event_transport_actor::behavior_type {
    name_this_thread("lh.events");
    auto client = std::make_shared<kube_client>(cfg);
    return {
      [client](post_event_atom, const kube_event& e) { return client->create_event(e); },
    };
  });
}

} // namespace leasehold
