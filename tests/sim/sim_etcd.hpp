// A simulated etcd (v3 semantics) behind the same simulated transport as the
// Kubernetes store (spawn_sim_transport: faults, two-leg latency, watch), so
// the simulator runs the same seeds on both backends.
// The rest of its rules: the comment on sim_etcd below.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/sim_transport.hpp"
#include "transport/etcd/etcd_ttl_readings.hpp"

namespace leasehold {

/// It keeps what etcd keeps, and answers the transport interface exactly as
/// transport/etcd/etcd_transport.hpp maps it:
///   - one global revision; every put and delete takes the next one; a key
///     has a create_revision (the term: spec.leaseTransitions) and a
///     mod_revision (resource_version); the value holds holderIdentity,
///     leaseDurationSeconds, acquireTime, preferredHolder and strategy;
///   - leases with a TTL of whole seconds, judged by the store's own clock: a
///     lease whose TTL passes without a keepalive is revoked and its key
///     deleted (server-side expiry);
///   - GET: range, with the key's lease's remaining TTL (timetolive, whole
///     seconds, truncated; no key: not_found), or, as the transport does, a
///     reading of that etcd lease the same client took before and that still
///     serves (transport/etcd/etcd_ttl_readings.hpp), with its age; POST: grant + txn
///     create_revision == 0 (key present: already_exists); PUT: a release
///     (holder "") puts the released record on the key (same lease, which
///     is not revoked: the key goes with its TTL unless taken first), if the
///     term matches; a renew (same holder and
///     term) is a keepalive (an expired lease: not_found); a new term on a
///     released key or one naming the same holder deletes the key (if
///     mod_revision matches) and creates it anew; anything else: conflict.
///     Events are not stored.
///   - one session lease per client (transport) and TTL, as the transport
///     keeps (transport/etcd/etcd_session.hpp): a create keeps the client's session
///     lease alive (granted anew when it is gone) and binds the key to it, so
///     a keepalive (a renew, a release) renews every key of that client and a
///     renew rides on one sent up to lease::renew_max_age before it (its
///     reply says how long before: lease::renewed_age), and a
///     revoke or an expiry deletes all of them; a key no request of its
///     client asked about for a TTL is deleted if still bound to that lease,
///     with the client's next keepalive of it (the transport's reaper: never
///     for a dead client); nothing revokes a session lease but an operator;
///   - outside writes (an operator): delete_key, revoke_lease_of (the key's
///     lease: its replica's session lease, so every key of that replica).
/// Each transport call is one atomic step here (the real client makes two or
/// three HTTP calls; etcd itself makes the decisive one, the txn or the
/// keepalive, atomic), but for a renew: its range and its keepalive are two
/// steps, between which the reaper may write the key (update_begin).
class sim_etcd : public sim_store {
public:
  using time_point = caf::actor_clock::time_point;

  /// `now` is the store's clock (TTLs run out by it).
  explicit sim_etcd(std::function<time_point()> now, std::string prefix = "/leasehold");

  /// Revokes every lease whose TTL has run out by now, deleting its keys
  /// (pokes the watchers); true when a key was deleted.
  bool expire_due();
  /// When the next lease runs out (nullopt: no lease granted).
  std::optional<time_point> next_expiry() const;
  /// A raft leader change: the new leader gives every lease its full TTL
  /// again (etcd's lessor promote), which only delays followers.
  void leader_change();
  std::int64_t revision() const;
  std::string key_of(const lease_key& k) const { return prefix_ + "/" + k.ns + "/" + k.name; }

  std::optional<lease> peek(const lease_key& k) const override;
  lease_reply get(const std::string& client, const lease_key& k) override;
  lease_reply create(const std::string& client, lease l) override;
  lease_reply update(const std::string& client, lease l) override;
  /// A renew is two steps, as the transport makes it: its range when it
  /// arrives, its keepalive a leg later, so the reaper (another key's
  /// keepalive) can write the key in between. The second step refuses a
  /// renew that read the key before the reaper wrote it, as
  /// etcd_session::renewing does.
  std::function<lease_reply()> update_begin(const std::string& client, const lease& l) override;
  std::string path_of(const std::string& verb, const lease_key& k) const override;
  void outside_delete(const lease_key& k) override;   // etcdctl del
  void outside_revoke(const lease_key& k) override;   // etcdctl lease revoke
  /// A follower carrying a yield to the holder (leasehold yield): the
  /// key's record with preferredHolder `to`, put keeping its etcd lease.
  void outside_prefer(const lease_key& k, const std::string& to);
  /// The keys bound to the same etcd lease as `k` now (`k` too; none when
  /// `k` has no key): what revoking its lease deletes.
  std::vector<lease_key> keys_sharing_lease(const lease_key& k) const;
  /// A compacted watch re-reads its keys: one gone since is reported deleted.
  bool relist_tells_deleted() const override { return true; }
  bool server_expiry() const override { return true; }
  etcd_ttl_status ttl_status(const std::string& client,
                                        const std::string& lease_id) const override;
  std::function<void()> ttl_read_begins(const std::string& client,
                                        const std::string& lease_id) override;

private:
  struct kv {
    lease_spec value;   // holderIdentity, leaseDurationSeconds, acquireTime, preferredHolder, strategy
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t lease_id = 0;
  };
  struct grant {
    std::int64_t ttl_seconds = 1;
    time_point expires{};
    time_point kept_at{};   // its latest keepalive
  };

  // All under mx_; `changed` is set when a key was put or deleted.
  bool expire_locked(bool& changed);
  lease to_lease(const lease_key& k, const kv& v) const;
  lease_reply create_locked(const std::string& client, const lease& l, bool& changed,
                            const char* verb);   // logged as `verb`
  void revoke_locked(std::int64_t id, bool& changed);
  void delete_locked(const lease_key& k, bool& changed);
  api_error error(error_kind kind, int status, const std::string& path,
                  std::string reason) const;
  api_error held_error(const std::string& path, const kv& v, error_kind kind) const;

  std::function<time_point()> now_;
  std::string prefix_;
  mutable std::mutex mx_;
  std::map<lease_key, kv> keys_;
  std::map<std::int64_t, grant> leases_;
  /// Each client's (transport's) TTL readings, as etcd_client shares them.
  std::map<std::string, ttl_readings<time_point>> readings_;
  /// Each client's session lease by TTL; when a request of the client last
  /// asked about each key (the reaper's books).
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> sessions_;
  struct ask {
    std::int64_t lease_id = 0;
    time_point at{};
    std::int64_t ttl_seconds = 1;
  };
  std::map<lease_key, ask> asked_;
  std::map<lease_key, std::int64_t> reaped_;   // the reaper's write of a key: its revision
  void asked_locked(const lease_key& k, std::int64_t lease_id, std::int64_t ttl_seconds);
  void keepalive_locked(std::int64_t lease_id, bool& changed);
  /// A renew's keepalive (etcd_session::renewed): the latest one if sent
  /// within `max_age`, else one now; how long ago it was sent.
  caf::timespan renewed_locked(std::int64_t lease_id, caf::timespan max_age, bool& changed);
  std::int64_t revision_ = 1;   // etcd starts at 1; the first write makes it 2
  std::int64_t next_lease_ = 1;
};

} // namespace leasehold
