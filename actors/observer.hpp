// Reporting inside the runtime: the emitter that stamps runtime_events
// (include/leasehold/events.hpp) and the words for how an actor ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>

#include "leasehold/events.hpp"

namespace leasehold {

/// How an event reads to a person: one table for every sink that writes
/// words (the default sink here, the agent's JSON log), so that they cannot
/// drift apart. One row per event type, plus rows for a type's variants
/// (the same event meaning something else: a lost race, a watch that is
/// up, a child's own output); `words_for` picks the row.
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
