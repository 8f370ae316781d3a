#include "leasehold/transports.hpp"
#include "transport/kube_client.hpp"

#include <memory>

#include "transport/lease_watch.hpp"
#include "transport/thread_name.hpp"

namespace leasehold {

namespace {

lease_transport_actor::behavior_type http_transport(lease_transport_actor::pointer self,
                                                    std::shared_ptr<kube_client> client) {
  name_this_thread("lh.http");   // detached: this runs on the actor's own thread
  // One watch stream per namespace, shared by every subscriber in it (one
  // thread and one connection however many leases): the namespace's Lease
  // collection, demultiplexed by lease name.
  auto watch = watch_per_namespace(
    self, [client](const std::string& ns, caf::timespan idle, std::shared_ptr<watch_fanout> fanout) {
      lease_watch_request req;
      req.lease = {ns, ""};
      req.idle_timeout = idle;
      return std::make_unique<lease_watcher>(client->config(), std::move(req), std::move(fanout));
    });
  return {
    [watch](watch_lease_atom, lease_watch_request& req) { watch(req); },
    [client](get_lease_atom, const lease_key& k) -> lease_reply {
      return client->get_lease(k);
    },
    [client](create_lease_atom, const lease& l) -> lease_reply {
      return client->create_lease(l);
    },
    [client](update_lease_atom, const lease& l) -> lease_reply {
      return client->update_lease(l);
    },
    [client](post_event_atom, const kube_event& e) -> event_reply {
      return client->create_event(e);
    },
  };
}

} // namespace

lease_transport_actor spawn_http_transport(caf::actor_system& sys, connection_config cfg) {
  return sys.spawn<caf::detached>(http_transport, std::make_shared<kube_client>(std::move(cfg)));
}

} // namespace leasehold
