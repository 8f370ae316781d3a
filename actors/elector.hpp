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
//
// Its state (elector_state, actors/elector_rules.hpp). Every transition:
//
//                    accepted in the creation hold
//                    (or answered past the renew deadline,
//                    or an acquisition whose answer was lost)
//     following ----------------------------------------> holding
//       |    ^---- another's term seen, identity conflict ----'  |
//       |                                                        |
//       | accepted: the term starts       a renew after the hold: |
//       '----------------------> leading <--------- it starts ----'
//                                 |    |
//                   release asked |    | renew deadline missed, record rewritten,
//                                 v    v deleted by the store, identity conflict
//                           releasing -----------------> ended
//                                 ^                        ^
//          a term won by the      |                        | nothing won, or won
//          request still out      |                        | in the creation hold
//     following, holding -----> closing -------------------'
//                   release asked
//
// following: no record of ours; acquires when the lease is free.
// holding:   it wrote a term (created the lease, a write answered late,
//            or one whose answer was lost and may stand)
//            and renews it, but the term has not started: no fence, no
//            leadership_acquired (docs/safety.md, the creation hold).
// leading:   the term started: fence valid, renewed every retry_period.
// closing:   release asked without a term: the request out is answered
//            first; a term it wins is released, otherwise the elector ends.
// releasing: release asked with a term: the release PUT (a reply still out
//            first), then it ends.
// ended:     it sent its last word (leadership_lost or the release answer).
// Beside the state, the request bookkeeping (a request out, a change
// streamed meanwhile) and the watch (up or down) are orthogonal to it.
// The steps of one attempt and its replies are numbered in actors/elector.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>

#include <caf/all.hpp>

#include "actors/elector_rules.hpp"
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
  /// Receives leadership_acquired / lost, lease_observed, leader_observed: typed, so every report the elector sends is checked
  /// against the runner's interface when compiled.
  runner_internal_actor runner;
  event_emitter emit;   // the runner's: stamps this replica's and lease's events, shared
  std::uint64_t seed = 1;
  lease_memory memory;  // what earlier electors of this replica saw
  /// The resourceVersion of the last record they saw (memory holds none:
  /// runner_view.hpp, seed_of): the watch tells this elector what changed
  /// since, as it would have told its predecessor ("" : all it knows).
  std::string seen_version;
  /// Where each accepted write of a term stores the fence's validity (actor
  /// clock ns), never voided: the runner reads its last renew from here,
  /// with no message per renew (a message each was CPU per lease). Null: not kept.
  std::shared_ptr<std::atomic<std::int64_t>> renewed_until;
  /// Follow the lease through the transport's watch: a follower acts on a
  /// release or delete as soon as it is streamed, and between changes it
  /// sends nothing until the lease could expire. While the watch is down the
  /// elector polls every retry_period, as without it.
  bool watch = true;
  /// How the store names requests (lease_backend::path_of): shared with
  /// the runner and every elector it starts.
  std::shared_ptr<const lease_backend> backend;
  /// What the store can say about this lease beyond its record
  /// (lease_evidence.hpp): the runner's, kept across its electors.
  std::shared_ptr<lease_evidence> evidence;
  /// false: follow the lease (watch, observe, report the holder) but never
  /// acquire it; changed with `compete_atom, bool`. A term already held is
  /// the runner's to end.
  bool compete = true;
  /// Acquire nothing before this (a replica that yielded stays out; handover.hpp).
  caf::actor_clock::time_point compete_after{};
  /// Called on a defect: an illegal state transition (the runner passes
  /// its own on_fatal). Empty: default_fatal_handler.
  std::function<void(const std::string& reason)> on_fatal;
};

/// Spawns an elector (not linked, not monitored: the caller monitors it),
/// returned as its typed interface, elector_handle (actors/messages.hpp).
/// Messages it takes besides its timers and its watch's events:
/// `release_atom, target` -> bool: stop renewing and, if it holds the
/// lease in the very term it acquired (same holder, acquireTime and
/// leaseTransitions), release it (holderIdentity "", duration 1 s,
/// preferredHolder `target` if not empty: handover_spec), within
/// timings.release_timeout; then exit. Answered false at once when the term
/// ends meanwhile or the record turns out not to be ours alone (an
/// identity conflict). `compete_atom, bool`: whether it may acquire
/// (elector_options::compete).
elector_handle spawn_elector(caf::local_actor* parent, elector_options opts);

} // namespace leasehold
