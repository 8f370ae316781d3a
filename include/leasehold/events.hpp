// What the runtime reports about itself: one event type, one sink, and one
// table of the words each event reads as. Sinks are called from actor
// threads: they must be thread-safe and must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>

#include "leasehold/api_result.hpp"

namespace leasehold {

enum class event_type {
  term_acquired,     // term, holder
  term_lost,         // term, reason
  lease_released,    // term
  leader_changed,    // holder (observed by a follower)
  elector_started,   // attempt (respawn count), delay
  api_error,         // error (logged once per change of kind by the elector)
  api_recovered,     // first success after errors
  renewed,           // detail: latency_ms (not logged; metrics)
  module_started,    // module, leader_only, term
  module_stopping,   // module, reason: exit message sent, kill at module_stop_timeout
  module_stopped,    // module, reason: it went down
  module_killed,     // module (did not stop within module_stop_timeout)
  module_crashed,    // module, reason
  module_restarting, // module, delay
  module_failed,     // module: over its restart intensity
  leadership_handed_over, // module, term, value: backoff ms before competing again
  config_applied,
  config_rejected,   // detail: errors
  state_changed,     // detail: new runner state
  module_output,     // module, detail: a line a module reports (ticker tick, exec output)
  module_unconfirmed,// module: killed but not down yet; the lease is neither renewed nor released
  fatal,             // reason: the runtime ends the process (a leader-only module outlives its kill)
  watch_changed,     // detail "up" or "down", reason: why it is down (the elector polls meanwhile)
  identity_conflict, // holder: another process writes this replica's identity (the term ends)
  outside_write,     // holder, term, reason: a holder's record vanished or was emptied by a write
                     // that is not its release; a follower waits out its validity
  creation_hold,     // term, value: ms until the term starts: this replica created the lease and
                     // holds it; its term starts a lease duration after the create (docs/safety.md)
  api_request_failed,// error: one failed lease API request (every one, lost races included;
                     // not logged: metrics). api_error is what the log says about them
  voluntary_handover,// holder: the target ("" anyone), term, reason: why (a yield, a
                     // preferredHolder), value: ms this replica stays out: leader-only modules
                     // are down and the lease was released for a successor
  group_config_differs, // holder: a member of this replica's balance group whose config lists
                     // other leases; reason: both lists. Each counts only members with its
                     // own list (docs/balance.md). Once per member and list
};

const char* to_string(event_type t);

struct runtime_event {
  event_type type = event_type::state_changed;
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
  std::string identity;
  std::string lease;        // ns/name
  /// term_acquired, creation_hold: the Lease object's metadata.uid as last
  /// read ("" when unknown, and on etcd). A Kubernetes Event names it:
  /// `kubectl describe lease` lists only the Events that carry it.
  std::string lease_uid;
  std::int64_t term = -1;
  std::string holder;
  std::string module;
  bool leader_only = false;
  std::string reason;       // what happened, in words
  std::string code;         // the raw exit code behind `reason` (CAF's rendering), if any
  std::string detail;
  api_error error;          // for api_error
  double value = 0;         // latency_ms, delay_ms, ...
  /// renewed / term_acquired: the fence's valid_until (actor clock ns; in a
  /// real process that is CLOCK_MONOTONIC, comparable across processes).
  std::int64_t valid_until_ns = 0;
};

using event_sink = std::function<void(const runtime_event&)>;

/// Fans one event out to several sinks.
event_sink fan_out(std::vector<event_sink> sinks);

/// A sink that writes one plain line per event a person would want to read
/// (leadership, module lifecycle, API errors, config) to `out` (default
/// stderr): what an embedded runtime says when the program gives it no sink.
event_sink default_event_sink(std::FILE* out = stderr);

// -- words, stamps and exits: one table for every sink that writes words --

/// How an event reads to a person, one table for every sink that writes
/// words so they cannot drift apart; `words_for` picks a type's row.
enum class event_severity { unlogged, debug, info, warning, error };

struct event_words {
  event_type type;
  const char* name;      // to_string(type): the journal's and the metrics' name ("" on a variant)
  const char* variant;   // "" for the type's own row
  const char* words;     // what happened: the JSON log's `msg`, the default sink's line
  event_severity severity;
  bool said_by_default;  // the default sink prints it (a person running an embedded runner wants it)
};

/// Every row: the type's own rows in the order of `event_type`, then the variants.
const std::vector<event_words>& event_words_table();

/// The row of `ev`: its variant's if the event is one, else its type's.
const event_words& words_for(const runtime_event& ev);

/// Stamps events of one replica and lease and hands them to a sink. Copies
/// share one sink and one pair of names (a runner, its module supervisor
/// and its electors: one copy per lease, not one per holder).
class event_emitter {
public:
  event_emitter() = default;
  event_emitter(event_sink sink, std::string identity, std::string lease)
    : s_(sink ? std::make_shared<const stamp>(stamp{std::move(sink), std::move(identity),
                                                    std::move(lease)})
              : nullptr) {}

  /// `fill(runtime_event&)` sets the fields of this event type.
  template <class F>
  void operator()(event_type t, F fill) const {
    if (!s_)
      return;
    runtime_event ev;
    ev.type = t;
    ev.identity = s_->identity;
    ev.lease = s_->lease;
    fill(ev);
    s_->sink(ev);
  }

  /// The sink it stamps events for (empty: none), for whoever reports on
  /// its own (a module's context): one copy of it per runner.
  const event_sink& sink() const {
    static const event_sink none;
    return s_ ? s_->sink : none;
  }

private:
  struct stamp {
    event_sink sink;
    std::string identity;
    std::string lease;
  };
  std::shared_ptr<const stamp> s_;
};

/// How an actor ended: `words` for a `reason` field (no CAF names), `code`
/// the raw CAF error as CAF renders it (its own field; "" when it ended as
/// asked, normally or on a shutdown request).
struct exit_description {
  std::string words;
  std::string code;
};
exit_description describe_exit(const caf::error& e, caf::actor_system& sys);

} // namespace leasehold
