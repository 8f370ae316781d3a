// A simulated Kubernetes Lease API for scripted message tests (and for
// embedders' own tests): an in-memory store with the real semantics
// (resourceVersion, 404/409 AlreadyExists/409 Conflict), per-client fault
// injection and a log of every request, behind the lease_transport_actor
// interface. Works on CAF's test coordinator: latency uses the actor clock.
// The faults, latency, request log and watch streaming live in sim_store,
// which any other simulated store's semantics (etcd's) reuse.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"
#include "transport/etcd/etcd_evidence.hpp"

namespace leasehold {

enum class sim_fault {
  none,
  down,    // every request fails at once with connection_refused
  hang,    // requests are never answered (the caller's request timeout fires)
  error,   // requests fail with `error_status` (500/503: server_error, 429: throttled)
  /// Writes (POST, PUT) fail with `error_status` (422, 400: invalid); reads
  /// and watches are answered: an API that refuses what this client writes.
  refuse_writes,
  /// Requests land (a write is applied) but no answer comes back (the
  /// caller's request timeout fires); reads and watches are answered.
  lose_answers,
};

struct sim_request {
  std::string client;
  std::string verb;       // GET, POST, PUT
  std::string lease;      // ns/name
  error_kind result = error_kind::none;
  std::string holder;     // holderIdentity written (POST/PUT) or read (GET)
};

/// What every simulated store shares, whatever its semantics (the
/// Kubernetes one below; the simulator adds an etcd one): per-client
/// faults, the latency of each answer, the log of requests and the watchers
/// poked after every change. The transport actor (spawn_sim_transport) talks
/// to a store only through this interface: it evaluates the fault, sends the
/// request over the two latency legs, and streams changes_since() to
/// watching subscribers.
class sim_store {
public:
  virtual ~sim_store() = default;

  /// Fault for every client (`client` empty) or one client (a partition).
  void set_fault(sim_fault f, const std::string& client = {}, int error_status = 503);
  /// Clears every fault and the fixed latency (the jitter stays).
  void clear_faults();
  /// Extra latency before each answer (simulated time on the test coordinator).
  void set_latency(caf::timespan d);
  caf::timespan latency() const;
  /// Adds a random extra latency in [0, max] to every answer, drawn from an
  /// RNG seeded with `seed` (reproducible runs).
  void set_latency_jitter(caf::timespan max, std::uint64_t seed);
  /// The latency of the next answer: the fixed latency plus its jitter.
  caf::timespan draw_latency();
  sim_fault fault_for(const std::string& client, int& error_status) const;

  std::vector<sim_request> requests() const;
  /// The requests logged from index `from` on (the log only grows).
  std::vector<sim_request> requests_since(std::size_t from) const;
  std::size_t request_count() const;
  std::size_t count(const std::string& verb, const std::string& client = {}) const;

  /// Watch support: every change to the store gets the next version
  /// (resourceVersion, etcd revision) and is kept in order; `poke` is called
  /// after each change and each fault change (outside the store's lock).
  struct change {
    lease_key key;
    std::uint64_t rv = 0;
    std::optional<lease> record;   // nullopt: deleted
  };
  std::uint64_t add_watcher(std::function<void()> poke);
  void remove_watcher(std::uint64_t id);
  /// The changes to `k` after version `rv`, oldest first; `k.name` empty:
  /// to every object of namespace `k.ns` (a shared stream's scope).
  std::vector<change> changes_since(const lease_key& k, std::uint64_t rv) const;
  /// The version of the latest change (0: none yet).
  std::uint64_t last_version() const;
  /// A watch that starts again from the current state (410 Gone, a
  /// compaction) tells of objects gone meanwhile: etcd's watch re-reads the
  /// key and reports it deleted; a Kubernetes watch without a
  /// resourceVersion lists only the objects that exist (ADDED events).
  virtual bool relist_tells_deleted() const { return false; }
  /// The store ends a term itself when its TTL runs out (etcd): the
  /// lease_evidence::store_ends_terms of its electors (sim_backend).
  virtual bool server_expiry() const { return false; }
  /// etcd: `client`'s latest TTL reading of etcd lease `lease_id` and its
  /// read marked in flight, as its transport shares them
  /// (etcd_shared_readings::status_of, ttl_read_begins); none elsewhere.
  virtual etcd_ttl_status ttl_status(const std::string& client,
                                                const std::string& lease_id) const {
    (void)client;
    (void)lease_id;
    return {};
  }
  /// Marks it in flight; returns what ends the mark.
  virtual std::function<void()> ttl_read_begins(const std::string& client,
                                                const std::string& lease_id) {
    (void)client;
    (void)lease_id;
    return {};
  }

  // -- the store's semantics, as the transport actor calls them -------------

