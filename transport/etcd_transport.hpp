// The lease transport backed by etcd v3 (its JSON gateway, etcd 3.4 API).
//
// The same typed interface as the Kubernetes backend; the mapping:
//   key    <prefix>/<namespace>/<name>, value JSON {holderIdentity,
//          leaseDurationSeconds, acquireTime}, bound to an etcd lease whose
//          TTL is leaseDurationSeconds;
//   term   the key's create_revision (strictly increasing in the cluster),
//          reported as spec.leaseTransitions; resource_version is mod_revision;
//   GET    /v3/kv/range, then /v3/lease/timetolive of the key's lease
//          (lease::ttl_seconds); no key: not_found;
//   create /v3/lease/grant + /v3/kv/txn (create_revision == 0, then put with
//          the lease); key present: already_exists;
//   update a renew (same holder and term): /v3/kv/range (the key still has
//          this create_revision) + /v3/lease/keepalive (TTL > 0), else
//          not_found / conflict; a release (holder ""): /v3/kv/txn putting
//          the released record on the key (same lease, if create_revision
//          is unchanged; no revoke: it goes with the TTL unless taken); a new term
//          on a released record or one naming the same holder (the elector
//          re-taking its own ended term): delete (if
//          mod_revision unchanged) + create; anything else: conflict.
//   events are not stored (post_event answers true).
//   watch  POST /v3/watch (streamed, one JSON message per line) from the
//          revision after the last one delivered; a PUT event is a record
//          (parsed as get_lease does), a DELETE (revoke, expired TTL) is
//          `deleted`; no revision to resume from, or a compacted one: the
//          key is read first and its state delivered. The loop (thread,
//          backoff, up/down, idle) is lease_watch_loop's; a stream quiet
//          for idle_timeout (renews write nothing) reads the key again and
//          watches on, without going down.
// Expiry is judged by etcd (lease TTL), so electors on this backend run
// with backend_traits{.server_expiry = true} (docs/safety.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json_fwd.hpp>

#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"
#include "transport/kube_client.hpp"

namespace leasehold {

/// A key as one range read saw it.
struct etcd_lease_state {
  std::optional<lease> record;   // nullopt: no key
  std::int64_t revision = 0;     // the store's revision at the read
};

/// One message of an etcd watch stream (the gateway writes one JSON object
/// per line: {"result":{...}} or {"error":{...}}).
struct etcd_watch_message {
  struct event {
    bool deleted = false;          // DELETE (an expired or revoked lease, too); else PUT
    std::optional<lease> record;   // PUT: the record, parsed as etcd_client::get_lease does
    std::int64_t mod_revision = 0;
  };
  bool created = false;            // the watch is set up
  bool canceled = false;           // the server ended this watch
  std::int64_t compact_revision = 0;   // canceled: the start revision is compacted away
  std::string cancel_reason;
  std::vector<event> events;
  bool error = false;              // {"error":...}: the gateway's stream failed
  int grpc_code = 0;
  int http_code = 0;
  std::string message;             // error: its message
};

/// Parses one line of a watch of `k`; the error names the field
/// ("result.events[0].kv.create_revision: ...").
parse_result<etcd_watch_message> parse_etcd_watch_line(const std::string& line,
                                                       const lease_key& k);

/// Blocking etcd client: use it from a detached actor or a thread only.
/// Every call goes to the current endpoint; on a connection error, timeout or
/// an unavailable member it moves to the next endpoint (and stays there) and
/// retries, at most once per endpoint.
class etcd_client {
public:
  explicit etcd_client(etcd_config cfg);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  api_result<lease> get_lease(const lease_key& k);
  api_result<lease> create_lease(const lease& l);
  api_result<lease> update_lease(const lease& l);

  /// The key's record (nullopt: absent) and the store revision it was
  /// read at: a watch from revision + 1 misses no change after this read.
  api_result<etcd_lease_state> read_lease(const lease_key& k);
  /// A streaming POST of `body` to `path` (a watch, see kube_client::stream)
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

  /// <prefix>/<namespace>/<name>
  std::string key_of(const lease_key& k) const;
  /// The endpoint the next call goes to.
  const std::string& current_endpoint() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace leasehold
