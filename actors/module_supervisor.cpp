#include "actors/module_supervisor.hpp"

#include <algorithm>

namespace leasehold {

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

/// A module event with why it happened (`reason`; `code`: a raw exit code).
void say(const event_emitter& emit, event_type t, const std::string& module, bool leader_only,
         const std::string& reason, const std::string& code = {}) {
  emit(t, [&](runtime_event& ev) {
    ev.module = module;
    ev.leader_only = leader_only;
    ev.reason = reason;
    ev.code = code;
  });
}

} // namespace

bool add_restart(std::vector<caf::actor_clock::time_point>& times,
                 caf::actor_clock::time_point now, const restart_policy& p) {
  auto first_kept = times.begin();
  while (first_kept != times.end() && now - *first_kept > p.within)
    ++first_kept;
  times.erase(times.begin(), first_kept);
  times.push_back(now);
  return static_cast<int>(times.size()) <= p.max_restarts;
}

restart_policy module_supervisor::policy(const slot& s) const {
  return s.spec.restart.value_or(
    restart_policy{opt_.supervision.intensity, opt_.supervision.period});
}

module_supervisor::module_supervisor(runner_internal_actor::pointer self, const runner_options& opt,
                                     event_emitter emit, hooks h)
  : self_(self), opt_(opt), emit_(std::move(emit)), hooks_(std::move(h)) {
}

void module_supervisor::configure(const module_config& cfg) {
  std::vector<slot> next;
  next.reserve(cfg.modules.size());
  for (auto& spec : cfg.modules) {
    auto old = find(spec.name);
    if (!old) {
      slot s(opt_.supervision);
      s.spec = spec;
      s.state = spec.enabled ? module_state::stopped : module_state::disabled;
      next.push_back(std::move(s));
      continue;
    }
    slot s = std::move(*old);
    old->spec.name.clear();   // taken: what is left named in slots_ was removed
    bool same_kind = s.spec.type == spec.type && s.spec.leader_only == spec.leader_only;
    if (!spec.enabled || !same_kind) {
      stop(s, "disabled by configuration");
      if (!spec.enabled)
        s.state = module_state::disabled;
      s.restart_times.clear();
    } else if (s.actor && s.spec.settings != spec.settings) {
      caf::unsafe_send_as(self_, s.actor, module_settings{spec.name, spec.settings});
    }
    if (spec.enabled && s.state == module_state::disabled)
      s.state = module_state::stopped;
    s.spec = spec;
    next.push_back(std::move(s));
  }
  for (auto& s : slots_)   // removed from the configuration
    if (!s.spec.name.empty())
      stop(s, "removed from configuration");
  slots_ = std::move(next);
}

bool module_supervisor::configured_as(const module_config& cfg) const {
  return std::equal(cfg.modules.begin(), cfg.modules.end(), slots_.begin(), slots_.end(),
                    [](const module_spec& a, const slot& b) { return a == b.spec; });
}

bool module_supervisor::any_leader_only_enabled() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const slot& s) { return s.spec.enabled && s.spec.leader_only; });
}

module_supervisor::slot* module_supervisor::find(const std::string& name) {
  for (auto& s : slots_)
    if (s.spec.name == name)
      return &s;
  return nullptr;
}

void module_supervisor::start_wanted(const std::optional<fencing_token>& fence) {
  // By index: a failing leader-only start may step the replica down, and
  // a reconfiguration meanwhile replaces the slots.
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.state == module_state::stopped && s.spec.enabled && may_run(s, fence))
      spawn(s, fence);
  }
}

bool module_supervisor::may_run(const slot& s, const std::optional<fencing_token>& fence) const {
  // Leader-only work starts only on a fence still valid now: a restart timer
  // that fires after a pause, past the renew deadline, must not start it.
  return !s.spec.leader_only || (fence && fence->valid(self_->clock().now()));
}

void module_supervisor::forgive_leader_only() {
  // A fresh restart window per term for every leader-only module: one that
  // used its restarts last term, failed or not, starts the term with none.
  for (auto& s : slots_) {
    if (!s.spec.leader_only)
      continue;
    if (s.state == module_state::failed)
      s.state = module_state::stopped;
    s.restart_times.clear();
    s.delays.reset();
  }
}

void module_supervisor::stop_leader_only(const std::string& reason) {
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it)   // reverse start order
    if (it->spec.leader_only)
      stop(*it, reason);
}

void module_supervisor::stop_all(const std::string& reason) {
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it)
    stop(*it, reason);
}

bool module_supervisor::stopping_leader_only() const {
  return std::any_of(stopping_.begin(), stopping_.end(),
                     [](const stopping_module& s) { return s.leader_only; });
}