  virtual std::optional<lease> peek(const lease_key& k) const = 0;
  virtual lease_reply get(const std::string& client, const lease_key& k) = 0;
  virtual lease_reply create(const std::string& client, lease l) = 0;
  virtual lease_reply update(const std::string& client, lease l) = 0;
  /// A store whose update is two steps for the transport (etcd: a renew's
  /// range, then its keepalive) does the first here, when the request
  /// arrives, and returns the rest, which runs one latency leg later; an
  /// empty function: the whole update runs at once (update).
  virtual std::function<lease_reply()> update_begin(const std::string& client, const lease& l) {
    (void)client;
    (void)l;
    return {};
  }
  /// The error a request `verb` on `k` meets under fault `f` (logged).
  lease_reply failure(const std::string& client, const std::string& verb, const lease_key& k,
                      sim_fault f, int status);
  /// The path named in errors of `verb` ("WATCH": the watch stream) on `k`.
  virtual std::string path_of(const std::string& verb, const lease_key& k) const = 0;
  /// The records of `ns` labelled `selector` ("k=v"), at one point (list_leases_atom).
  virtual leases_reply list(const std::string& client, const std::string& ns,
                            const std::string& selector) {
    (void)client;
    return leases_reply::failure({error_kind::invalid, 0, "GET", ns, "this store lists no leases " + selector, 0});
  }

  // -- writes from outside the protocol (an operator, a tool) ----------------

  /// Deletes the object (Kubernetes: the Lease; etcd: the key).
  virtual void outside_delete(const lease_key& k) = 0;
  /// Cancels the holder's claim, the object staying where the backend keeps
  /// it (Kubernetes: holderIdentity emptied, every other field kept, as
  /// `kubectl patch` does; etcd: the key's etcd lease revoked, which
  /// deletes the key).
  virtual void outside_revoke(const lease_key& k) = 0;

protected:
  void log(const std::string& client, const std::string& verb, const lease_key& k,
           error_kind r, const std::string& holder);
  /// Keeps a change for the watches; versions must grow from call to call.
  void record_change(change c);
  void poke_watchers();   // never under a store's lock

private:
  mutable std::mutex net_mx_;   // faults, latency, log, watchers
  std::map<std::string, std::pair<sim_fault, int>> faults_;   // "" = everyone
  caf::timespan latency_{0};
  caf::timespan jitter_{0};
  std::mt19937_64 rng_{1};
  std::vector<sim_request> requests_;
  std::vector<change> changes_;
  std::map<std::uint64_t, std::function<void()>> watchers_;
  std::uint64_t next_watcher_ = 1;
};

/// The Kubernetes Lease API: resourceVersion, 404, 409 AlreadyExists / Conflict.
class sim_api : public sim_store {
public:
  /// Loses every object, as an API server restarted without its storage.
  void wipe();
  /// Creates `k` as a released Lease (no holder), as any cluster has where
  /// leasehold ran before.
  void create_released(const lease_key& k);

  std::optional<lease> peek(const lease_key& k) const override;
  lease_reply get(const std::string& client, const lease_key& k) override;
  lease_reply create(const std::string& client, lease l) override;
  lease_reply update(const std::string& client, lease l) override;
  std::string path_of(const std::string& verb, const lease_key& k) const override;
  leases_reply list(const std::string& client, const std::string& ns,
                    const std::string& selector) override;
  void outside_delete(const lease_key& k) override;
  void outside_revoke(const lease_key& k) override;

private:
  lease_reply store_create(const std::string& client, lease l);
  lease_reply store_update(const std::string& client, lease l);
  void note_change(const lease_key& k, std::optional<lease> rec);   // under mx_

  mutable std::mutex mx_;
  std::map<lease_key, lease> store_;
  std::uint64_t next_rv_ = 1;
  std::uint64_t next_uid_ = 1;
};

/// How a simulated transport streams changes to its subscribers: one
/// stream per subscriber (as a transport of one lease), or one per
/// namespace shared by every subscriber in it, its events demultiplexed by
/// lease name (watch_per_namespace: the HTTP and etcd transports).
/// A shared stream starts from the current state (the records that exist,
/// to the subscribers it has then); a subscriber that joins an open stream
/// gets its health only, as watch_fanout::add gives.
enum class sim_watch_sharing { per_subscriber, per_namespace };

/// Faults of a transport's own watch streams, not of the store: each hits
/// every stream of the transport, so every lease a shared stream carries.
enum class sim_stream_fault {
  none,          // ends every stream fault below (a heal)
  cut,           // the stream breaks (`down`) and reopens after `d`, resuming gapless
  gone,          // 410 Gone / compaction: it starts again from the current state
  stale_replay,  // it resumes `param` versions before the last it delivered
  delay,         // for `d`, every event arrives `param` ms later (order kept)
};
const char* to_string(sim_stream_fault f);

/// Injects `f` into every watch stream of `transport` (a simulated one).
void inject_stream_fault(const lease_transport_actor& transport, sim_stream_fault f,
                         caf::timespan d = caf::timespan{0}, int param = 0);

/// A transport actor for `client` (its identity) backed by `store`.
lease_transport_actor spawn_sim_transport(caf::actor_system& sys, std::shared_ptr<sim_store> store,
                                          std::string client,
                                          sim_watch_sharing sharing = sim_watch_sharing::per_subscriber);

/// The lease backend of `transport` (spawned on `store`): the traits its
/// electors run with, as a real backend's factory pairs them: the store's
/// server_expiry, requests named by the store's path_of, and `client`'s
/// TTL readings (the client `transport` was spawned for).
lease_backend sim_backend(const lease_transport_actor& transport,
                          const std::shared_ptr<sim_store>& store, const std::string& client = "");

} // namespace leasehold
