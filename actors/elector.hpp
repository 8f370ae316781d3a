// The elector: one actor per term. See DESIGN.md "Shape".
//
// Acquire loop every retry_period (jitter up to +20 %), then a renew loop.
// A renew that has not succeeded within renew_deadline (measured from the
// moment the last successful request was *sent*) ends the term: the elector
// sends leadership_lost to the runner and exits. It never loops after a lost
// term; the runner spawns a fresh one. Every API call is a request with a
// timeout to the lease transport actor; the elector never blocks.
//
// Follower expiry is judged by the local clock since the record was last seen
// to change (client-go's observedTime), never by the record's renewTime.
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/observer.hpp"
#include "actors/timings.hpp"
#include "transport/lease_transport.hpp"

namespace leasehold {

struct elector_options {
  std::string identity;
  lease_key lease;
  election_timings timings;
  lease_transport_actor transport;
  caf::actor runner;            // receives leadership_acquired / lost / lease_renewed / leader_observed
  event_sink events;
  std::uint64_t seed = 1;
};

/// Spawns an elector (not linked, not monitored: the caller monitors it).
/// Messages it takes besides its timers: `release_atom` -> bool: stop renewing
/// and, if it holds the lease, release it (holderIdentity "", duration 1 s,
/// re-read and retry on 409 within timings.release_timeout), then exit.
caf::actor spawn_elector(caf::local_actor* parent, elector_options opts);
caf::actor spawn_elector(caf::actor_system& sys, elector_options opts);

/// The record a replica writes when it takes or renews `old` (client-go's
/// rules: acquireTime and leaseTransitions kept while the holder stays,
/// transitions + 1 when it changes).
lease_spec next_spec(const lease_spec& old, const std::string& identity,
                     caf::timespan lease_duration, wall_time now);

/// The record written on release: holder empty, duration 1 s (the API
/// rejects 0), transitions kept.
lease_spec released_spec(const lease_spec& held, wall_time now);

} // namespace leasehold
