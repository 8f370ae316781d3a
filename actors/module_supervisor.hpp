// The module supervisor: one_for_one supervision of module actors, owned and
// driven by the runner (it runs inside the runner actor, on its thread). Its
// rules, as OTP's supervisor: docs/design.md, 'Supervision'.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/events.hpp"
#include "actors/runner.hpp"
#include "leasehold/modules.hpp"
#include "leasehold/supervision.hpp"
#include "lease/backoff.hpp"

namespace leasehold {

/// OTP supervisor's add_restart: notes a restart at `now` in `times`,
/// forgetting those older than `p.within`; false when this restart is more
/// than `p.max_restarts` within the window (the supervisor gives up).
bool add_restart(std::vector<caf::actor_clock::time_point>& times,
                 caf::actor_clock::time_point now, const restart_policy& p);

/// What the supervisor needs to know: whose modules (identity, lease), built
/// how (registry), stopped how (timings.module_stop_timeout, supervision):
/// read from its runner's options, which outlive it (one copy per lease).
class module_supervisor {
public:
  /// What the supervisor tells its runner.
  struct hooks {
    std::function<void()> stopped;                             // a stopped module went down
    std::function<void(const std::string& module)> leader_only_failed;   // over intensity
    /// A leader-only module was killed at module_stop_timeout and has not
    /// gone down (a detached actor blocked in a handler is still running).
    std::function<void(const std::string& module)> kill_unconfirmed;
  };

  module_supervisor(runner_internal_actor::pointer self, const runner_options& opt,
                    event_emitter emit, hooks h);

  /// Takes a new (validated) configuration: stops removed, disabled or
  /// re-typed modules, sends changed settings to running ones. Starts nothing.
  void configure(const module_config& cfg);
  /// Whether `cfg` is the configuration it runs, module by module in order
  /// (the runner keeps no copy of its own: it would be one per lease).
  bool configured_as(const module_config& cfg) const;
  /// Some leader-only module is enabled: the replica has to be elected.
  bool any_leader_only_enabled() const;

  /// Starts every enabled module that should run and does not: every-replica
  /// modules always, leader-only ones only with a fence (while leading).
  void start_wanted(const std::optional<fencing_token>& fence);

  /// A new term: every leader-only module gets a fresh restart window (and
  /// restart delay); one that failed last term may run again.
  void forgive_leader_only();

  void stop_leader_only(const std::string& reason);
  void stop_all(const std::string& reason);

  /// Leader-only modules asked to stop (or killed) whose down message has
  /// not arrived: until it has, they may still be doing leader-only work.
  bool stopping_leader_only() const;
  /// Leader-only modules killed whose down message has not arrived.
  std::vector<std::string> unconfirmed_kills() const;
  bool stopping_any() const { return !stopping_.empty(); }

  /// A down message: false when it is not from a module (elector, subscriber).
  bool on_down(const caf::down_msg& dm);
  /// stop_timeout_atom: kills the module if it is still up; it stays
  /// "stopping" until its down message arrives.
  void on_stop_timeout(std::uint64_t id);
  /// restart_atom: respawns the module if still wanted.
  void on_restart(const std::string& name, std::uint64_t generation,
                  const std::optional<fencing_token>& fence);

  std::vector<module_status> status() const;
  bool healthy() const;
  /// The runner ends: nothing it supervised outlives it.
  void kill_all();

private:
  struct slot {
    explicit slot(const supervision_policy& p)
      : delays(p.restart_backoff_min, p.restart_backoff_max, 0.0) {}
    module_spec spec;
    caf::actor actor;                            // the running instance, if any
    module_state state = module_state::stopped;
    /// Within its policy's window; a vector allocates nothing until a restart.
    std::vector<caf::actor_clock::time_point> restart_times;
    backoff delays;                              // restart delay; reset when the window empties
    caf::actor_clock::time_point restart_at{};   // state restarting: when
    int restarts = 0;
    std::uint64_t generation = 0;                // bumps on spawn/stop: stale restarts are void
  };
  struct stopping_module {
    std::string name;
    bool leader_only = false;
    caf::actor actor;
    std::uint64_t id = 0;
    bool killed = false;
  };

  slot* find(const std::string& name);
  restart_policy policy(const slot& s) const;
  bool may_run(const slot& s, const std::optional<fencing_token>& fence) const;
  void spawn(slot& s, const std::optional<fencing_token>& fence);
  void stop(slot& s, const std::string& reason);
  /// `reason` in words; `code` the raw exit code, if any.
  void crashed(slot& s, const std::string& reason, const std::string& code = {});

  runner_internal_actor::pointer self_;
  const runner_options& opt_;   // the runner's (identity, lease, registry, timings, supervision)
  event_emitter emit_;
  hooks hooks_;
  /// The modules in configuration (= start) order; a runner has a few, so
  /// looked up by name in a scan (a map and an order list kept each name
  /// three times per lease).
  std::vector<slot> slots_;
  std::vector<stopping_module> stopping_;
  std::uint64_t stop_ids_ = 0;
};

} // namespace leasehold
