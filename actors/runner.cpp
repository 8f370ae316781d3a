#include "actors/runner.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <random>

#include "actors/elector.hpp"

namespace leasehold {

const char* to_string(runner_state s) {
  switch (s) {
    case runner_state::idle: return "idle";
    case runner_state::follower: return "follower";
    case runner_state::leader: return "leader";
    case runner_state::stepping_down: return "stepping_down";
    case runner_state::stopped: return "stopped";
  }
  return "?";
}

const char* to_string(module_state s) {
  switch (s) {
    case module_state::stopped: return "stopped";
    case module_state::running: return "running";
    case module_state::stopping: return "stopping";
    case module_state::restarting: return "restarting";
    case module_state::failed: return "failed";
    case module_state::disabled: return "disabled";
  }
  return "?";
}

namespace {

using time_point = caf::actor_clock::time_point;

/// One configured module under supervision (one_for_one).
struct module_slot {
  module_spec spec;
  caf::actor actor;                 // the running instance, if any
  module_state state = module_state::stopped;
  std::deque<time_point> restart_times;   // within supervision.period
  int restarts = 0;
  std::uint64_t generation = 0;     // bumps on every spawn/stop; stale restarts are ignored
};

/// An instance that was asked to stop and has not gone down yet.
struct stopping_module {
  std::string name;
  bool leader_only = false;
  caf::actor actor;
  std::uint64_t id = 0;
};

/// What follows a finished step-down.
enum class after_stepdown { respawn, release };

class runner_actor : public caf::event_based_actor {
public:
  runner_actor(caf::actor_config& cfg, runner_options opts)
    : caf::event_based_actor(cfg),
      opt_(std::move(opts)),
      rng_(opt_.seed != 0 ? opt_.seed : std::random_device{}()),
      backoff_(opt_.timings.backoff_min, opt_.timings.backoff_max, opt_.timings.backoff_jitter),
      emit(opt_.events, opt_.identity, opt_.lease.to_string()) {
  }

  const char* name() const override { return "leasehold.runner"; }

  caf::behavior make_behavior() override {
    set_down_handler([=](caf::down_msg& dm) { on_down(dm); });
    apply(opt_.modules);
    return {
      [=](leadership_acquired& a) {
        if (current_sender() == elector_.address())
          on_acquired(std::move(a.fence));
      },
      [=](leadership_lost& l) {
        if (current_sender() == elector_.address())
          elector_gone(l.reason);
      },
      [=](lease_renewed&) {
        if (current_sender() == elector_.address())
          last_renew_ = clock().now();
      },
      [=](leader_observed& o) {
        if (current_sender() != elector_.address() || o.holder == holder_)
          return;
        holder_ = o.holder;
        // Our own name shows up just before leadership_acquired: announce that instead.
        if (state_ != runner_state::leader && o.holder != opt_.identity) {
          term_ = o.term;
          notify(leadership_changed{false, holder_, term_, {}});
        }
      },
      [=](stop_timeout_atom, std::uint64_t id) { on_stop_timeout(id); },
      [=](respawn_atom, std::uint64_t seq) {
        if (seq == respawn_seq_ && !elector_ && should_elect())
          start_elector();
      },
      [=](restart_atom, const std::string& name, std::uint64_t generation) {
        on_restart(name, generation);
      },
      [=](module_config& cfg) -> config_result {
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
      },
      [=](get_status_atom) { return make_status(); },
      [=](subscribe_atom, caf::actor& who) {
        if (!who)
          return;
        monitor(who);
        subscribers_.push_back(who);
        send(who, current_leadership());
      },
      [=](unsubscribe_atom, caf::actor& who) {
        demonitor(who);
        subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), who),
                           subscribers_.end());
      },
      [=](shutdown_atom) {
        auto rp = make_response_promise();
        shutdown_rps_.push_back(rp);
        begin_shutdown();
        return rp;
      },
    };
  }

  void on_exit() override {
    // Whatever way the runner ends, nothing it supervised outlives it.
    for (auto& kv : slots_)
      if (kv.second.actor)
        anon_send_exit(kv.second.actor, caf::exit_reason::kill);
    for (auto& s : stopping_)
      anon_send_exit(s.actor, caf::exit_reason::kill);
    if (elector_)
      anon_send_exit(elector_, caf::exit_reason::kill);
  }

