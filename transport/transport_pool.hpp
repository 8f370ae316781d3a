// The lease transport actor of both backends (Kubernetes over HTTP, etcd),
// written once: a dispatcher and a bounded pool of detached workers, each
// with its own blocking client. Why: docs/design.md, "The shape".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"
#include "transport/watch_fanout.hpp"

namespace leasehold {

/// One blocking client's calls, as one pool worker makes them.
class lease_client {
public:
  virtual ~lease_client() = default;
  virtual lease_reply get_lease(const lease_key& k) = 0;
  virtual lease_reply create_lease(const lease& l) = 0;
  virtual lease_reply update_lease(const lease& l) = 0;
  /// Batches (a backlog in the pool), one reply per request, in order;
  /// by default one by one. Renews are updates with lease::renew_max_age
  /// set; writes are the other updates (releases, new terms).
  virtual std::vector<lease_reply> get_leases(const std::vector<lease_key>& ks);
  virtual std::vector<lease_reply> renew_leases(const std::vector<lease>& ls);
  virtual std::vector<lease_reply> create_leases(const std::vector<lease>& ls);
  virtual std::vector<lease_reply> write_leases(const std::vector<lease>& ls);
  /// The Leases of `ns` labelled `selector` ("k=v"); by default unsupported.
  virtual leases_reply list_leases(const std::string& ns, const std::string& selector);
};

/// A lease_client over a backend client `C` (kube_client, etcd_client),
/// which sends each kind of batch its own way.
template <class C>
class lease_client_of final : public lease_client {
public:
  template <class... Args>
  explicit lease_client_of(Args&&... args) : c_(std::forward<Args>(args)...) {}
  lease_reply get_lease(const lease_key& k) override { return c_.get_lease(k); }
  lease_reply create_lease(const lease& l) override { return c_.create_lease(l); }
  lease_reply update_lease(const lease& l) override { return c_.update_lease(l); }
  std::vector<lease_reply> get_leases(const std::vector<lease_key>& ks) override {
    return c_.get_leases(ks);
  }
  std::vector<lease_reply> renew_leases(const std::vector<lease>& ls) override {
    return c_.renew_leases(ls);
  }
  std::vector<lease_reply> create_leases(const std::vector<lease>& ls) override {
    return c_.create_leases(ls);
  }
  std::vector<lease_reply> write_leases(const std::vector<lease>& ls) override {
    return c_.write_leases(ls);
  }
  leases_reply list_leases(const std::string& ns, const std::string& selector) override {
    if constexpr (has_list<C>(0))
      return c_.list_leases(ns, selector);
    else
      return lease_client::list_leases(ns, selector);
  }
private:
  template <class T>
  static constexpr auto has_list(int) -> decltype(&T::list_leases, true) { return true; }
  template <class T>
  static constexpr bool has_list(...) { return false; }
  C c_;
};

/// The most requests one batch call carries (etcd's default --max-txn-ops).
constexpr std::size_t max_batch_requests = 128;

/// Bounds of `workers` (connection_config::workers).
constexpr std::size_t min_transport_workers = 1;
constexpr std::size_t max_transport_workers = 64;

struct transport_pool_options {
  std::size_t workers = 4;                  // at most this many clients and threads
  std::chrono::milliseconds max_wait{5000};  // longer in the queue: answered `timeout` unsent
  /// A pool ended with releases queued sends those it can start within
  /// this long: the actor system's end waits at most this, plus one request.
  std::chrono::milliseconds release_drain{10000};
  std::string thread_name = "lh.transport";  // the workers' thread name (at most 15 chars)
  /// Builds one worker's client (called on the dispatcher).
  std::function<std::unique_ptr<lease_client>()> make_client;
  /// What the pool's own errors name for a request: lease_backend::request_path.
  std::function<std::string(const std::string& verb, const lease_key&)> where;
  /// Builds the dispatcher's watches (watch_per_namespace of
  /// lease_watch.hpp): lh_watch joins them; a release's sender leaves them.
  std::function<shared_watches(lease_transport_actor::pointer)> make_watch;
  /// Queued writes go in batches (write_leases) only for a client that
  /// sends them as one; one by one on one worker is slower than spread out.
  bool batch_writes = false;
  /// Set: every request is answered with this error (kind other, naming
  /// the invalid field), nothing is sent.
  std::string invalid;
};

/// A hung worker stalls only its own request; queueing, expiry, release
/// drain and batches: docs/design.md, "The shape", and docs/embedding.md,
/// "How many leases one process holds".
lease_transport_actor spawn_transport_pool(caf::actor_system& sys, transport_pool_options opts);

/// This process's transports now, summed over every pool and watch (the
/// agent's /debug/state and /metrics).
struct transport_census {
  std::int64_t pools = 0;           // live dispatchers
  std::int64_t workers = 0;         // live workers: one thread and one client each (its connection;
                                    // on Kubernetes a second one for pipelined batches)
  std::int64_t busy_workers = 0;    // serving a request now
  std::int64_t queued = 0;          // requests waiting for a worker
  std::int64_t watch_streams = 0;   // live watch loops: one thread and one stream each
  std::uint64_t requests = 0;       // requests answered by a worker since start
  std::uint64_t expired = 0;        // requests answered `timeout` after max_wait in the queue
  std::uint64_t batches = 0;        // batch calls (2 or more requests in one call of a client)
  std::uint64_t batched = 0;        // requests answered by those batch calls
  std::uint64_t echoes_dropped = 0; // own renews' events a watch dropped unparsed (watch_echoes.hpp)
};
transport_census current_transport_census();

/// The counters behind current_transport_census() (updated by the pools
/// and by lease_watch_loop).
namespace census {
extern std::atomic<std::int64_t> pools, workers, busy_workers, queued, watch_streams;
extern std::atomic<std::uint64_t> requests, expired, batches, batched, echoes_dropped;
} // namespace census

} // namespace leasehold
