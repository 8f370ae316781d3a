#include "transport/etcd_transport.hpp"

#include <memory>

#include "transport/kube_client.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

lease_transport_actor spawn_etcd_transport(caf::actor_system& sys, etcd_config cfg) {
  transport_pool_options opts;
  opts.workers = cfg.http.workers;
  opts.max_wait = max_request_time(cfg.http);
  opts.thread_name = "lh.etcd";
  opts.make_client = [cfg] { return std::make_unique<lease_client_of<etcd_client>>(cfg); };
  opts.where = [scope_prefix = cfg.prefix](const lease_key& k) {
    return etcd_scope{scope_prefix, k.ns}.key(k.name);
  };
  // One watch stream per namespace, shared by every subscriber in it (one
  // thread and one connection however many leases): the keys under
  // <prefix>/<namespace>/, demultiplexed by lease name.
  opts.make_watch = [cfg](lease_transport_actor::pointer self) {
    return watch_per_namespace(
      self, [cfg](const std::string& ns, caf::timespan idle, std::shared_ptr<watch_fanout> fanout) {
        return make_etcd_watch(cfg, ns, idle, std::move(fanout));
      });
  };
  return spawn_transport_pool(sys, std::move(opts));
}

} // namespace leasehold
