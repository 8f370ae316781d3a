// etcd's evidence about a key: the store ends a term itself, so a follower
// reads the TTL of the holder's etcd lease and judges a vanished key from
// those readings and the store's revisions. Each rule and its evidence:
// docs/safety.md, "Which rules free a lease at once, and on what evidence?".
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

/// A transport's shared TTL readings of one etcd lease, as ages: the latest,
/// and a follower's read marked in flight.
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

/// One follower's TTL readings of its key; `zero_since`: the reply time of
/// the first read in a row that said 0. A failed read voids them.
struct etcd_key_readings {
  std::optional<caf::actor_clock::time_point> read_at;
  std::int64_t left = 0;
  std::optional<caf::actor_clock::time_point> zero_since;
  std::int64_t zero_revision = 0;
};

/// Whether the TTL readings can tell an expiry at all:
/// renew_deadline + request_timeout + 1 s <= ttl.
bool ttl_tells_expiry(const election_timings& t, caf::timespan ttl);

/// What a follower may do after a read sent at `seen_by` found the key it
/// last saw (`last`) gone.
struct vanish_verdict {
  caf::actor_clock::time_point create_at;   // no create before this
  bool hold = true;   // the created key starts its term only a lease duration after its create
  /// Ran out: the revision the create's history check starts at (0: none).
  std::int64_t history_from = 0;
};

/// Taken, ran out, or anything else: docs/safety.md, "Which rules free a
/// lease at once, and on what evidence?".
vanish_verdict judge_vanished_key(const lease* last, const etcd_key_readings& r,
                                  caf::actor_clock::time_point seen_by, const election_timings& t,
                                  caf::timespan ttl, bool gapless, std::int64_t store_revision);

/// When a follower of a held key reads it next, never later than
/// `otherwise`: docs/safety.md, "Reading the TTL in time".
caf::timespan next_ttl_read(const etcd_key_readings& r, const election_timings& t,
                            caf::actor_clock::time_point now, caf::timespan otherwise,
                            double spread = 0);

/// One lease's evidence on etcd. `shared`: the transport's readings (none:
/// every follower reads for itself).
std::shared_ptr<lease_evidence> make_etcd_evidence(const election_timings& t, std::uint64_t seed,
                                                   std::shared_ptr<const etcd_shared_readings> shared);

} // namespace leasehold
