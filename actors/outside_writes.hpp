// Writes from outside the protocol: an operator (or a tool) deleting the
// Lease or the etcd key, revoking the key's etcd lease, or emptying
// holderIdentity. None of them stops the holder's leader-only work at once:
// the holder notices at its next renew (or on its watch) and then takes up
// to module_stop_timeout to stop. So a follower that sees the holder vanish
// or be emptied by anything but the holder's own release waits out the last
// holder's validity before it acquires. docs/safety.md ("Writes from outside
// the protocol") states the rule and its cost; these are its pure parts, the
// elector applies them.
#pragma once

#include <optional>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/lease.hpp"

namespace leasehold {

/// The record a holder writes when it releases (released_spec, and
/// client-go's release): holder "", leaseDurationSeconds 1 (or none). A
/// holder emptied with its duration kept was emptied by somebody else.
bool released_record(const lease_spec& s);

/// etcd: a follower saw the key of a holder's term vanish (watch DELETE or
/// a read's "no key"), judged with the send time `seen_by` of the read that
/// found it gone. It could have been the etcd lease expiring (the holder
/// stopped renewing a TTL ago) only if the latest successful read's TTL
/// said so: `seen_by >= ttl_until`. Anything else (a delete or revoke by an
/// operator, a release whose record we missed) may have cut a live term: no
/// acquisition before `seen_by + ttl` (the holder's lease could have been
/// renewed at the very instant of the delete). Returns when the follower
/// may acquire (seen_by itself when it may at once).
caf::actor_clock::time_point vanished_key_wait(const lease_memory& m,
                                               caf::actor_clock::time_point seen_by,
                                               caf::timespan ttl);

/// etcd: when a follower of a held key reads it next, so that a live
/// holder's TTL horizon (ttl_until) always lies beyond the next read: half
/// the remaining TTL after the read that reported it (at least 100 ms), and
/// never later than `otherwise` (the usual next read).
caf::timespan next_ttl_read(const lease_memory& m, caf::actor_clock::time_point now,
                            caf::timespan otherwise);

} // namespace leasehold
