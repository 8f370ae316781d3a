// The runner: one per lease. It supervises the modules, runs one elector at
// a time, and is the only owner of the replica's state (docs/design.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/events.hpp"
#include "leasehold/lease_transport.hpp"
#include "leasehold/messages.hpp"
#include "leasehold/modules.hpp"
#include "leasehold/supervision.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

struct runner_options {
  std::string identity;                 // this replica (unique per process; POD_NAME)
  lease_key lease;
  election_timings timings;
  supervision_policy supervision;
  /// The lease store: a transport and its traits, made together
  /// (spawn_http_backend, spawn_etcd_backend in transports.hpp; use_etcd).
  lease_backend backend;
  std::shared_ptr<const module_registry> registry;
  module_config modules;                // initial config (validated by spawn_runner)
  /// Where the runtime reports what happens (thread-safe, non-blocking).
  /// Unset: default_event_sink() (plain lines on stderr); to say nothing,
  /// set a sink that ignores its events.
  event_sink events;
  std::uint64_t seed = 0;               // jitter RNG seed (0: random)
  /// Followers watch the lease (a release is acted on when streamed; no
  /// requests between changes); false: poll every retry_period.
  bool watch = true;
  /// false: a standby that follows the lease but never acquires it.
  /// Changed at run time with compete_atom.
  bool compete = true;
  /// Called when a killed leader-only module is still not down shortly
  /// before another replica could take the lease. A replacement must not
  /// return while the module runs. Default: default_fatal_handler.
  std::function<void(const std::string& reason)> on_fatal;
};

/// Writes "leasehold: fatal: REASON" to stderr and ends the process at once
/// (std::_Exit(70)), as controller-runtime does when it loses leadership.
void default_fatal_handler(const std::string& reason);

/// Its legal transitions (any other is fatal): docs/design.md, 'The runner's
/// states'.
enum class runner_state { idle, follower, leader, stepping_down, stopped };
const char* to_string(runner_state s);

struct runner_status {
  runner_state state = runner_state::idle;
  std::string identity;
  lease_key lease;
  std::string holder;          // last known holder ("" unknown / released)
  /// Time since this replica last knew `holder` to be current, ms (-1:
  /// never). Older than lease_duration: `holder` may no longer hold it.
  std::int64_t holder_age_ms = -1;
  /// How long the lease API has been failing (every request since the first
  /// failure), ms; -1 while it answers. A lost race (409) is an answer.
  std::int64_t api_unreachable_ms = -1;
  std::string api_error;       // the failure that began it, in words
  bool api_answered = false;   // the API answered this runner's electors at least once
  std::int64_t term = -1;      // current term when leading or in a creation hold, else last seen
  /// The creation hold (docs/embedding.md): `term` starts with the first
  /// renew sent after this many ms (0: the next). -1: not in a hold.
  std::int64_t hold_ms = -1;
  bool electing = false;       // an elector is alive (or a respawn is pending)
  bool healthy = true;         // false: a module failed (over its restart intensity)
  std::int64_t terms_won = 0;
  std::int64_t terms_lost = 0;
  /// Time since the last successful renew while leading (ms), -1 otherwise.
  std::int64_t ms_since_renew = -1;
  /// A leader-only module crash-looped: leadership was handed over and this
  /// replica does not compete again for this long (< 0: not backing off).
  caf::timespan handover_backoff{-1};
  std::string handover_module;   // the module that crash-looped (while backing off)
  /// Competes for the lease (runner_options::compete, compete_atom); false:
  /// a standby that only follows it.
  bool competing = true;
  /// A voluntary handover (a yield, or a preferredHolder naming another
  /// replica) is under way, to `yield_to` ("" for anyone).
  bool yielding = false;
  std::string yield_to;
  /// Who a yield or a preferredHolder may name: the live replicas of the
  /// lease's group, or those announcing the lease; nullopt: no list (anyone).
  std::optional<std::vector<std::string>> candidates;
  std::vector<module_status> modules;
};


/// What a yield came to (docs/operations.md, "Handing leadership over").
enum class yield_status {
  handed_over,       // released; `successor` took the lease (the target, when one was named)
  not_leading,       // this replica does not lead (`successor`: the holder it knows, if any)
  already_yielding,  // a handover (a yield, or a preferredHolder) is under way
  unknown_target,    // the target is this replica, or not one of the candidates
                     // (candidates_atom: nothing moved), or it did not take the lease
                     // within preferred_holder_wait (then `successor` is who took it)
  release_failed,    // the term ended, or the runner shut down, before the release
  not_taken,         // released, but nobody took the lease within the yield window: this
                     // replica competes again
};
const char* to_string(yield_status s);

struct yield_result {
  yield_status status = yield_status::not_leading;
  std::string successor;   // the replica that took the lease, when one did
  std::string reason;      // in words, for people
};

/// What a program may send the runner (runner_actor, protocol.hpp) and its
/// answers: docs/embedding.md, 'A runner in five steps'.

/// Validates options (timings and modules: errors name the field) and spawns
/// the runner. Returns the errors instead of an actor when invalid.
struct spawn_result {
  runner_actor runner;
  std::vector<std::string> errors;
};
spawn_result spawn_runner(caf::actor_system& sys, runner_options opts);

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::runner_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::yield_result)
