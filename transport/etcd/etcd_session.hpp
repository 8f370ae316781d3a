// etcd: the session lease of a transport, shared by its workers (as etcd's
// concurrency.Session), so one keepalive renews every key of the transport.
// Its rules: docs/safety.md, "One etcd lease per process".
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
#include "leasehold/lease_transport.hpp"

namespace leasehold {

/// What keeps it safe, the reaper included: docs/safety.md, "One etcd
/// lease per process".
class etcd_session {
public:
  using clock = std::chrono::steady_clock;
  /// One gateway call on the caller's connection (etcd_connection::call).
  using call_fn = std::function<api_result<nlohmann::json>(const std::string& path,
                                                           const nlohmann::json& body)>;

  /// The ID of the session lease for keys of TTL `ttl_seconds`, kept alive
  /// after this call began (granted when there is none, or it is gone).
  api_result<std::string> lease_for(std::int64_t ttl_seconds, const call_fn& call);

  /// What a keepalive answered: the TTL etcd reported (0: the lease is
  /// gone) and when it was sent.
  struct kept_alive {
    std::int64_t ttl_seconds = 0;
    clock::time_point sent{};
  };

  /// A keepalive of etcd lease `id` sent at or after this call, shared by
  /// every caller that asked before it was sent; its sender reaps.
  api_result<kept_alive> keep_alive(const std::string& id, const call_fn& call);

  /// A renew's keepalive: the latest that said `id` lives if it serves
  /// `began` (keepalive_serves_renew), else a new one (keep_alive).
  api_result<kept_alive> renewed(const std::string& id, std::chrono::nanoseconds max_age,
                                 clock::time_point began, const call_fn& call);

  /// A create of `key` (base64) bound to etcd lease `id` asks now.
  void asked(const std::string& key, const std::string& id, std::int64_t ttl_seconds);

  /// A renew or release of `key` that read it at `read_revision` asks now,
  /// as `asked`. False when the reaper wrote (or may be writing) the key
  /// after that read: the request then answers a conflict.
  bool renewing(const std::string& key, const std::string& id, std::int64_t ttl_seconds,
                std::int64_t read_revision);

  /// A txn of this transport wrote `keys` (base64) at `revision`, which
  /// nothing else wrote. Kept for the latest own_revisions_kept, as hashes
  /// (8 bytes a key: a batch of creates keeps 10,000 of them).
  void wrote(std::int64_t revision, const std::vector<std::string>& keys);
  /// Whether a kept txn of this transport at `revision` wrote keys other
  /// than `key` (a hash match counts as written): a create's history check
  /// need not read `key` there.
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
    /// Its etcd lease's ID, shared in lease_ids_, not one string per key.
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
  void own_revisions_locked(std::int64_t revision, const std::vector<std::string>& keys);
  /// Under mx_: `key` leaves the books (gone from the lease, or deleted).
  void forget_locked(const std::string& key);
  /// Under mx_: `key` bound to `id`, asked now (a known key keeps its entry).
  void bind_locked(const std::string& key, const std::string& id, std::int64_t ttl);
  void erase_locked(std::map<std::string, bound_key>::iterator it);
  /// Under mx_: one key less names etcd lease `id` (forgotten at none).
  void drop_id_locked(const std::string& id);
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
