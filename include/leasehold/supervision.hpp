// Module supervision as an embedding program configures and observes it
// (docs/design.md, 'Supervision').
#pragma once

#include <chrono>
#include <string>

#include <caf/timespan.hpp>

namespace leasehold {

/// Restart policy of the module supervisor (one_for_one, as OTP's).
struct supervision_policy {
  /// The restart intensity of a module that sets no restart_policy: more
  /// than `intensity` restarts within `period` and it is not restarted again
  /// (`failed`). Defaults 3 in 30 s.
  int intensity = 3;
  caf::timespan period = std::chrono::seconds(30);
  /// Delay before each restart: capped exponential from min to max, reset
  /// when the module's restart window empties. Defaults 0.5 s, 10 s.
  caf::timespan restart_backoff_min = std::chrono::milliseconds(500);
  caf::timespan restart_backoff_max = std::chrono::seconds(10);
  // What happens after a leader-only module exceeds its intensity (hand
  // leadership over, wait): election_timings' handover_backoff_min/max.
};

enum class module_state {
  stopped,     // not running (not wanted now: e.g. leader-only on a follower)
  running,
  stopping,    // asked to stop; killed at module_stop_timeout
  restarting,  // crashed; restarts after `restart_in`
  failed,      // over its restart intensity: not restarted
  disabled,    // `enabled: false` in the config
};
const char* to_string(module_state s);

struct module_status {
  std::string name;
  std::string type;
  bool leader_only = false;
  module_state state = module_state::stopped;
  int restarts = 0;                    // total restarts since start
  int restarts_in_window = 0;          // restarts within `within` now
  int max_restarts = 0;                // its restart_policy
  caf::timespan within{0};
  caf::timespan restart_in{-1};        // state restarting: time to the restart, else < 0
};

} // namespace leasehold
