// The elector: one actor per term. See docs/design.md and docs/safety.md.
//
// Acquire loop every retry_period (jitter up to +20 %), then a renew loop
// whose attempts are spaced from their *send* times. A renew that has not
// succeeded within renew_deadline (measured from the moment the last
// successful request was *sent*) ends the term: the elector sends
// leadership_lost to the runner and exits. It never loops after a lost term;
// the runner spawns a fresh one and hands it what this one knew about the
// lease (lease_memory). Every API call is a request with a timeout to the
// lease transport actor; the elector never blocks.
//
// Followers watch the lease (lease_watch_event from the transport): a release
// or delete is acted on when it is streamed, a released record is taken with
// one PUT on the streamed version, and between changes a follower wakes only
// when the lease could have expired. Without a working watch, it polls.
//
// Follower expiry is judged by the local clock since the record was last seen
// to change (client-go's observedTime), never by the record's renewTime. A
// lease the API does not have is treated as held by an unknown replica until
// it has been absent for a lease duration by our clock.
//
// Terms (fencing tokens) strictly increase: every acquisition writes
// leaseTransitions = max(record, every term seen) + 1, also when the record
// already names this replica (client-go bumps only on a holder change).
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/observer.hpp"
#include "actors/runner.hpp"
#include "leasehold/timings.hpp"
#include "leasehold/lease_transport.hpp"

namespace leasehold {

struct elector_options {
  std::string identity;
  lease_key lease;
  election_timings timings;
  lease_transport_actor transport;
  /// Receives leadership_acquired / lost, lease_renewed, lease_observed,
  /// leader_observed: typed, so every report the elector sends is checked
  /// against the runner's interface when compiled.
  runner_internal_actor runner;
  event_sink events;
  std::uint64_t seed = 1;
  lease_memory memory;  // what earlier electors of this replica saw
  /// Follow the lease through the transport's watch: a follower acts on a
  /// release or delete as soon as it is streamed, and between changes it
  /// sends nothing until the lease could expire. While the watch is down the
  /// elector polls every retry_period, as without it.
  bool watch = true;
  backend_traits backend;  // etcd: the store judges expiry (docs/safety.md)
  /// false: follow the lease (watch, observe, report the holder) but never
  /// acquire it; changed with `compete_atom, bool`. A term already held is
  /// the runner's to end.
  bool compete = true;
  /// Acquire nothing before this (a replica that yielded stays out; handover.hpp).
  caf::actor_clock::time_point compete_after{};
};

/// Spawns an elector (not linked, not monitored: the caller monitors it).
/// Messages it takes besides its timers: `release_atom, target` -> bool: stop
/// renewing and, if it holds the lease in the very term it acquired (same
/// holder, acquireTime and leaseTransitions), release it (holderIdentity "",
/// duration 1 s, preferredHolder `target` if not empty: handover_spec),
/// within timings.release_timeout; then exit. `compete_atom, bool`: whether
/// it may acquire (elector_options::compete).
caf::actor spawn_elector(caf::local_actor* parent, elector_options opts);

/// The record a replica writes when it acquires the lease: a new term, whose
/// number is larger than both the record's and every term seen before.
lease_spec acquired_spec(const lease_spec& old, const std::string& identity,
                         caf::timespan lease_duration, wall_time now, std::int64_t max_term_seen);

/// The record a leader writes on renew: same holder, acquireTime and term.
lease_spec renewed_spec(const lease_spec& held, caf::timespan lease_duration, wall_time now);

/// The same term: holder, acquireTime and leaseTransitions all equal.
bool same_term(const lease_spec& a, const lease_spec& b);

/// The record written on release: holder empty, duration 1 s (the API
/// rejects 0), transitions kept.
lease_spec released_spec(const lease_spec& held, wall_time now);

} // namespace leasehold
