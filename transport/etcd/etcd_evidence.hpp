// etcd's evidence about a key (include/leasehold/lease_evidence.hpp): the
// store ends a term itself (the key dies with its etcd lease), so a
// follower reads the remaining TTL of the holder's etcd lease to learn when
// the key could be in its last second, and judges a vanished key from those
// readings and the store's revisions: ran out (free a second after the
// first read of 0, its create checked against the key's history) or
// anything else (an operator's delete or revoke: its create holds a lease
// duration). docs/safety.md states each rule and its evidence.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "leasehold/lease_evidence.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

/// A transport's shared TTL readings of one etcd lease (etcd_ttl_readings.hpp):
/// the latest (how long ago its read was sent, the whole seconds it said)
/// and how long ago a follower's read of it was marked in flight.
struct etcd_ttl_status {
  struct reading {
    std::chrono::nanoseconds age{0};
    std::int64_t ttl_seconds = 0;
  };
  std::optional<reading> latest;
  std::optional<std::chrono::nanoseconds> read_begun;
};

/// What the followers of a transport share: its readings by etcd lease ID,
/// and the mark of a read in flight (held until the handle is released).
struct etcd_shared_readings {
  std::function<etcd_ttl_status(const std::string& etcd_lease_id)> status_of;
  std::function<std::shared_ptr<void>(const std::string& etcd_lease_id)> read_begins;
};

/// One follower's TTL readings of the key it follows: the latest read sent
/// at `read_at` said `left` whole seconds; `zero_since`: the reply time of
/// the first read in a row that said 0, at store revision `zero_revision`
/// (0: unknown). A failed read voids them; another record resets them.
struct etcd_key_readings {
  std::optional<caf::actor_clock::time_point> read_at;
  std::int64_t left = 0;
  std::optional<caf::actor_clock::time_point> zero_since;
  std::int64_t zero_revision = 0;
};

/// Whether the TTL readings can tell an expiry at all: only when a holder
/// whose lease shows under a second left (a read of 0) is past its renew
/// deadline, i.e. renew_deadline + request_timeout + 1 s <= ttl.
bool ttl_tells_expiry(const election_timings& t, caf::timespan ttl);

/// What a follower may do after a read sent at `seen_by` found the key it
/// last saw (`last`) gone.
struct vanish_verdict {
  caf::actor_clock::time_point create_at;   // no create before this
  bool hold = true;   // the created key starts its term only a lease duration after its create
  /// Ran out: the revision the key was last read present at; the create's
  /// history from there must show one vanish and nothing else (0: none).
  std::int64_t history_from = 0;
};

/// A released record whose removal is the very next write in the store
/// (`store_revision`, the revision of the read that found no key, is its
/// mod_revision + 1): another follower's take. Create at once, no hold.
/// Else it ran out (create at (first read of 0) + 1 s, no hold, the
/// create's history checked from the read of 0) only when: ttl_tells_expiry;
/// the watch has been up without a gap since the latest reading (`gapless`);
/// that reading was fresh (at most 100 ms + request_timeout before
/// `seen_by`), said 0 and came with a store revision. Anything else (a
/// delete or revoke by an operator, stale readings, polling, a pause) may
/// have cut a live term: create at once and hold it a lease duration.
vanish_verdict judge_vanished_key(const lease* last, const etcd_key_readings& r,
                                  caf::actor_clock::time_point seen_by, const election_timings& t,
                                  caf::timespan ttl, bool gapless, std::int64_t store_revision);

/// When a follower of a held key reads it next (when ttl_tells_expiry):
/// after a reading of n > 0 s, when n - 0.5 s have passed (the key's last
/// second, if no keepalive came); after a 0, every half request timeout
/// (100 ms to 1 s); never later than `otherwise`. After a reading of
/// n >= 2 s, `spread` in [0, 1) brings the read forward by
/// spread x min(1 s, (n - 0.5 s) / 4), so that the followers of one
/// holder's keys do not all read at once and share the first one's reading.
caf::timespan next_ttl_read(const etcd_key_readings& r, const election_timings& t,
                            caf::actor_clock::time_point now, caf::timespan otherwise,
                            double spread = 0);

/// One lease's evidence on etcd. `shared`: the transport's readings (none:
/// every follower reads for itself).
std::shared_ptr<lease_evidence> make_etcd_evidence(const election_timings& t, std::uint64_t seed,
                                                   std::shared_ptr<const etcd_shared_readings> shared);

} // namespace leasehold
