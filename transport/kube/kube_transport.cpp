#include "leasehold/transports.hpp"
#include "transport/kube/kube_client.hpp"

#include <memory>

#include "transport/kube/kube_watch.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

lease_backend spawn_http_backend(caf::actor_system& sys, connection_config cfg) {
  lease_backend b;
  b.request_path = kube_request_path;   // no evidence beyond the record: judged by the clock
  transport_pool_options opts;
  opts.workers = cfg.workers;
  opts.max_wait = max_request_time(cfg);
  opts.thread_name = "lh.http";
  // Queued releases and new terms go pipelined too (kube_client::write_leases).
  opts.batch_writes = true;
  auto echoes = std::make_shared<watch_echoes>();
  opts.make_client = [cfg, echoes] {
    return std::make_unique<lease_client_of<kube_client>>(cfg, echoes);
  };
  opts.where = b.request_path;
  // One watch stream per namespace, shared by every subscriber in it.
  opts.make_watch = [cfg, echoes](lease_transport_actor::pointer self) {
    return watch_per_namespace(
      self, [cfg, echoes](const std::string& ns, caf::timespan idle,
                          std::shared_ptr<watch_fanout> fanout) {
        lease_watch_request req;
        req.lease = {ns, ""};
        req.idle_timeout = idle;
        return std::make_unique<lease_watcher>(cfg, std::move(req), std::move(fanout), echoes);
      });
  };
  b.transport = spawn_transport_pool(sys, std::move(opts));
  return b;
}

} // namespace leasehold
