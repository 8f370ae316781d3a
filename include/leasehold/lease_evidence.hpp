// What a store can say about a lease beyond its record (docs/design.md, 'The
// shape'). This base says nothing more than the record (Kubernetes); etcd's
// TTL and revision evidence: transport/etcd/etcd_evidence.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "leasehold/lease.hpp"

namespace leasehold {

class lease_evidence {
public:
  using time_point = caf::actor_clock::time_point;

  /// What the elector knows when it asks.
  struct view {
    const lease* record = nullptr;   // the last record seen (nullptr: none)
    time_point observed_at{};        // when it was seen to change (local clock)
    bool held_by_other = false;      // another's term, not expired by our clock
    bool stream_up = false;          // the watch streams the lease's changes
    time_point stream_up_since{};    // since when, without a gap
  };

  /// A follower's attempt that may need no request (answer_without_read).
  struct shortcut {
    enum class kind { read, confirmed, look_again } what = kind::read;
    time_point confirmed_at{};         // confirmed: the holder is known current from then
    caf::timespan after{};             // look_again: in this long
    std::shared_ptr<void> read_mark;   // read: held until the read's answer
  };

  virtual ~lease_evidence() = default;

  /// The store ends a term itself (a record vanishes when it runs out): a
  /// holder is never judged expired by a clock, a leader whose record is
  /// gone has lost its term.
  virtual bool store_ends_terms() const { return false; }
  /// Another record (or version), `rec`, was seen: what was known of the
  /// last is void.
  virtual void record_changed(const lease& /*rec*/) {}
  /// When the store last showed the holder of the record last seen alive
  /// without a change to that record (its session renewed); epoch: it does
  /// not tell. For views only: the runner asks it, from its own thread.
  virtual time_point holder_renewed_at() { return {}; }
  /// A read sent at `sent` found a record; `rec` is it unless the stream
  /// showed a later one meanwhile (nullptr).
  virtual void read_found(const lease* /*rec*/, time_point /*sent*/, time_point /*now*/) {}
  /// A read failed: what it would have refreshed may be stale.
  virtual void read_failed() {}
  /// How long a follower waiting on its stream sleeps, the record expiring
  /// by its clock at `expires_at`.
  virtual caf::timespan stream_wait(const view& /*v*/, time_point now, time_point expires_at) {
    return std::max(caf::timespan{0}, expires_at - now);
  }
  /// A follower's next wake, `d` as the elector would set it.
  virtual caf::timespan next_wake(const view& /*v*/, time_point /*now*/, caf::timespan d) {
    return d;
  }
  /// A held record just streamed is read at once (the stream carries only
  /// part of what the store knows of it).
  virtual bool read_streamed_record() const { return false; }
  /// A follower waiting on its stream may be answered without a request;
  /// `still_waits` says whether it still would after what was learnt.
  virtual shortcut answer_without_read(const view& /*v*/, time_point /*now*/,
                                       const std::function<bool()>& /*still_waits*/) {
    return {};
  }
  /// A read sent at `sent` (the store at `store_revision`) found no record
  /// where `v.record` was: true while no create may go out. `warning`:
  /// set once per vanish when it may have cut a live term.
  virtual bool wait_vanished(const view& v, time_point /*sent*/, std::int64_t /*store_revision*/,
                             time_point /*now*/, std::string& /*warning*/) {
    return v.held_by_other;   // its holder may put it back until it would expire
  }
  /// True: a create after a vanish is held (the creation hold); false: the
  /// store vouches that nothing ran meanwhile and `create` says what to check.
  virtual bool hold_create(const view& /*v*/, lease& /*create*/) { return true; }
  /// When `rec`, seen to change at `observed_at`, expires; `by_clock` is
  /// its own leaseDurationSeconds from then. A record bound to a session
  /// expires with its session (kube_session.hpp).
  virtual time_point expires_at(const lease& /*rec*/, time_point /*observed_at*/, time_point by_clock) {
    return by_clock;
  }
  /// `take` is about to replace `old` with a new term: what the store must
  /// do first (end the session `old` is bound to).
  virtual void before_take(const lease& /*old*/, lease& /*take*/) {}
  /// The creation hold counts from the create's answer (else its send).
  virtual bool hold_from_answer() const { return false; }
};

/// The base evidence, one instance for every lease (it keeps no state).
inline std::shared_ptr<lease_evidence> clock_evidence() {
  static const auto shared = std::make_shared<lease_evidence>();
  return shared;
}

} // namespace leasehold