private:
  // -- configuration ---------------------------------------------------------

  void apply(const module_config& cfg) {
    std::map<std::string, module_slot> next;
    for (auto& spec : cfg.modules) {
      auto old = slots_.find(spec.name);
      if (old == slots_.end()) {
        module_slot s;
        s.spec = spec;
        s.state = spec.enabled ? module_state::stopped : module_state::disabled;
        next.emplace(spec.name, std::move(s));
        continue;
      }
      module_slot s = std::move(old->second);
      slots_.erase(old);
      bool same_kind = s.spec.type == spec.type && s.spec.leader_only == spec.leader_only;
      if (!spec.enabled || !same_kind) {
        stop_slot(s, "disabled by configuration");
        if (!spec.enabled)
          s.state = module_state::disabled;
        s.restart_times.clear();
      } else if (s.actor && s.spec.settings != spec.settings) {
        send(s.actor, module_settings{spec.name, spec.settings});
      }
      if (spec.enabled && s.state == module_state::disabled)
        s.state = module_state::stopped;
      s.spec = spec;
      next.emplace(spec.name, std::move(s));
    }
    for (auto& kv : slots_)   // removed from the configuration
      stop_slot(kv.second, "removed from configuration");
    slots_ = std::move(next);
    order_.clear();
    for (auto& spec : cfg.modules)
      order_.push_back(spec.name);
    cfg_ = cfg;
    emit(event_type::config_applied, [&](runtime_event& ev) {
      ev.detail = std::to_string(cfg.modules.size()) + " modules";
    });

    start_wanted_modules();
    if (should_elect()) {
      if (state_ == runner_state::idle && !elector_)
        start_elector();
    } else {
      stop_electing();
    }
  }

  bool should_elect() const { return !shutting_down_ && cfg_.any_leader_only_enabled(); }

  /// Starts every enabled module that should run now and does not.
  void start_wanted_modules() {
    for (auto& name : order_) {
      auto& s = slots_.at(name);
      if (s.state != module_state::stopped || !s.spec.enabled)
        continue;
      if (!s.spec.leader_only || state_ == runner_state::leader)
        spawn_module(s);
    }
  }

  // -- election ----------------------------------------------------------------

  void start_elector() {
    elector_options eo;
    eo.identity = opt_.identity;
    eo.lease = opt_.lease;
    eo.timings = opt_.timings;
    eo.transport = opt_.transport;
    eo.runner = caf::actor_cast<caf::actor>(this);
    eo.events = opt_.events;
    eo.seed = rng_();
    elector_ = spawn_elector(this, std::move(eo));
    monitor(elector_);
    ++electors_started_;
    set_state(runner_state::follower);
    emit(event_type::elector_started, [&](runtime_event& ev) {
      ev.value = static_cast<double>(electors_started_);
    });
  }

  void on_acquired(fencing_token fence) {
    fence_ = fence;
    term_ = fence.term;
    holder_ = opt_.identity;
    last_renew_ = clock().now();
    term_started_ = last_renew_;
    ++terms_won_;
    set_state(runner_state::leader);
    emit(event_type::term_acquired, [&](runtime_event& ev) {
      ev.term = term_;
      ev.holder = holder_;
      ev.valid_until_ns = fence.valid_until->load();
    });
    notify(current_leadership());
    for (auto& kv : slots_) {   // a new term forgives last term's crash loops
      auto& s = kv.second;
      if (s.spec.leader_only && s.state == module_state::failed) {
        s.state = module_state::stopped;
        s.restart_times.clear();
      }
    }
    start_wanted_modules();
  }

  /// The elector ended (lost term, crash, kill): same thing for the runner.
  void elector_gone(const std::string& reason) {
    demonitor(elector_);
    elector_ = nullptr;
    if (state_ == runner_state::leader) {
      ++terms_lost_;
      emit(event_type::term_lost, [&](runtime_event& ev) {
        ev.term = term_;
        ev.reason = reason;
      });
      if (clock().now() - term_started_ >= opt_.timings.lease_duration)
        backoff_.reset();   // a stable term: the next respawn is quick again
      begin_stepdown(after_stepdown::respawn, reason);
    } else if (state_ == runner_state::follower) {
      schedule_respawn();
    }
    // stepping_down: the step-down continues; with no elector there is nothing to release.
  }

  void schedule_respawn() {
    ++respawn_seq_;
    if (!should_elect()) {
      set_state(runner_state::idle);
      return;
    }
    std::uniform_real_distribution<double> u(0.0, 1.0);
    auto delay = backoff_.next(u(rng_));
    set_state(runner_state::follower);
    delayed_send(this, delay, respawn_atom::value, respawn_seq_);
  }

  /// No leader-only module is enabled (or shutdown): stop competing.
  void stop_electing() {
    ++respawn_seq_;   // cancels a pending respawn
    if (state_ == runner_state::leader) {
      begin_stepdown(after_stepdown::release,
                     shutting_down_ ? "shutdown" : "no leader-only module enabled");
    } else if (state_ == runner_state::stepping_down) {
      after_ = after_stepdown::release;
    } else if (elector_) {
      release_elector([=] { settle(); });
    } else {
      settle();
    }
  }

  /// Asks the elector to stop and release the lease if it holds it, then continues.
  void release_elector(std::function<void()> then) {
    auto e = elector_;
    demonitor(e);
    elector_ = nullptr;
    releasing_ = true;
    auto bound = opt_.timings.release_timeout + opt_.timings.effective_request_timeout();
    request(e, bound, release_atom::value)
      .then(
        [=](bool) {
          releasing_ = false;
          then();
        },
        [=](caf::error&) {
          releasing_ = false;
          anon_send_exit(e, caf::exit_reason::kill);
          then();
        });
  }

  // -- stepping down -----------------------------------------------------------

  void begin_stepdown(after_stepdown after, const std::string& reason) {
    after_ = after;
    if (fence_)
      fence_->valid_until->store(0);   // leader-only work ends now, whatever the modules do
    fence_.reset();
    set_state(runner_state::stepping_down);
    notify(leadership_changed{false, holder_, term_, reason});
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {   // reverse start order
      auto& s = slots_.at(*it);
      if (s.spec.leader_only)
        stop_slot(s, "leadership ended: " + reason);
    }
    check_stepdown_done();
  }

  void check_stepdown_done() {
    if (state_ != runner_state::stepping_down)
      return;
    for (auto& s : stopping_)
      if (s.leader_only)
        return;
    // Every leader-only module is down: only now may the lease go or a new elector start.
    if (after_ == after_stepdown::release && elector_) {
      release_elector([=] { after_release(); });
      return;
    }
    if (after_ == after_stepdown::release) {
      after_release();
      return;
    }
    if (elector_)   // still renewing (e.g. step-down for a crash loop): drop it
      release_elector([=] { settle(); });
    else
      settle();
  }

  void after_release() {
    emit(event_type::state_changed, [&](runtime_event& ev) { ev.detail = "lease released"; });
    settle();
  }

  /// Picks the resting state after a step-down, a release or a config change.
  void settle() {
    if (shutting_down_) {
      finish_shutdown();
      return;
    }
    if (elector_)
      return;
    if (should_elect())
      schedule_respawn();
    else
      set_state(runner_state::idle);
  }

  // -- modules -----------------------------------------------------------------

  void spawn_module(module_slot& s) {
    auto* type = opt_.registry->find(s.spec.type);
    module_context ctx;
    ctx.name = s.spec.name;
    ctx.type = s.spec.type;
    ctx.leader_only = s.spec.leader_only;
    ctx.settings = s.spec.settings;
    if (s.spec.leader_only && fence_)
      ctx.fence = *fence_;
    ctx.runner = caf::actor_cast<caf::actor>(this);
    ctx.identity = opt_.identity;
    ctx.events = opt_.events;
    caf::actor a;
    std::string failure;
    try {
      if (type != nullptr && type->factory)
        a = type->factory(system(), ctx);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    ++s.generation;
    if (!a) {
      module_crashed(s, "factory failed" + (failure.empty() ? std::string{} : ": " + failure));
      return;
    }
    monitor(a);
    s.actor = a;
    s.state = module_state::running;
    emit(event_type::module_started, [&](runtime_event& ev) {
      ev.module = s.spec.name;
      ev.leader_only = s.spec.leader_only;
      ev.term = s.spec.leader_only ? term_ : -1;
    });
  }

  /// Exit message now, kill at module_stop_timeout (OTP's shutdown spec).
  void stop_slot(module_slot& s, const std::string& reason) {
    ++s.generation;   // a pending restart is void
    if (s.state == module_state::restarting || s.state == module_state::failed)
      s.state = module_state::stopped;
    if (!s.actor)
      return;
    auto id = ++stop_ids_;
    stopping_.push_back(stopping_module{s.spec.name, s.spec.leader_only, s.actor, id});
    send_exit(s.actor, caf::exit_reason::user_shutdown);
    s.actor = nullptr;
    s.state = module_state::stopped;
    delayed_send(this, opt_.timings.module_stop_timeout, stop_timeout_atom::value, id);
    emit(event_type::module_stopped, [&](runtime_event& ev) {
      ev.module = s.spec.name;
      ev.leader_only = s.spec.leader_only;
      ev.reason = "stop requested: " + reason;
      ev.detail = "requested";
    });
  }

  void on_stop_timeout(std::uint64_t id) {
    auto it = std::find_if(stopping_.begin(), stopping_.end(),
                           [&](const stopping_module& s) { return s.id == id; });
    if (it == stopping_.end())
      return;
    anon_send_exit(it->actor, caf::exit_reason::kill);
    emit(event_type::module_killed, [&](runtime_event& ev) {
      ev.module = it->name;
      ev.leader_only = it->leader_only;
      ev.reason = "did not stop within module_stop_timeout";
    });
    demonitor(it->actor);
    stopping_.erase(it);
    check_stepdown_done();
    if (shutting_down_)
      finish_shutdown();
  }

  void on_down(const caf::down_msg& dm) {
    if (elector_ && dm.source == elector_.address()) {
      elector_gone("elector terminated: " + system().render(dm.reason));
      return;
    }
    auto st = std::find_if(stopping_.begin(), stopping_.end(),
                           [&](const stopping_module& s) { return s.actor.address() == dm.source; });
    if (st != stopping_.end()) {
      emit(event_type::module_stopped, [&](runtime_event& ev) {
        ev.module = st->name;
        ev.leader_only = st->leader_only;
        ev.reason = system().render(dm.reason);
        ev.detail = "down";
      });
      stopping_.erase(st);
      check_stepdown_done();
      if (shutting_down_)
        finish_shutdown();
      return;
    }
    for (auto& kv : slots_) {
      auto& s = kv.second;
      if (s.actor && s.actor.address() == dm.source) {
        s.actor = nullptr;
        module_crashed(s, dm.reason ? system().render(dm.reason) : "exited");
        return;
      }
    }
    subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                      [&](const caf::actor& a) { return a.address() == dm.source; }),
                       subscribers_.end());
  }

  /// one_for_one: restart with backoff, unless over intensity.
  void module_crashed(module_slot& s, const std::string& reason) {
    auto now = clock().now();
    emit(event_type::module_crashed, [&](runtime_event& ev) {
      ev.module = s.spec.name;
      ev.leader_only = s.spec.leader_only;
      ev.reason = reason;
    });
    while (!s.restart_times.empty() && now - s.restart_times.front() > opt_.supervision.period)
      s.restart_times.pop_front();
    if (static_cast<int>(s.restart_times.size()) >= opt_.supervision.intensity) {
      s.state = module_state::failed;
      emit(event_type::module_failed, [&](runtime_event& ev) {
        ev.module = s.spec.name;
        ev.leader_only = s.spec.leader_only;
        ev.reason = "more than " + std::to_string(opt_.supervision.intensity) + " restarts within "
                    + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                       opt_.supervision.period).count()) + "s";
      });
      if (s.spec.leader_only && state_ == runner_state::leader) {
        // Let a healthy replica lead: step down, release, compete again after backoff.
        std::uniform_real_distribution<double> u(0.0, 1.0);
        backoff_.next(u(rng_));
        begin_stepdown(after_stepdown::release, "module " + s.spec.name + " is crash-looping");
      }
      return;
    }
    s.restart_times.push_back(now);
    ++s.restarts;
    auto shift = std::min<int>(static_cast<int>(s.restart_times.size()) - 1, 20);
    caf::timespan delay = std::min<caf::timespan>(opt_.supervision.restart_backoff_min * (1LL << shift),
                                                  opt_.supervision.restart_backoff_max);
    s.state = module_state::restarting;
    ++s.generation;
    emit(event_type::module_restarting, [&](runtime_event& ev) {
      ev.module = s.spec.name;
      ev.leader_only = s.spec.leader_only;
      ev.value = std::chrono::duration<double, std::milli>(delay).count();
    });
    delayed_send(this, delay, restart_atom::value, s.spec.name, s.generation);
  }

  void on_restart(const std::string& name, std::uint64_t generation) {
    auto it = slots_.find(name);
    if (it == slots_.end())
      return;
    auto& s = it->second;
    if (s.state != module_state::restarting || s.generation != generation)
      return;
    s.state = module_state::stopped;
    if (!s.spec.leader_only || state_ == runner_state::leader)
      spawn_module(s);
  }

  // -- shutdown ----------------------------------------------------------------

  void begin_shutdown() {
    if (shutting_down_) {
      finish_shutdown();
      return;
    }
    shutting_down_ = true;
    stop_electing();
  }

  void finish_shutdown() {
    if (releasing_)
      return;
    if (state_ == runner_state::stepping_down && !stepdown_finished())
      return;
    if (!stopping_every_replica_) {
      stopping_every_replica_ = true;
      for (auto it = order_.rbegin(); it != order_.rend(); ++it)
        stop_slot(slots_.at(*it), "shutdown");
    }
    if (!stopping_.empty())
      return;
    set_state(runner_state::stopped);
    for (auto& rp : shutdown_rps_)
      rp.deliver(true);
    shutdown_rps_.clear();
    quit();
  }

  bool stepdown_finished() const {
    return std::none_of(stopping_.begin(), stopping_.end(),
                        [](const stopping_module& s) { return s.leader_only; })
           && !elector_;
  }

  // -- reporting ---------------------------------------------------------------

  void set_state(runner_state s) {
    if (s == state_)
      return;
    state_ = s;
    emit(event_type::state_changed, [&](runtime_event& ev) { ev.detail = to_string(s); });
  }

  leadership_changed current_leadership() const {
    return leadership_changed{state_ == runner_state::leader, holder_, term_, {}};
  }

  void notify(const leadership_changed& lc) {
    for (auto& s : subscribers_)
      send(s, lc);
  }

  runner_status make_status() {
    runner_status st;
    st.state = state_;
    st.identity = opt_.identity;
    st.lease = opt_.lease;
    st.holder = holder_;
    st.term = term_;
    st.electing = static_cast<bool>(elector_) || (should_elect() && state_ != runner_state::idle);
    st.elector = elector_;
    st.terms_won = terms_won_;
    st.terms_lost = terms_lost_;
    if (state_ == runner_state::leader)
      st.ms_since_renew
        = std::chrono::duration_cast<std::chrono::milliseconds>(clock().now() - last_renew_).count();
    for (auto& name : order_) {
      auto& s = slots_.at(name);
      module_status ms{s.spec.name, s.spec.type, s.spec.leader_only, s.state, s.restarts};
      if (!s.spec.leader_only && s.state == module_state::failed)
        st.healthy = false;
      st.modules.push_back(std::move(ms));
    }
    for (auto& s : stopping_)
      for (auto& m : st.modules)
        if (m.name == s.name && m.state == module_state::stopped)
          m.state = module_state::stopping;
    return st;
  }

  runner_options opt_;
  std::mt19937_64 rng_;
  backoff backoff_;
  event_emitter emit;
  module_config cfg_;
  std::map<std::string, module_slot> slots_;
  std::vector<std::string> order_;          // configuration (= start) order
  std::vector<stopping_module> stopping_;
  std::uint64_t stop_ids_ = 0;
  runner_state state_ = runner_state::idle;
  after_stepdown after_ = after_stepdown::respawn;
  caf::actor elector_;
  std::uint64_t respawn_seq_ = 0;
  std::int64_t electors_started_ = 0;
  std::optional<fencing_token> fence_;
  std::string holder_;
  std::int64_t term_ = -1;
  time_point last_renew_{};
  time_point term_started_{};
  std::int64_t terms_won_ = 0;
  std::int64_t terms_lost_ = 0;
  std::vector<caf::actor> subscribers_;
  bool shutting_down_ = false;
  bool releasing_ = false;                  // a release request to the old elector is in flight
  bool stopping_every_replica_ = false;
  std::vector<caf::response_promise> shutdown_rps_;
};

} // namespace

spawn_result spawn_runner(caf::actor_system& sys, runner_options opts) {
  spawn_result r;
  r.errors = validate(opts.timings);
  if (opts.identity.empty())
    r.errors.push_back("identity: must not be empty");
  if (opts.lease.name.empty())
    r.errors.push_back("lease.name: must not be empty");
  if (opts.lease.ns.empty())
    r.errors.push_back("lease.namespace: must not be empty");
  if (!opts.transport)
    r.errors.push_back("transport: no lease transport actor");
  if (!opts.registry)
    r.errors.push_back("registry: no module registry");
  else
    for (auto& e : validate(opts.modules, *opts.registry))
      r.errors.push_back(e);
  if (r.errors.empty())
    r.runner = sys.spawn<runner_actor>(std::move(opts));
  return r;
}

} // namespace leasehold
