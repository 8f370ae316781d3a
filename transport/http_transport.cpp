#include "leasehold/transports.hpp"
#include "transport/kube_client.hpp"

#include <map>
#include <memory>

#include "transport/lease_watch.hpp"
#include "transport/thread_name.hpp"

namespace leasehold {

namespace {

lease_transport_actor::behavior_type http_transport(lease_transport_actor::pointer self,
                                                    std::shared_ptr<kube_client> client) {
  name_this_thread("lh.http");   // detached: this runs on the actor's own thread
  // One watch stream per subscriber, each on its own thread and connection;
  // it ends (and its thread is joined) when the subscriber terminates.
  using watchers = std::map<caf::actor_addr, std::unique_ptr<lease_watcher>>;
  auto streams = std::make_shared<watchers>();
  self->set_down_handler([streams](caf::down_msg& m) { streams->erase(m.source); });
  return {
    [self, client, streams](watch_lease_atom, lease_watch_request& req) {
      if (!req.subscriber)
        return;
      auto addr = req.subscriber.address();
      self->monitor(req.subscriber);
      (*streams)[addr] = std::make_unique<lease_watcher>(client->config(), std::move(req));
    },
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
