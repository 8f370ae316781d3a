// etcd: the session lease of a transport, shared by its workers (as etcd's
// own concurrency.Session): every key the transport creates with a TTL of n
// seconds is bound to ONE etcd lease of TTL n, granted on first need and
// granted anew when a keepalive says it is gone. So one keepalive renews
// every key of the transport, and a follower reads one TTL for all of them
// (etcd_ttl_readings.hpp).
// The rest of its rules: the comment on etcd_session below.
#pragma once

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "leasehold/api_result.hpp"

namespace leasehold {

/// The rule every renew of a session lease obeys (docs/safety.md, "One
/// etcd lease per process"): a keepalive that said the lease lives, sent at
/// `sent`, serves a renew that began at `began` when it was sent at most
/// `max_age` (lease::renew_max_age, > 0) before; otherwise the renew needs
/// a keepalive of its own. Written once for the transport (etcd_session)
/// and the simulated store (tests/sim/sim_etcd.cpp), whatever their clocks.
template <class TimePoint, class Duration>
constexpr bool keepalive_serves_renew(TimePoint sent, Duration max_age, TimePoint began) {
  return max_age > Duration{0} && sent + max_age >= began;
}

/// What keeps it safe (docs/safety.md, "One etcd lease per process"):
///   - a renew (or a create, or a release) is served only by a keepalive SENT
///     after the request asked for it: the keepalive of a lease that is in
///     flight when a request asks serves only the requests that asked before
///     it was sent; later ones wait for the next. So the TTL a renew relies on
///     runs from a moment no earlier than the renew's own start (the elector
///     counts its validity from that start);
///   - a create keeps the session lease alive before it binds the key to it,
///     so a new key has a whole TTL from its create, however long the lease
///     went without keepalives before;
///   - nothing revokes a session lease (a release puts the released record,
///     a new term deletes the old key only): its other keys live on;
///   - a key bound to it that no request of the transport asked about for a
///     whole TTL (its elector is gone: a create whose answer was lost, a
///     release that failed, a stopped runner) gets the released record, if
///     it is still bound to that lease at the revision the reaper read, from
///     the worker that sends the next keepalive: followers take it at once
///     (no term of this process is live on it: a term's renews ask). Still
///     untaken a TTL later, it is deleted: with per-key etcd leases such a
///     key went with its TTL, and a shared lease must not keep it forever.
///     A key leaves the books only once it is gone from the lease or its
///     delete succeeded: a failed keepalive, range or txn leaves it for the
///     next keepalive. A renew that read the key before the reaper wrote it
///     is refused (renewing), so the reaper's write and a renew never both win.
class etcd_session {
public:
  using clock = std::chrono::steady_clock;
  /// One gateway call on the caller's connection (etcd_connection::call).
  using call_fn = std::function<api_result<nlohmann::json>(const std::string& path,
                                                           const nlohmann::json& body)>;

  /// The session lease for keys of TTL `ttl_seconds`, kept alive by a
  /// keepalive sent after this call began (granted now when there is none
  /// or the keepalive says it is gone): its ID.
  api_result<std::string> lease_for(std::int64_t ttl_seconds, const call_fn& call);

  /// What a keepalive answered: the TTL etcd reported (0: the lease is
  /// gone) and when it was sent.
  struct kept_alive {
    std::int64_t ttl_seconds = 0;
    clock::time_point sent{};
  };

  /// A keepalive of etcd lease `id` sent at or after this call (one shared
  /// by every caller that asked before it was sent). The caller that sends
  /// it first reaps the keys that went a TTL unasked (see above).
  api_result<kept_alive> keep_alive(const std::string& id, const call_fn& call);

  /// A renew's keepalive of etcd lease `id` for a renew the transport
  /// began at `began`: the latest keepalive of it that said it lives, if it
  /// was sent at most `max_age` before `began` (lease::renew_max_age, set by
  /// the elector), else a new one (keep_alive). The renew is then as good as
  /// one sent when that keepalive was: the elector counts its validity from
  /// its own start minus (began - sent) (lease::renewed_age).
  api_result<kept_alive> renewed(const std::string& id, std::chrono::nanoseconds max_age,
                                 clock::time_point began, const call_fn& call);

  /// A create of `key` (base64, as the gateway takes it), bound to etcd
  /// lease `id` of TTL `ttl_seconds`, asks now: it lives at least a TTL
  /// from now without another.
  void asked(const std::string& key, const std::string& id, std::int64_t ttl_seconds);

