// The lease transport actor of both backends (Kubernetes over HTTP, etcd),
// written once: a dispatcher behind lease_transport_actor and a bounded
// pool of detached workers, each with its own blocking keep-alive client.
//
//   requesters ──lh_get/lh_create/lh_update──▶ dispatcher
//        (scheduled actor; never blocks)                 │ an idle worker, else a new
//                                                        │ one (up to `workers`), else
//                                                        ▼ FIFO queue
//                                    worker 1 … worker N (detached: the client blocks)
//   requesters ◀──────────── the reply, from the worker ───┘ (then the worker takes
//                                                            the next queued request,
//                                                            with up to 127 more of its
//                                                            kind: a batch, see below)
//   requesters ──lh_watch──▶ dispatcher ──▶ the backend's watch streams (own threads)
// How requests queue, expire and batch: spawn_transport_pool below.
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
  /// A batch of reads (a backlog in the pool): one reply per key, in
  /// order. Default: get_lease one by one.
  virtual std::vector<lease_reply> get_leases(const std::vector<lease_key>& ks);
  /// A batch of renews (updates with lease::renew_max_age set): one reply
  /// per lease, in order. Default: update_lease one by one.
  virtual std::vector<lease_reply> renew_leases(const std::vector<lease>& ls);
  /// A batch of creates: one reply per lease, in order. Default:
  /// create_lease one by one.
  virtual std::vector<lease_reply> create_leases(const std::vector<lease>& ls);
  /// A batch of writes (updates that are no renews: releases, new terms
  /// on an existing key): one reply per lease, in order. Default:
  /// update_lease one by one.
  virtual std::vector<lease_reply> write_leases(const std::vector<lease>& ls);
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
private:
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
  /// this long of its end (each frees a lease the other replicas would
  /// otherwise wait out; 10,000 releases on 2 cores take a few seconds):
  /// the actor system's end waits at most this, plus one request.
  std::chrono::milliseconds release_drain{10000};
  std::string thread_name = "lh.transport";  // the workers' thread name (at most 15 chars)
  /// Builds one worker's client (called on the dispatcher).
  std::function<std::unique_ptr<lease_client>()> make_client;
  /// What errors made by the pool itself name for a request `verb` on a
  /// lease: the backend's lease_backend::request_path (Kubernetes: its
  /// Lease path; etcd: its key).
  std::function<std::string(const std::string& verb, const lease_key&)> where;
  /// Builds the dispatcher's watches (watch_per_namespace of
  /// lease_watch.hpp): lh_watch joins them; a release's sender leaves them.
  std::function<shared_watches(lease_transport_actor::pointer)> make_watch;
  /// Queued writes (releases, new terms) go in batches (write_leases):
  /// only for a client that sends them as one (etcd: a txn; Kubernetes:
  /// pipelined); one by one on one worker they would be slower than alone
  /// on every idle worker.
  bool batch_writes = false;
  /// Set: every request is answered with this error (kind other, naming
  /// the invalid field), nothing is sent.
  std::string invalid;
};

/// A request goes only to an idle worker, so a hung one (a server that
/// accepts and never answers) stalls only the request it is serving, for at
/// most max_request_time(); the others go on. Workers start on demand: a
/// process with one lease and one request at a time has one. A request that
/// waited in the queue longer than `max_wait` is answered `timeout` without
/// being sent (its requester has given up by then; sending it would only
/// lengthen the queue), except a release (an update naming no holder): sent
/// late it still frees its lease for the other replicas, so it waits its
/// turn, and when the transport is stopped with releases queued its workers
/// still send them (those they start within `release_drain` of the stop),
/// then end. Errors stay per request: each reply is the worker's own api_result.
///
/// Batches, only from a backlog: a worker that takes a read (lh_get), a
/// create (lh_create) or a renew (lh_update with lease::renew_max_age set:
/// the elector's renew of a term it holds) while more of that kind wait in
/// the queue takes up to
/// max_batch_requests of them at once (looking at most at the oldest
/// 4 x max_batch_requests queued; the others keep their order) and makes ONE
/// batch call of its client (lease_client::get_leases / create_leases /
/// renew_leases), then answers each requester with its own reply. A lone
/// request is sent alone, as before; max_wait still expires each request on
/// its own. The client decides what a batch costs: one by one by default;
/// on Kubernetes (kube_client) the requests pipelined on one connection
/// (transport/http/http_pipeline.hpp); on etcd (etcd_client) one txn of ranges
/// for reads and renews, one all-or-nothing txn for creates (every key
/// compared absent, else each created alone). New terms on an existing key
/// and releases (the other updates: "writes") are batched only where the
/// options say the client sends them as batches
/// (transport_pool_options::batch_writes: etcd and Kubernetes,
/// lease_client::write_leases); elsewhere each goes alone, on any idle
/// worker.
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
