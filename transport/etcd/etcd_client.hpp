// The blocking etcd v3 client (JSON gateway): the lease mapping of get /
// create / update onto keys, etcd leases and transactions
// (transport/etcd/etcd_transport.hpp says how), over an etcd_connection
// (endpoints, failover, authentication: transport/etcd/etcd_connection.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/transports.hpp"
#include "transport/etcd/etcd_session.hpp"
#include "transport/etcd/etcd_ttl_readings.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

/// Blocking etcd client: use it from a detached actor or a thread only.
/// Its calls fail over between endpoints as etcd_connection's do.
class etcd_client {
public:
  /// The TTL readings of a transport's etcd leases, shared by its clients.
  using ttl_cache = ttl_readings<std::chrono::steady_clock::time_point>;

  /// `readings`, `session`: the TTL readings and the session lease shared
  /// with the transport's other clients (null: this client's own).
  explicit etcd_client(etcd_config cfg, std::shared_ptr<ttl_cache> readings = nullptr,
                       std::shared_ptr<etcd_session> session = nullptr);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  api_result<lease> get_lease(const lease_key& k);
  api_result<lease> create_lease(const lease& l);
  api_result<lease> update_lease(const lease& l);
  /// Puts `l`'s record on its key if the key is still at l.resource_version
  /// (its mod_revision; else a conflict), keeping the key's etcd lease and
  /// so its term: another replica's write of preferredHolder for the holder
  /// (cmd/leasehold/yield_route.hpp). Like `etcdctl put --ignore-lease`.
  api_result<lease> put_record(const lease& l);
  /// A batch of reads / of renews (the transport pool's backlog): one txn
  /// of ranges (no compares) per 128 keys, each key's range judged as
  /// get_lease / update_lease judge their own, then each renew's keepalive
  /// as update_lease's (one keepalive serves them all). One reply per
  /// request, in order; a failed txn fails each of its requests, naming
  /// its key.
  std::vector<api_result<lease>> get_leases(const std::vector<lease_key>& ks);
  std::vector<api_result<lease>> renew_leases(const std::vector<lease>& ls);
  /// A batch of creates: one txn comparing every key absent and putting
  /// them all (all or none); not all absent: each created alone.
  std::vector<api_result<lease>> create_leases(const std::vector<lease>& ls);
  /// A batch of writes that are no renews (releases, new terms on an
  /// existing key: a process's releases at shutdown, a follower's takeover
  /// of them): one txn of ranges per 128 keys, then the releases still in
  /// their term in ONE txn of puts (each compared on its own key's
  /// create_revision, after one keepalive of each etcd lease), the new
  /// terms' deletes in ONE txn (each compared on its key's mod_revision)
  /// and their creates as create_leases. A txn one compare of which failed
  /// changes nothing: each of its writes is then sent alone (update_lease).
  /// Anything else alone too. One reply per request, in order.
  std::vector<api_result<lease>> write_leases(const std::vector<lease>& ls);

  /// Every lease record of namespace `ns` and the store revision it was
  /// read at: a watch from revision + 1 misses no change after this read.
  /// Read in ranges of at most `page` keys, every page at the first one's
  /// revision (one snapshot); a revision compacted meanwhile fails the read
  /// (the watch then reads again).
  api_result<etcd_scope_state> read_scope(const std::string& ns, std::size_t page = 1000);
  /// What a quiet watch of namespace `ns` needs to know that it missed
  /// nothing since `revision`: how many keys the namespace has, and whether
  /// any of them was written at or after `revision`. One linearizable range
  /// with keys_only, limit 1 and min_mod_revision (etcd counts before it
  /// filters), so no value is read however many keys there are.
  api_result<etcd_scope_changes> changed_since(const std::string& ns, std::int64_t revision);
  /// A streaming POST of `body` to `path` (a watch, see http_client::stream)
  /// on the current endpoint; a failure after which another endpoint may
  /// answer (not a quiet stream's idle timeout) moves to the next endpoint.
  api_error stream(const std::string& path, const nlohmann::json& body,
                   std::chrono::milliseconds idle_timeout, const std::function<void()>& on_open,
                   const std::function<bool(const char*, std::size_t)>& on_data);
  /// A stream that opened then reported an error of `kind` in its body:
  /// as for a failed call, authenticate again (unauthorized: simple tokens
  /// expire) or move to the next endpoint (unavailable, no leader, ...).
  void stream_failed(error_kind kind);
  /// Aborts a blocking stream() from another thread.
  void stop();
  const etcd_config& config() const;

  /// The keys of namespace `ns`: <prefix>/<ns>/<name>.
  etcd_scope scope(const std::string& ns) const;
  /// The endpoint the next call goes to.
  const std::string& current_endpoint() const;
  /// One gateway call (POST `body` to `path`, failing over and
  /// authenticating like every call): the reply body, or the error. Other
  /// uses of the store (balance membership) go through it.
  api_result<nlohmann::json> post(const std::string& path, const nlohmann::json& body);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace leasehold