  /// A renew or release of `key` that read it at `read_revision` (its
  /// mod_revision) asks now, as `asked`. False when the reaper wrote the
  /// key after that read, or may be writing it now: the request must not
  /// succeed on what it read (it answers a conflict, and its elector reads
  /// again).
  bool renewing(const std::string& key, const std::string& id, std::int64_t ttl_seconds,
                std::int64_t read_revision);

  /// A txn of this transport that wrote `keys` (base64: a create, a batch
  /// of creates, the delete of a take, a release) succeeded at store
  /// revision `revision`: nothing else was written at that revision (etcd
  /// gives each write txn its own). Kept for the latest own_revisions_kept,
  /// as the keys' hashes (8 bytes a key, not a ~100-byte string: a batch of
  /// creates keeps 10,000 of them).
  void wrote(std::int64_t revision, const std::vector<std::string>& keys);
  /// Whether revision `revision` was a txn of this transport that wrote a
  /// key other than `key` (as far as the kept ones tell): a create's
  /// history check of `key` need not read it at that revision
  /// (etcd_client: unwritten_between). A key whose hash equals one written
  /// at `revision` counts as written: the caller reads, as for a revision
  /// it does not know.
  bool wrote_other_at(std::int64_t revision, const std::string& key) const;
  static constexpr std::size_t own_revisions_kept = 8192;

private:
  struct sending {
    bool in_flight = false;
    std::uint64_t started = 0;   // keepalives sent
    std::uint64_t done = 0;      // of them, answered
    api_result<kept_alive> last;
    std::optional<kept_alive> alive;   // the latest-sent keepalive that said it lives
  };
  struct bound_key {
    /// Its etcd lease's ID, the key of lease_ids_ (a process's keys share
    /// one or two IDs: one 19-digit string each, not one per key).
    const std::string* lease_id = nullptr;
    clock::time_point asked;
    std::int64_t ttl_seconds = 1;
    /// The revision of the reaper's write of it (reaping: in flight, or
    /// its answer was lost); 0 when the reaper has not written it.
    std::int64_t reaped = 0;
  };
  static constexpr std::int64_t reaping = INT64_MAX;
  struct stale_key {
    std::string key;
    std::int64_t ttl_seconds = 1;
  };
  /// Under mx_: the keys of `id` unasked for a TTL (they stay on the books
  /// until reaped), from where the last look stopped.
  std::vector<stale_key> stale_keys_locked(const std::string& id, clock::time_point now);
  /// Under mx_: wrote(), for a caller that holds the lock.
  void own_revisions_locked(std::int64_t revision, const std::vector<std::string>& keys);
  /// Under mx_: `key` leaves the books (gone from the lease, or deleted).
  void forget_locked(const std::string& key);
  /// Under mx_: `key` bound to etcd lease `id`, asked now, TTL `ttl` (a key
  /// already on the books keeps its entry).
  void bind_locked(const std::string& key, const std::string& id, std::int64_t ttl);
  void erase_locked(std::map<std::string, bound_key>::iterator it);
  /// Under mx_: one key less names etcd lease `id` (forgotten at none).
  void drop_id_locked(const std::string& id);
  /// Released records on (or deletes of) `keys`: see the header comment.
  void reap(const std::string& id, const std::vector<stale_key>& keys, const call_fn& call);

  mutable std::mutex mx_;
  std::condition_variable answered_;
  std::mutex grant_mx_;   // one grant at a time
  std::map<std::int64_t, std::string> lease_of_ttl_;
  std::map<std::string, sending> sending_;
  std::map<std::string, bound_key> keys_;
  std::string reap_from_;   // where stale_keys_locked looks first
  std::map<std::string, std::size_t> lease_ids_;   // the IDs keys_ names -> how many keys name each
  std::map<std::int64_t, std::vector<std::size_t>> own_revisions_;   // revision -> its keys' hashes, sorted
};

/// One /v3/lease/keepalive of etcd lease `id`: the TTL etcd reported (0: gone).
api_result<std::int64_t> etcd_keepalive(const std::string& id, const etcd_session::call_fn& call);
/// One /v3/lease/grant of TTL `ttl_seconds`: the new etcd lease's ID.
api_result<std::string> etcd_grant(std::int64_t ttl_seconds, const etcd_session::call_fn& call);

} // namespace leasehold
