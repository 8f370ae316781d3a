// The runner's implementation, internal to actors/runner.cpp (the state
// machine) and actors/runner_handover.cpp (why a leader gives up a term it
// still holds).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/handover.hpp"
#include "actors/module_supervisor.hpp"
#include "leasehold/events.hpp"
#include "actors/rarely_set.hpp"
#include "actors/runner_view.hpp"
#include "actors/runner.hpp"
#include "actors/shared_behavior.hpp"
#include "lease/backoff.hpp"

namespace leasehold {

class runner_impl : public with_shared_behavior<runner_impl, runner_internal_actor::base> {
public:
  runner_impl(caf::actor_config& cfg, runner_options opts);

  const char* name() const override { return "leasehold.runner"; }

  behavior_type make_behavior() override;

  void on_exit() override {
    // Whatever way the runner ends, nothing it supervised outlives it.
    modules_.kill_all();
    if (elector_)
      anon_send_exit(elector_, caf::exit_reason::kill);
    if (rare_)
      rare_->subscribers.clear();   // a subscriber holding this runner would keep both alive
  }

private:
  using time_point = caf::actor_clock::time_point;

  /// Why a runner told to stand by (compete_atom) hands its term over.
  static constexpr const char* standing_by = "standing by: the lease is assigned to another replica";
  /// Why a runner that stands by reports its own name as the holder.
  static constexpr const char* not_led
    = "the record names this replica, which does not lead it (a term that ended)";

  // -- the messages (runner.cpp) ----------------------------------------------
  void from_elector(leadership_acquired& a);   // each: ignored unless from the current elector
  void from_elector(leadership_lost& l);
  void from_elector(leader_observed& o);
  void observed(lease_observed& o);
  void on_respawn(std::uint64_t seq);
  config_result configure(module_config& cfg);
  void subscribe(caf::actor& who);
  void unsubscribe(caf::actor& who);
  caf::typed_response_promise<yield_result> on_yield(std::string& target);
  void on_yield_timeout(std::uint64_t seq);
  caf::typed_response_promise<bool> on_shutdown();

  // -- configuration (runner.cpp) ---------------------------------------------
  void apply(const module_config& cfg);
  bool should_elect() const { return !shutting_down() && modules_.any_leader_only_enabled(); }
  bool shutting_down() const { return shutdown_ != shutdown_phase::none; }

  // -- election (runner.cpp) ----------------------------------------------------
  void start_elector();
  void remember(const lease_memory& m);
  void note_hold(const lease_memory& m);
  void on_acquired(fencing_token fence);
  void elector_gone(const std::string& reason, const std::string& code = {});
  void schedule_respawn();
  void stop_electing();
  elector_handle detach_elector();
  void release_elector(std::function<void(bool released)> then, const std::string& target = {});
  void on_down(const caf::down_msg& dm);

  // -- stepping down (runner.cpp) -----------------------------------------------
  void begin_stepdown(const std::string& reason);
  void check_stepdown_done();
  void settle();
  void on_module_stopped();

  // -- giving a held term up (runner_handover.cpp) -------------------------------
  void on_kill_unconfirmed(const std::string& module);
  void on_fatal_check(int phase);
  void set_competing(bool on);
  void set_candidates(std::vector<std::string>& candidates);
  void on_leader_only_failed(const std::string& name);
  void begin_yield(std::string target, std::string why, std::optional<caf::response_promise> rp);
  /// A preferredHolder naming `to` ("": none) on our record: yield to it.
  void note_preference(const std::string& to);
  void yield_released(bool released);

  // -- shutdown (runner.cpp) ----------------------------------------------------
  void begin_shutdown();
  void finish_shutdown();

  // -- reporting (runner.cpp) ---------------------------------------------------
  void set_state(runner_state s);
  leadership_changed current_leadership() const {
    return leadership_changed{state_ == runner_state::leader, holder_, term_, {}, {}};
  }
  void notify(const leadership_changed& lc);
  std::int64_t renewed_until() const { return renewed_until_ ? renewed_until_->load() : 0; }
  /// When the last renew was sent (its validity less renew_deadline).
  time_point last_renew() const {
    return time_point{caf::timespan{renewed_until()}} - opt_.timings.renew_deadline;
  }
  runner_status make_status();

  runner_options opt_;
  std::shared_ptr<const lease_backend> backend_;   // opt_.backend, shared with the electors
  std::shared_ptr<lease_evidence> evidence_;        // this lease's, kept across its electors
  std::minstd_rand rng_;                    // jitter draws: 8 bytes (a mt19937_64 is 2.5 KB per lease)
  backoff backoff_;
  backoff handover_backoff_;                // after handing over for a crash-looping module
  std::optional<time_point> compete_after_; // no elector before this (handover backoff)
  bool module_failed_this_term_ = false;
  time_point yield_out_until_{};            // after a yield: no acquisition before this
  event_emitter emit;
  module_supervisor modules_;
  runner_state state_ = runner_state::idle;
  elector_handle elector_;
  std::uint64_t respawn_seq_ = 0;
  std::int64_t electors_started_ = 0;
  std::optional<fencing_token> fence_;
  std::string holder_;
  std::int64_t term_ = -1;
  time_point term_started_{};
  std::int64_t terms_won_ = 0;
  std::int64_t terms_lost_ = 0;
  /// Shutdown runs in two phases: leader-only modules down and the lease
  /// released, then the other modules down.
  enum class shutdown_phase { none, leader_only, the_rest } shutdown_ = shutdown_phase::none;
  int releases_ = 0;                        // release requests to old electors in flight
  lease_recall memory_;                     // what electors saw: for the next one, for the views
  time_point api_failing_since_{};          // when memory_.api_error_outstanding began
  time_point hold_confirmed_at_{};          // the current creation hold's last answer
  std::int64_t announced_hold_ = -1;        // the creation hold last announced (its term)
  /// The current elector's last renew: the fence's validity it reached
  /// (actor clock ns, never voided; 0: none), stored by the elector with no
  /// message per renew (elector_options::renewed_until).
  std::shared_ptr<std::atomic<std::int64_t>> renewed_until_;
  /// What most runners never set (actors/rarely_set.hpp).
  struct rare_state {
    yield_handover yield;                   // a voluntary handover under way
    std::string handover_module;            // the crash-looping module last handed over for
    std::vector<caf::actor> subscribers;
    std::vector<caf::typed_response_promise<bool>> shutdown_rps;
    /// Who a yield or a preferredHolder may name (candidates_atom: the
    /// live members of the lease's group or candidate set); nullopt: anyone.
    std::optional<std::vector<std::string>> candidates;
  };
  rarely_set<rare_state> rare_;
};

} // namespace leasehold
