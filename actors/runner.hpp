// The runner: the supervisor and only owner of state. See docs/safety.md.
//
//   idle ──(a leader-only module enabled)──▶ follower ──acquired──▶ leader
//     ▲                                        ▲                      │ lost / elector down /
//     └──(none enabled: release, stop)─────────┤                      │ crash loop / shutdown
//                                              └── respawn (backoff) ◀┴── stepping_down
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/module_registry.hpp"
#include "actors/observer.hpp"
#include "actors/timings.hpp"
#include "transport/lease_transport.hpp"

namespace leasehold {

/// Restart policy of the module supervisor (one_for_one).
struct supervision_policy {
  int intensity = 3;                                      // more than this many restarts...
  caf::timespan period = std::chrono::seconds(30);        // ...within this window: give up
  caf::timespan restart_backoff_min = std::chrono::milliseconds(500);
  caf::timespan restart_backoff_max = std::chrono::seconds(10);
};

struct runner_options {
  std::string identity;                 // this replica (POD_NAME)
  lease_key lease;
  election_timings timings;
  supervision_policy supervision;
  lease_transport_actor transport;
  backend_traits backend;               // the transport's store (etcd: server_expiry)
  std::shared_ptr<const module_registry> registry;
  module_config modules;                // initial config (validated by spawn_runner)
  event_sink events;                    // optional; thread-safe, non-blocking
  std::uint64_t seed = 0;               // jitter RNG seed (0: random)
  /// Followers watch the lease (see elector_options::watch); false: poll only.
  bool watch = true;
  /// Called when a leader-only module was killed and is still not down
  /// shortly before another replica could take the lease: the process must
  /// end now (the OS then stops every thread). Default: default_fatal_handler.
  /// An embedding program may replace it (it must not return normally while
  /// the module still runs, or safety is lost).
  std::function<void(const std::string& reason)> on_fatal;
};

/// Writes "leasehold: fatal: REASON" to stderr and ends the process at once
/// (std::_Exit(70)), as controller-runtime does when it loses leadership.
void default_fatal_handler(const std::string& reason);

enum class runner_state { idle, follower, leader, stepping_down, stopped };
const char* to_string(runner_state s);

enum class module_state { stopped, running, stopping, restarting, failed, disabled };
const char* to_string(module_state s);

struct module_status {
  std::string name;
  std::string type;
  bool leader_only = false;
  module_state state = module_state::stopped;
  int restarts = 0;        // total restarts since start
};

struct runner_status {
  runner_state state = runner_state::idle;
  std::string identity;
  lease_key lease;
  std::string holder;          // last known holder ("" unknown / released)
  std::int64_t term = -1;      // current term when leading, else last seen
  bool electing = false;       // an elector is alive (or a respawn is pending)
  bool healthy = true;         // false: an every-replica module failed, or the lease watchdog
  std::int64_t terms_won = 0;
  std::int64_t terms_lost = 0;
  /// Time since the last successful renew while leading (ms), -1 otherwise.
  std::int64_t ms_since_renew = -1;
  std::vector<module_status> modules;
  caf::actor elector;          // the current elector, if any (diagnostics, supervision tests)
};

/// Validates options (timings and modules: errors name the field) and spawns
/// the runner. Returns the errors instead of an actor when invalid.
struct spawn_result {
  caf::actor runner;
  std::vector<std::string> errors;
};
spawn_result spawn_runner(caf::actor_system& sys, runner_options opts);

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::runner_status)