void module_supervisor::spawn(slot& s, const std::optional<fencing_token>& fence) {
  auto* type = opt_.registry->find(s.spec.type);
  module_context ctx;
  ctx.name = s.spec.name;
  ctx.type = s.spec.type;
  ctx.leader_only = s.spec.leader_only;
  ctx.settings = s.spec.settings;
  if (s.spec.leader_only && fence)
    ctx.fence = *fence;
  ctx.fence.lease = opt_.lease;        // every-replica modules learn the lease too
  ctx.fence.identity = opt_.identity;
  ctx.runner = caf::actor_cast<leadership_publisher>(self_);
  ctx.identity = opt_.identity;
  ctx.events = emit_.sink();   // for the module's report lines
  caf::actor a;
  std::string failure;
  try {
    if (type != nullptr && type->factory)
      a = type->factory(self_->system(), ctx);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  ++s.generation;
  if (!a) {
    crashed(s, "factory failed" + (failure.empty() ? std::string{} : ": " + failure));
    return;
  }
  self_->monitor(a);
  s.actor = a;
  s.state = module_state::running;
  emit_(event_type::module_started, [&](runtime_event& ev) {
    ev.module = s.spec.name;
    ev.leader_only = s.spec.leader_only;
    ev.term = s.spec.leader_only ? ctx.fence.term : -1;
  });
}

void module_supervisor::stop(slot& s, const std::string& reason) {
  ++s.generation;   // a pending restart is void
  if (s.state == module_state::restarting || s.state == module_state::failed)
    s.state = module_state::stopped;
  if (!s.actor)
    return;
  auto id = ++stop_ids_;
  stopping_.push_back(stopping_module{s.spec.name, s.spec.leader_only, s.actor, id});
  self_->send_exit(s.actor, caf::exit_reason::user_shutdown);
  s.actor = nullptr;
  s.state = module_state::stopped;
  self_->delayed_send(self_, opt_.timings.module_stop_timeout, stop_timeout_atom::value, id);
  say(emit_, event_type::module_stopping, s.spec.name, s.spec.leader_only, reason);
}

void module_supervisor::on_stop_timeout(std::uint64_t id) {
  auto it = std::find_if(stopping_.begin(), stopping_.end(),
                         [&](const stopping_module& s) { return s.id == id; });
  if (it == stopping_.end() || it->killed)
    return;
  // A kill is not a stop: the module counts as stopping until its down
  // message arrives (a detached actor blocked in a handler runs on).
  it->killed = true;
  caf::anon_send_exit(it->actor, caf::exit_reason::kill);
  say(emit_, event_type::module_killed, it->name, it->leader_only,
      "did not stop within module_stop_timeout");
  if (it->leader_only)
    hooks_.kill_unconfirmed(it->name);
}

std::vector<std::string> module_supervisor::unconfirmed_kills() const {
  std::vector<std::string> out;
  for (auto& s : stopping_)
    if (s.leader_only && s.killed)
      out.push_back(s.name);
  return out;
}

bool module_supervisor::on_down(const caf::down_msg& dm) {
  auto st = std::find_if(stopping_.begin(), stopping_.end(),
                         [&](const stopping_module& s) { return s.actor.address() == dm.source; });
  if (st != stopping_.end()) {
    auto how = describe_exit(dm.reason, self_->system());
    say(emit_, event_type::module_stopped, st->name, st->leader_only, how.words, how.code);
    stopping_.erase(st);
    hooks_.stopped();
    return true;
  }
  for (auto& s : slots_) {
    if (s.actor && s.actor.address() == dm.source) {
      s.actor = nullptr;
      auto how = describe_exit(dm.reason, self_->system());
      crashed(s, how.words, how.code);
      return true;
    }
  }
  return false;
}

void module_supervisor::crashed(slot& s, const std::string& reason, const std::string& code) {
  auto now = self_->clock().now();
  say(emit_, event_type::module_crashed, s.spec.name, s.spec.leader_only, reason, code);
  auto p = policy(s);
  if (!add_restart(s.restart_times, now, p)) {
    s.state = module_state::failed;
    say(emit_, event_type::module_failed, s.spec.name, s.spec.leader_only,
        "crashed more than " + std::to_string(p.max_restarts) + " times within "
          + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(p.within).count())
          + "ms");
    if (s.spec.leader_only)
      hooks_.leader_only_failed(s.spec.name);
    return;
  }
  ++s.restarts;
  if (s.restart_times.size() == 1)
    s.delays.reset();   // the first restart in the window: the shortest delay again
  auto delay = s.delays.next(0.5);
  s.restart_at = now + delay;
  s.state = module_state::restarting;
  ++s.generation;
  emit_(event_type::module_restarting, [&](runtime_event& ev) {
    ev.module = s.spec.name;
    ev.leader_only = s.spec.leader_only;
    ev.value = std::chrono::duration<double, std::milli>(delay).count();
  });
  self_->delayed_send(self_, delay, restart_atom::value, s.spec.name, s.generation);
}

void module_supervisor::on_restart(const std::string& name, std::uint64_t generation,
                                   const std::optional<fencing_token>& fence) {
  auto* s = find(name);
  if (!s || s->state != module_state::restarting || s->generation != generation)
    return;
  s->state = module_state::stopped;
  if (may_run(*s, fence))
    spawn(*s, fence);
}

std::vector<module_status> module_supervisor::status() const {
  std::vector<module_status> out;
  auto now = self_->clock().now();
  for (auto& s : slots_) {
    module_status m{s.spec.name, s.spec.type, s.spec.leader_only, s.state, s.restarts};
    auto p = policy(s);
    m.max_restarts = p.max_restarts;
    m.within = p.within;
    for (auto& t : s.restart_times)
      if (now - t <= p.within)
        ++m.restarts_in_window;
    if (s.state == module_state::restarting)
      m.restart_in = std::max(caf::timespan{0}, s.restart_at - now);
    out.push_back(std::move(m));
  }
  for (auto& s : stopping_)
    for (auto& m : out)
      if (m.name == s.name && m.state == module_state::stopped)
        m.state = module_state::stopping;
  return out;
}

bool module_supervisor::healthy() const {
  return std::none_of(slots_.begin(), slots_.end(), [](const slot& s) {
    return !s.spec.leader_only && s.state == module_state::failed;
  });
}

void module_supervisor::kill_all() {
  for (auto& s : slots_)
    if (s.actor)
      caf::anon_send_exit(s.actor, caf::exit_reason::kill);
  for (auto& s : stopping_)
    caf::anon_send_exit(s.actor, caf::exit_reason::kill);
}

} // namespace leasehold
