// The lease transport backed by etcd v3 (its JSON gateway, etcd 3.4 API).
//
// The same typed interface as the Kubernetes backend; the mapping:
//   key    <prefix>/<namespace>/<name>, value JSON {holderIdentity,
//          leaseDurationSeconds, acquireTime}, bound to an etcd lease whose
//          TTL is leaseDurationSeconds;
//   term   the key's create_revision (strictly increasing in the cluster),
//          reported as spec.leaseTransitions; resource_version is mod_revision;
//   GET    /v3/kv/range; no key: not_found;
//   create /v3/lease/grant + /v3/kv/txn (create_revision == 0, then put with
//          the lease); key present: already_exists;
//   update a renew (same holder and term): /v3/kv/range (the key still has
//          this create_revision) + /v3/lease/keepalive (TTL > 0), else
//          not_found / conflict; a release (holder ""): /v3/lease/revoke of
//          the key's lease; a new term on a record naming the same holder
//          (the elector re-taking its own ended term): delete (if
//          mod_revision unchanged) + create; anything else: conflict.
//   events are not stored (post_event answers true).
// Expiry is judged by etcd (lease TTL), so electors on this backend run
// with backend_traits{.server_expiry = true} (docs/safety.md).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"
#include "transport/kube_client.hpp"

namespace leasehold {

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

  /// <prefix>/<namespace>/<name>
  std::string key_of(const lease_key& k) const;
  /// The endpoint the next call goes to.
  const std::string& current_endpoint() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace leasehold
