// Writes from outside the protocol: an operator (or a tool) deleting the
// Lease or the etcd key, revoking the key's etcd lease, or emptying
// holderIdentity. None of them stops the holder's leader-only work at once:
// the holder notices at its next renew (or on its watch) and then takes up
// to module_stop_timeout to stop. So a follower that sees the holder vanish
// or be emptied by anything but the holder's own release waits out the last
// holder's validity before it acquires. docs/safety.md ("Writes from outside
// the protocol") states the rule, its proof and its cost; these are its pure
// parts, the elector applies them.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

/// The record a holder writes when it releases (released_spec, and
/// client-go's release): holder "", leaseDurationSeconds 1 (or none). A
/// holder emptied with its duration kept was emptied by somebody else.
bool released_record(const lease_spec& s);

/// etcd: whether the TTL readings can tell an expiry at all: only when a
/// holder whose lease shows under a second left (a read of 0) is past its
/// renew deadline, i.e. renew_deadline + request_timeout + 1 s <= ttl.
bool ttl_tells_expiry(const election_timings& t, caf::timespan ttl);

/// etcd: what a follower may do after a read sent at `seen_by` found the
/// key it last saw gone.
struct vanish_verdict {
  caf::actor_clock::time_point create_at;   // no create before this
  bool hold = true;   // the created key starts its term only a lease duration after its create
  /// Ran out: the revision the key was last read present at; the create's
  /// history from there must show one vanish and nothing else (0: none).
  std::int64_t history_from = 0;
};

/// A released record (released_record) whose removal is the very next write
/// in the store (`store_revision`, the revision of the read that found no
/// key, is the record's mod_revision + 1): the take of another follower,
/// which deletes the released record before it creates. No term can have
/// come and gone between (that takes writes of its own), and the holder's
/// work was down when it released: create at once, no hold.
/// Else it ran out (create at (first read of 0) + 1 s, no hold) only when all of
/// these hold: ttl_tells_expiry; the follower's watch has been up without a
/// gap since its latest TTL reading (`gapless`); that reading was fresh (at
/// most 100 ms + request_timeout before `seen_by`), said 0 s were left (so
/// the holder's last renew was sent before (first read of 0) + 1 s - TTL,
/// past its renew deadline) and came from a read whose store revision is
/// known (`history_from`). A stream can be up and seconds late, so the
/// create then asks the store for the key's history from that revision: it
/// must show the key present, gone once, then nothing (no term came and
/// went unseen); else the created key is held. Anything else (a delete or revoke by an operator,
/// stale readings, a polling follower, a pause) may have cut a live term,
/// possibly one this follower never saw: it creates at once and holds what
/// it creates for a lease duration from the create's answer, by when any
/// term whose key was gone before the create has stopped its work (its
/// last renew was sent before that answer).
vanish_verdict judge_vanished_key(const lease_memory& m, caf::actor_clock::time_point seen_by,
                                  const election_timings& t, caf::timespan ttl, bool gapless,
                                  std::int64_t store_revision);

/// etcd: when a follower of a held key reads it next (when ttl_tells_expiry):
/// after a reading of n > 0 s, when n - 0.5 s have passed (the key's last
/// second, if no keepalive came); after a 0, every half request timeout
/// (100 ms to 1 s); never later than `otherwise` (the usual next read).
/// After a reading of n >= 2 s, `spread` (in [0, 1), the follower's own
/// draw) brings the read forward by spread x min(1 s, (n - 0.5 s) / 4):
/// the followers of one holder's keys then do not all read at once; the
/// first reads (n drops by a second at most: it still reads the key's last
/// second, read by read) and the others take its reading, shared per etcd
/// lease (elector_actor::follow_shared_reading), without a request.
caf::timespan next_ttl_read(const lease_memory& m, const election_timings& t,
                            caf::actor_clock::time_point now, caf::timespan otherwise,
                            double spread = 0);

} // namespace leasehold
