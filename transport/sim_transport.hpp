// A simulated Kubernetes Lease API for scripted message tests (and for
// embedders' own tests): an in-memory store with the real semantics
// (resourceVersion, 404/409 AlreadyExists/409 Conflict), per-client fault
// injection and a log of every request, behind the lease_transport_actor
// interface. Works on CAF's test coordinator: latency uses the actor clock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"

namespace leasehold {

enum class sim_fault {
  none,
  down,    // every request fails at once with connection_refused
  hang,    // requests are never answered (the caller's request timeout fires)
  error,   // requests fail with `error_status` (500/503: server_error, 429: throttled)
};

struct sim_request {
  std::string client;
  std::string verb;       // GET, POST, PUT, EVENT
  std::string lease;      // ns/name
  error_kind result = error_kind::none;
  std::string holder;     // holderIdentity written (POST/PUT) or read (GET)
};

class sim_api {
public:
  /// Fault for every client (`client` empty) or one client (a partition).
  void set_fault(sim_fault f, const std::string& client = {}, int error_status = 503);
  void clear_faults();
  /// Extra latency before each answer (simulated time on the test coordinator).
  void set_latency(caf::timespan d) { std::lock_guard<std::mutex> g(mx_); latency_ = d; }
  caf::timespan latency() const { std::lock_guard<std::mutex> g(mx_); return latency_; }
  /// Adds a random extra latency in [0, max] to every answer, drawn from an
  /// RNG seeded with `seed` (reproducible runs).
  void set_latency_jitter(caf::timespan max, std::uint64_t seed);
  /// The latency of the next answer: the fixed latency plus its jitter.
  caf::timespan draw_latency();
  /// Loses every object, as an API server restarted without its storage.
  void wipe();
  /// Creates `k` as a released Lease (no holder), as any cluster has where
  /// leasehold ran before.
  void create_released(const lease_key& k);

  std::optional<lease> peek(const lease_key& k) const;
  std::vector<sim_request> requests() const;
  /// The requests logged from index `from` on (the log only grows).
  std::vector<sim_request> requests_since(std::size_t from) const;
  std::size_t request_count() const;
  std::vector<kube_event> events() const;
  std::size_t count(const std::string& verb, const std::string& client = {}) const;

  /// Watch support: every change to the store (create, update, wipe) gets
  /// the next resourceVersion and is kept in order; `poke` is called after
  /// each change and each fault change (outside the store's lock).
  struct change {
    lease_key key;
    std::uint64_t rv = 0;
    std::optional<lease> record;   // nullopt: deleted (a wipe)
  };
  std::uint64_t add_watcher(std::function<void()> poke);
  void remove_watcher(std::uint64_t id);
  std::vector<change> changes_since(const lease_key& k, std::uint64_t rv) const;

  // What a transport actor calls; `fault` is evaluated first.
  sim_fault fault_for(const std::string& client, int& error_status) const;
  lease_reply get(const std::string& client, const lease_key& k);
  lease_reply create(const std::string& client, lease l);
  lease_reply update(const std::string& client, lease l);
  event_reply post_event(const std::string& client, kube_event e);
  lease_reply failure(const std::string& client, const std::string& verb, const lease_key& k,
                      sim_fault f, int status);

private:
  void log(const std::string& client, const std::string& verb, const lease_key& k,
           error_kind r, const std::string& holder);
  lease_reply store_create(const std::string& client, lease l);
  lease_reply store_update(const std::string& client, lease l);
  void record_change(const lease_key& k, std::optional<lease> rec);   // under mx_
  void poke_watchers();                                               // not under mx_

  mutable std::mutex mx_;
  std::map<lease_key, lease> store_;
  std::uint64_t next_rv_ = 1;
  std::uint64_t next_uid_ = 1;
  std::map<std::string, std::pair<sim_fault, int>> faults_;   // "" = everyone
  caf::timespan latency_{0};
  caf::timespan jitter_{0};
  std::mt19937_64 rng_{1};
  std::vector<sim_request> requests_;
  std::vector<kube_event> events_;
  std::vector<change> changes_;
  std::map<std::uint64_t, std::function<void()>> watchers_;
  std::uint64_t next_watcher_ = 1;
};

/// A transport actor for `client` (its identity) backed by `api`.
lease_transport_actor spawn_sim_transport(caf::actor_system& sys, std::shared_ptr<sim_api> api,
                                          std::string client);

} // namespace leasehold
