#include "transport/etcd/etcd_transport.hpp"
#include "transport/etcd/etcd_evidence.hpp"

#include <memory>

#include "transport/http/http_client.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

lease_backend spawn_etcd_backend(caf::actor_system& sys, etcd_config cfg) {
  lease_backend b;
  b.request_path = [scope_prefix = cfg.prefix](const std::string&, const lease_key& k) {
    return etcd_scope{scope_prefix, k.ns}.key(k.name);
  };
  transport_pool_options opts;
  opts.workers = cfg.http.workers;
  opts.max_wait = max_request_time(cfg.http);
  opts.thread_name = "lh.etcd";
  // The workers share their session leases and TTL readings.
  auto readings = std::make_shared<etcd_client::ttl_cache>();
  auto session = std::make_shared<etcd_session>();
  // The key dies with its etcd lease: the followers' evidence is the TTL
  // readings they share and the store's revisions (docs/safety.md).
  auto shared = std::make_shared<etcd_shared_readings>();
  shared->status_of = [readings](const std::string& id) {
    return readings->status(id, std::chrono::steady_clock::now());
  };
  shared->read_begins = [readings](const std::string& id) {
    auto t = std::chrono::steady_clock::now();
    readings->begin(id, t);
    std::weak_ptr<etcd_client::ttl_cache> w = readings;
    return std::shared_ptr<void>(nullptr, [w, id, t](void*) {
      if (auto r = w.lock())
        r->end(id, t);
    });
  };
  b.evidence = [shared](const election_timings& t, std::uint64_t seed) {
    return make_etcd_evidence(t, seed, shared);
  };
  opts.batch_writes = true;   // releases and new terms: etcd_client::write_leases
  opts.make_client = [cfg, readings, session] {
    return std::make_unique<lease_client_of<etcd_client>>(cfg, readings, session);
  };
  opts.where = b.request_path;
  // One watch stream per namespace, shared by every subscriber in it.
  opts.make_watch = [cfg](lease_transport_actor::pointer self) {
    return watch_per_namespace(
      self, [cfg](const std::string& ns, caf::timespan idle, std::shared_ptr<watch_fanout> fanout) {
        return make_etcd_watch(cfg, ns, idle, std::move(fanout));
      });
  };
  b.transport = spawn_transport_pool(sys, std::move(opts));
  return b;
}

} // namespace leasehold
