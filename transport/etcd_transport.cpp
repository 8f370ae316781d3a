#include "transport/etcd_transport.hpp"

#include <memory>

#include "transport/thread_name.hpp"

namespace leasehold {

namespace {

lease_transport_actor::behavior_type etcd_transport(lease_transport_actor::pointer self,
                                                    std::shared_ptr<etcd_client> client) {
  name_this_thread("lh.etcd");   // detached: this runs on the actor's own thread
  // One watch stream per namespace, shared by every subscriber in it (one
  // thread and one connection however many leases): the keys under
  // <prefix>/<namespace>/, demultiplexed by lease name.
  auto watch = watch_per_namespace(
    self, [client](const std::string& ns, caf::timespan idle, std::shared_ptr<watch_fanout> fanout) {
      return make_etcd_watch(client->config(), ns, idle, std::move(fanout));
    });
  return {
    [client](get_lease_atom, const lease_key& k) -> lease_reply {
      return client->get_lease(k);
    },
    [client](create_lease_atom, const lease& l) -> lease_reply {
      return client->create_lease(l);
    },
    [client](update_lease_atom, const lease& l) -> lease_reply {
      return client->update_lease(l);
    },
    [](post_event_atom, const kube_event&) -> event_reply {
      return event_reply::success(true);   // etcd keeps no Events
    },
    [watch](watch_lease_atom, lease_watch_request& req) { watch(req); },
  };
}

} // namespace

lease_transport_actor spawn_etcd_transport(caf::actor_system& sys, etcd_config cfg) {
  return sys.spawn<caf::detached>(etcd_transport, std::make_shared<etcd_client>(std::move(cfg)));
}

} // namespace leasehold
