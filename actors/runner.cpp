// The runner's diagram machinery: its behavior, configuration, electors,
// step-down, settle, shutdown and status (actors/runner_impl.hpp says how
// the runner is split; actors/runner_handover.cpp has the reasons a leader
// gives up a term it holds).
#include "actors/runner_impl.hpp"

#include <algorithm>
#include <utility>

#include "actors/elector.hpp"
#include "actors/runner_view.hpp"

namespace leasehold {

runner_impl::runner_impl(caf::actor_config& cfg, runner_options opts)
  : with_shared_behavior(cfg),
    opt_(std::move(opts)),
    rng_(opt_.seed != 0 ? opt_.seed : std::random_device{}()),
    backoff_(opt_.timings.backoff_min, opt_.timings.backoff_max, opt_.timings.backoff_jitter),
    handover_backoff_(opt_.timings.handover_backoff_min, opt_.timings.handover_backoff_max,
                      opt_.timings.backoff_jitter),
    emit(opt_.events, opt_.identity, opt_.lease.to_string()),
    modules_(this, opt_, emit,
             {[this] { on_module_stopped(); },
              [this](const std::string& name) { on_leader_only_failed(name); },
              [this](const std::string& name) { on_kill_unconfirmed(name); }}) {
  if (!opt_.on_fatal)
    opt_.on_fatal = default_fatal_handler;
  backend_ = std::make_shared<const lease_backend>(std::move(opt_.backend));   // one copy
  evidence_ = backend_->evidence ? backend_->evidence(opt_.timings, opt_.seed) : clock_evidence();
  opt_.events = nullptr;   // kept once, in emit (the supervisor's modules get it from there)
}

/// Every runner has the same behaviour, built once (actors/shared_behavior.hpp):
/// 17 handlers, ~0.7 KiB that each runner no longer allocates.
runner_impl::behavior_type runner_impl::make_behavior() {
  set_down_handler([=](caf::down_msg& dm) { on_down(dm); });
  apply(std::exchange(opt_.modules, {}));   // from here the supervisor holds the configuration alone
  static const behavior_type shared{
    [](leadership_acquired& a) { current().from_elector(a); },
    [](leadership_lost& l) { current().from_elector(l); },
    [](leader_observed& o) { current().from_elector(o); },
    [](lease_observed& o) { current().observed(o); },
    [](fatal_atom, int phase) { current().on_fatal_check(phase); },
    [](stop_timeout_atom, std::uint64_t id) { current().modules_.on_stop_timeout(id); },
    [](restart_atom, const std::string& name, std::uint64_t generation) {
      auto& r = current();
      r.modules_.on_restart(name, generation, r.fence_);
    },
    [](compete_atom, bool on) { current().set_competing(on); },
    [](candidates_atom, std::vector<std::string>& c) { current().set_candidates(c); },
    [](respawn_atom, std::uint64_t seq) { current().on_respawn(seq); },
    [](module_config& cfg) { return current().configure(cfg); },
    [](get_status_atom) { return current().make_status(); },
    [](get_elector_atom) { return current().elector_; },
    [](subscribe_atom, caf::actor& who) { current().subscribe(who); },
    [](unsubscribe_atom, caf::actor& who) { current().unsubscribe(who); },
    [](yield_atom, std::string& target) { return current().on_yield(target); },
    [](yield_timeout_atom, std::uint64_t seq) { current().on_yield_timeout(seq); },
    [](shutdown_atom) { return current().on_shutdown(); },
  };
  return shared;
}

// -- the messages -------------------------------------------------------------

void runner_impl::from_elector(leadership_acquired& a) {
  if (current_sender() == elector_.address())
    on_acquired(std::move(a.fence));
}

void runner_impl::from_elector(leadership_lost& l) {
  if (current_sender() == elector_.address())
    elector_gone(l.reason);
}

void runner_impl::from_elector(leader_observed& o) {
  if (current_sender() != elector_.address() || o.holder == holder_)
    return;
  holder_ = o.holder;
  if (rare_)
    rare_->yield.on_holder(o.holder, opt_.identity, clock().now(), opt_.timings);
  if (state_ == runner_state::leader)
    return;
  if (o.holder != opt_.identity) {
    term_ = o.term;
    notify(leadership_changed{false, holder_, term_, {}, o.holder.empty() ? o.preferred : ""});
  } else if (!opt_.compete) {
    // Our own name on a record while we stand by: the elector acquires
    // nothing, so this is a term that ended (ours, or a former process's
    // under our name) and we do not lead it. Say so: else a subscriber
    // keeps the last other holder it was told (a balance group then
    // leaves the lease to that replica, whose group leaves it to us).
    term_ = o.term;
    notify(leadership_changed{false, holder_, term_, not_led, {}});
  }
  // Competing, our own name shows up just before leadership_acquired (or a
  // creation hold's notice): announce that instead.
}

void runner_impl::observed(lease_observed& o) {
  remember(o.memory);
  note_hold(o.memory);
  note_preference(preferred_successor(o.memory, opt_.identity));
}

void runner_impl::on_respawn(std::uint64_t seq) {
  if (seq == respawn_seq_ && !elector_ && releases_ == 0 && should_elect())
    start_elector();
}

config_result runner_impl::configure(module_config& cfg) {
  auto errs = validate(cfg, *opt_.registry);
  if (!errs.empty()) {
    std::string all;
    for (auto& e : errs)
      all += (all.empty() ? "" : "; ") + e;
    emit(event_type::config_rejected, [&](runtime_event& ev) { ev.detail = all; });
    return config_result{false, std::move(errs)};
  }
  apply(cfg);
  return config_result{true, {}};
}

void runner_impl::subscribe(caf::actor& who) {
  if (!who)
    return;
  monitor(who);
  rare_.set().subscribers.push_back(who);
  caf::unsafe_send_as(this, who, current_leadership());   // untyped subscriber
}

void runner_impl::unsubscribe(caf::actor& who) {
  demonitor(who);
  if (rare_) {
    auto& subs = rare_->subscribers;
    subs.erase(std::remove(subs.begin(), subs.end(), who), subs.end());
  }
}

caf::typed_response_promise<yield_result> runner_impl::on_yield(std::string& target) {
  auto rp = make_response_promise<yield_result>();
  begin_yield(std::move(target), "yield requested", static_cast<caf::response_promise&>(rp));
  return rp;
}

void runner_impl::on_yield_timeout(std::uint64_t seq) {
  if (rare_)
    rare_->yield.on_timeout(seq);
}

caf::typed_response_promise<bool> runner_impl::on_shutdown() {
  auto rp = make_response_promise<bool>();
  rare_.set().shutdown_rps.push_back(rp);
  begin_shutdown();
  return rp;
}

void runner_impl::apply(const module_config& cfg) {
  bool was_backing_off = false;
  if (!modules_.configured_as(cfg)) {
    // An operator changed the modules (perhaps fixed the crashing one):
    // the handover backoff ends; compete again after the usual respawn delay.
    handover_backoff_.reset();
    was_backing_off = compete_after_ && *compete_after_ > clock().now();
    compete_after_.reset();
  }
  modules_.configure(cfg);
  emit(event_type::config_applied, [&](runtime_event& ev) {
    ev.detail = std::to_string(cfg.modules.size()) + " modules";
  });
  modules_.start_wanted(fence_);
  if (should_elect()) {
    // While an old elector still releases, nothing new may compete: it
    // could otherwise acquire before the release and lose what it won.
    if (state_ == runner_state::idle && !elector_ && releases_ == 0)
      start_elector();
    else if (was_backing_off && state_ == runner_state::follower && !elector_ && releases_ == 0)
      schedule_respawn();   // replaces the pending respawn at the handover's end
  } else {
    stop_electing();
  }
}

void runner_impl::start_elector() {
  elector_options eo;
  eo.identity = opt_.identity;
  eo.lease = opt_.lease;
  eo.timings = opt_.timings;
  eo.backend = backend_;
  eo.evidence = evidence_;
  eo.runner = caf::actor_cast<runner_internal_actor>(this);
  eo.emit = emit;
  eo.seed = rng_();
  eo.memory = seed_of(memory_, opt_.identity);
  eo.seen_version = memory_.version;
  renewed_until_ = std::make_shared<std::atomic<std::int64_t>>(0);
  eo.renewed_until = renewed_until_;
  eo.watch = opt_.watch;
  eo.compete = opt_.compete;
  eo.compete_after = yield_out_until_;
  eo.on_fatal = opt_.on_fatal;
  elector_ = spawn_elector(this, std::move(eo));
  monitor(elector_);
  ++electors_started_;
  set_state(runner_state::follower);
  emit(event_type::elector_started, [&](runtime_event& ev) {
    ev.value = static_cast<double>(electors_started_);
  });
}

void runner_impl::remember(const lease_memory& m) {
  if (merge_memory(memory_, m, opt_.identity))
    api_failing_since_ = clock().now();
}

/// The current elector holds a lease it created, its term not started: every
/// view names this replica and that term, and says so (docs/operations.md).
void runner_impl::note_hold(const lease_memory& m) {
  auto hold = creation_hold(m, opt_.identity, opt_.timings.lease_duration, clock().now());
  if (!hold || state_ == runner_state::leader || current_sender() != elector_.address())
    return;
  if (!m.api_error_outstanding)
    hold_confirmed_at_ = clock().now();
  if (std::exchange(announced_hold_, hold->term) == hold->term)
    return;
  term_ = hold->term;
  holder_ = opt_.identity;
  emit(event_type::creation_hold, [&](runtime_event& ev) {
    describe_hold(ev, *hold);
    ev.lease_uid = m.record ? m.record->uid : "";
  });
  notify(leadership_changed{false, holder_, term_, hold_words(*hold), {}});
}

void runner_impl::on_acquired(fencing_token fence) {
  fence_ = fence;
  term_ = fence.term;
  holder_ = opt_.identity;
  term_started_ = clock().now();
  module_failed_this_term_ = false;
  compete_after_.reset();
  ++terms_won_;
  if (rare_)   // took it back
    rare_->yield.on_holder(opt_.identity, opt_.identity, term_started_, opt_.timings);
  set_state(runner_state::leader);
  emit(event_type::term_acquired, [&](runtime_event& ev) {
    ev.term = term_;
    ev.holder = holder_;
    ev.lease_uid = memory_.uid;
    ev.valid_until_ns = fence.valid_until->load();
  });
  notify(current_leadership());
  note_preference(memory_.preferred_successor);   // written during a creation hold: yield before any start
  modules_.forgive_leader_only();   // a new term forgives last term's crash loops
  if (!opt_.compete)   // won a creation hold after being told to stand by
    begin_yield("", standing_by, std::nullopt);   // before any leader-only module starts
  modules_.start_wanted(fence_);   // nothing leader-only once stepping down
}

/// The elector ended (lost term, crash, kill): same thing for the runner.
/// `reason` in words; `code` the raw exit code of a crashed elector.
void runner_impl::elector_gone(const std::string& reason, const std::string& code) {
  detach_elector();
  if (state_ == runner_state::leader) {
    ++terms_lost_;
    emit(event_type::term_lost, [&](runtime_event& ev) {
      ev.term = term_;
      ev.reason = reason;
      ev.code = code;
    });
    if (clock().now() - term_started_ >= opt_.timings.lease_duration) {
      backoff_.reset();   // a stable term: the next respawn is quick again
      if (!module_failed_this_term_)
        handover_backoff_.reset();
    }
    begin_stepdown(reason);
  } else if (state_ == runner_state::follower) {
    schedule_respawn();
  }
  // stepping_down: the step-down continues; with no elector there is nothing to release.
}

void runner_impl::schedule_respawn() {
  ++respawn_seq_;
  if (!should_elect()) {
    set_state(runner_state::idle);
    return;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto delay = backoff_.next(u(rng_));
  if (compete_after_)   // handed over for a crash-looping module: wait longer
    delay = std::max(delay, *compete_after_ - clock().now());
  set_state(runner_state::follower);
  delayed_send(this, delay, respawn_atom::value, respawn_seq_);
}

/// No leader-only module is enabled (or shutdown): stop competing.
void runner_impl::stop_electing() {
  ++respawn_seq_;   // cancels a pending respawn
  if (state_ == runner_state::leader) {
    begin_stepdown(shutting_down() ? "shutdown" : "no leader-only module enabled");
  } else if (state_ == runner_state::stepping_down) {
    // The step-down ends in settle(), which no longer elects.
  } else if (elector_) {
    release_elector([=](bool) { settle(); });
  } else {
    settle();
  }
}

/// Takes the current elector out of the runner's care (no down message of
/// it is handled any more) and returns it.
elector_handle runner_impl::detach_elector() {
  auto e = elector_;
  demonitor(e.address());
  elector_ = nullptr;
  return e;
}

/// Asks the elector to stop and release the lease if it holds it, then continues.
/// Counts releases in flight: while any is, no elector starts and the
/// runner does not settle (two overlapping releases both count).
/// `target`: the preferredHolder the release names (a yield's).
void runner_impl::release_elector(std::function<void(bool released)> then,
                                  const std::string& target) {
  auto e = detach_elector();
  ++releases_;
  auto bound = opt_.timings.release_timeout + opt_.timings.effective_request_timeout();
  request(e, bound, release_atom::value, target)
    .then(
      [=](bool released) {
        --releases_;
        then(released);
      },
      [=](caf::error&) {
        --releases_;
        anon_send_exit(e, caf::exit_reason::kill);
        then(false);
      });
}

/// Stops every leader-only module; once they are down, check_stepdown_done
/// releases the lease (if the elector still holds it) and settles.
void runner_impl::begin_stepdown(const std::string& reason) {
  if (fence_)
    fence_->valid_until->store(0);   // leader-only work ends now, whatever the modules do
  fence_.reset();
  set_state(runner_state::stepping_down);
  const auto& yield = rare_.seen().yield;
  notify(leadership_changed{false, holder_, term_, reason, yield.active() ? yield.target() : ""});
  modules_.stop_leader_only("leadership ended: " + reason);
  check_stepdown_done();
}

void runner_impl::check_stepdown_done() {
  if (state_ != runner_state::stepping_down || modules_.stopping_leader_only())
    return;
  // Every leader-only module is down: only now may the lease go or a new elector start.
  if (elector_) {   // still renewing (release requested, or a crash loop): let it go
    if (const auto& yield = rare_.seen().yield; yield.active())
      release_elector([=](bool released) { yield_released(released); }, yield.target());
    else
      release_elector([=](bool) { settle(); });
    return;
  }
  if (rare_)
    rare_->yield.fail(yield_status::release_failed, "the term ended before the release");
  settle();
}

/// Picks the resting state after a step-down, a release or a config change.
void runner_impl::settle() {
  if (shutting_down()) {
    finish_shutdown();
    return;
  }
  if (elector_ || releases_ > 0)
    return;   // the release still in flight settles again when it ends
  if (should_elect())
    schedule_respawn();
  else
    set_state(runner_state::idle);
}

void runner_impl::on_module_stopped() {
  check_stepdown_done();
  if (shutting_down())
    finish_shutdown();
}

void runner_impl::on_down(const caf::down_msg& dm) {
  if (elector_ && dm.source == elector_.address()) {
    auto how = describe_exit(dm.reason, system());
    elector_gone("elector ended: " + how.words, how.code);
    return;
  }
  if (modules_.on_down(dm))
    return;
  if (!rare_)
    return;
  auto& subs = rare_->subscribers;
  subs.erase(std::remove_if(subs.begin(), subs.end(),
                            [&](const caf::actor& a) { return a.address() == dm.source; }),
             subs.end());
}

void runner_impl::begin_shutdown() {
  if (shutting_down()) {
    finish_shutdown();
    return;
  }
  shutdown_ = shutdown_phase::leader_only;
  stop_electing();
}

/// Advances the shutdown as far as it can: leader-only modules down and
/// the lease released (no elector, no release in flight), then every
/// other module down, then stopped.
void runner_impl::finish_shutdown() {
  if (releases_ > 0 || elector_ || modules_.stopping_leader_only())
    return;
  if (shutdown_ == shutdown_phase::leader_only) {
    shutdown_ = shutdown_phase::the_rest;
    modules_.stop_all("shutdown");
  }
  if (modules_.stopping_any())
    return;
  set_state(runner_state::stopped);
  if (rare_) {
    for (auto& rp : rare_->shutdown_rps)
      rp.deliver(true);
    rare_->shutdown_rps.clear();
  }
  quit();
}

void runner_impl::set_state(runner_state s) {
  if (s == state_)
    return;
  if (!legal_transition(state_, s)) {
    // A defect in the runner: its safety argument assumes the diagram.
    auto reason = std::string("runner: illegal state transition ") + to_string(state_) + " -> "
                  + to_string(s);
    emit(event_type::fatal, [&](runtime_event& ev) { ev.reason = reason; });
    opt_.on_fatal(reason);
    return;
  }
  state_ = s;
  emit(event_type::state_changed, [&](runtime_event& ev) { ev.detail = to_string(s); });
}

void runner_impl::notify(const leadership_changed& lc) {
  for (auto& s : rare_.seen().subscribers)
    caf::unsafe_send_as(this, s, lc);
}

runner_status runner_impl::make_status() {
  runner_status st;
  st.state = state_;
  st.identity = opt_.identity;
  st.lease = opt_.lease;
  st.holder = holder_;
  st.term = term_;
  describe_lease(st, {memory_, opt_.identity, opt_.timings.lease_duration,
                      state_ == runner_state::leader, static_cast<bool>(elector_), clock().now(),
                      last_renew(), hold_confirmed_at_, api_failing_since_,
                      evidence_->holder_renewed_at()});
  st.electing = static_cast<bool>(elector_) || (should_elect() && state_ != runner_state::idle);
  st.terms_won = terms_won_;
  st.terms_lost = terms_lost_;
  if (state_ == runner_state::leader)
    st.ms_since_renew
      = std::chrono::duration_cast<std::chrono::milliseconds>(clock().now() - last_renew()).count();
  st.modules = modules_.status();
  st.healthy = modules_.healthy();
  st.competing = opt_.compete;
  if (compete_after_ && *compete_after_ > clock().now()) {
    st.handover_backoff = *compete_after_ - clock().now();
    st.handover_module = rare_.seen().handover_module;
  }
  st.yielding = rare_.seen().yield.active();
  st.yield_to = rare_.seen().yield.target();
  st.candidates = rare_.seen().candidates;
  return st;
}

runner_actor spawn_runner_actor(caf::actor_system& sys, runner_options opts) {
  return sys.spawn<runner_impl>(std::move(opts));
}

} // namespace leasehold
