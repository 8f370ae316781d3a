#include "sim_world.hpp"
#include "transport/kube/kube_session.hpp"

#include <doctest/doctest.h>

namespace leasehold::test {

// -- probe_tracker -------------------------------------------------------------

std::vector<std::string> probe_tracker::running_leaders() const {
  std::vector<std::string> out;
  for (auto& i : instances)
    if (i.leader_only && !i.stopped
        && std::find(out.begin(), out.end(), i.identity) == out.end())
      out.push_back(i.identity);
  return out;
}

std::vector<std::string> probe_tracker::running(const std::string& module) const {
  std::vector<std::string> out;
  for (auto& i : instances)
    if (i.leader_only && !i.stopped && i.module == module
        && std::find(out.begin(), out.end(), i.identity) == out.end())
      out.push_back(i.identity);
  return out;
}

int probe_tracker::alive(const std::string& identity, bool leader_only) const {
  int n = 0;
  for (auto& i : instances)
    if (i.identity == identity && i.leader_only == leader_only && !i.stopped)
      ++n;
  return n;
}

int probe_tracker::started(const std::string& identity, const std::string& module) const {
  int n = 0;
  for (auto& i : instances)
    if (i.identity == identity && (module.empty() || i.module == module))
      ++n;
  return n;
}

int probe_tracker::stopped(const std::string& identity, const std::string& module) const {
  int n = 0;
  for (auto& i : instances)
    if (i.identity == identity && (module.empty() || i.module == module) && i.stopped)
      ++n;
  return n;
}

const probe_tracker::instance* probe_tracker::last(const std::string& identity,
                                                   const std::string& module) const {
  for (auto i = instances.rbegin(); i != instances.rend(); ++i)
    if (i->identity == identity && i->module == module)
      return &*i;
  return nullptr;
}

// -- probe module ----------------------------------------------------------------

namespace {

using crash_atom = caf::atom_constant<caf::atom("lh_crash")>;

} // namespace

void register_probe(module_registry& reg, std::shared_ptr<probe_tracker> t) {
  module_type mt;
  mt.type = "probe";
  mt.default_leader_only = true;
  mt.validate = [](const nlohmann::json& s) {
    std::vector<std::string> errs;
    if (auto i = s.find("crash_after_ms"); i != s.end() && (!i->is_number_integer() || *i <= 0))
      errs.push_back("crash_after_ms: must be an integer > 0");
    if (auto i = s.find("ignore_stop"); i != s.end() && !i->is_boolean())
      errs.push_back("ignore_stop: must be true or false");
    return errs;
  };
  mt.factory = [t](caf::actor_system& sys, const module_context& ctx) -> caf::actor {
    auto fn = [t, ctx](caf::event_based_actor* self) -> caf::behavior {
      // Leader-only work runs from here until this actor is gone.
      for (auto& i : t->instances)
        if (ctx.leader_only && i.leader_only && !i.stopped && i.identity != ctx.identity
            && i.fence.lease.to_string() == ctx.fence.lease.to_string())   // one lease's work
          t->violations.push_back("overlap: " + ctx.identity + "/" + ctx.name + " started while "
                                  + i.identity + "/" + i.module + " runs");
      if (ctx.leader_only && !ctx.fence.valid(t->now()))
        t->violations.push_back(ctx.identity + "/" + ctx.name + " started on an invalid fence");
      t->instances.push_back({ctx.identity, ctx.name, ctx.fence.term, ctx.settings, t->now(),
                              std::nullopt, ctx.leader_only, ctx.fence});
      auto index = t->instances.size() - 1;
      self->attach_functor([t, index] { t->instances[index].stopped = t->now(); });
      auto& s = ctx.settings;
      if (s.value("ignore_stop", false))
        self->set_exit_handler([self](caf::exit_msg& m) {
          if (m.reason == caf::exit_reason::kill)   // (kill never reaches a handler)
            self->quit(m.reason);
        });
      bool crash_here = !s.contains("crash_on") || s["crash_on"] == ctx.identity;
      if (crash_here && s.contains("crash_after_ms"))
        self->delayed_send(self, std::chrono::milliseconds(s["crash_after_ms"].get<int>()),
                           crash_atom::value);
      return {
        [self](crash_atom) { self->quit(caf::make_error(caf::sec::runtime_error, "probe crash")); },
        [t, index](module_settings& ms) { t->instances[index].settings = ms.settings; },
        [](leadership_changed&) {},
      };
    };
    return sys.spawn(fn);
  };
  reg.add(std::move(mt));
}

module_config probes(std::vector<std::string> names, nlohmann::json settings) {
  module_config cfg;
  for (auto& n : names) {
    module_spec m;
    m.name = n;
    m.type = "probe";
    m.leader_only = true;
    m.settings = settings;
    cfg.modules.push_back(std::move(m));
  }
  return cfg;
}

// -- replica / world ---------------------------------------------------------------

int replica::count(event_type t) const {
  int n = 0;
  for (auto& e : events)
    if (e.type == t)
      ++n;
  return n;
}

sim_world::sim_world(world_options opts) : opts_(std::move(opts)) {
  cfg_.set("scheduler.policy", caf::atom("testing"));
  cfg_.set("logger.file-verbosity", caf::atom("quiet"));
  cfg_.set("logger.console-verbosity", caf::atom("quiet"));
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  sched_->clock().current_time += std::chrono::hours(1);   // time 0 means "never" to some code
  tracker_->now = [this] { return now(); };
  register_probe(*registry_, tracker_);
  if (opts_.modules.modules.empty())
    opts_.modules = probes({"work"});
  if (opts_.etcd)
    etcd_ = std::make_shared<sim_etcd>([this] { return now(); });
  store_ = etcd_ ? std::static_pointer_cast<sim_store>(etcd_) : api_;
  members_ = std::make_shared<sim_members>([this] { return now(); }, opts_.etcd);
  for (std::size_t k = 0; k < opts_.leases; ++k)
    if (opts_.lease_exists && !etcd_)
      api_->create_released(lease_at(k));
  for (std::size_t i = 0; i < opts_.replicas; ++i) {
    auto r = std::make_unique<replica>();
    r->identity = "replica-" + std::to_string(i);
    r->transport = spawn_sim_transport(*sys_, store_, r->identity);
    auto backend = sim_backend(r->transport, store_, r->identity);
    if (opts_.session && !opts_.etcd) {   // etcd keys have their session already
      session_options so;
      so.identity = r->identity;
      so.timings = opts_.timings;
      so.bind = true;
      so.min_bound_duration = opts_.bound_duration;
      backend = bind_to_session(*sys_, backend, so);
      r->session = backend.transport;
    }
    for (std::size_t k = 0; k < opts_.leases; ++k) {
      runner_options o;
      o.identity = r->identity;
      o.lease = lease_at(k);
      o.timings = opts_.timings;
      o.supervision = opts_.supervision;
      o.backend = backend;
      o.registry = registry_;
      o.modules = opts_.leases > 1 ? probes({"work-" + std::to_string(k)}) : opts_.modules;
      o.seed = opts_.seed + i * opts_.leases + k;
      o.watch = opts_.watch;
      o.compete = !opts_.balance;   // in a group, the group decides
      auto* rp = r.get();
      o.events = [rp, this](const runtime_event& ev) {
        rp->events.push_back(ev);
        rp->timeline.emplace_back(now(), ev);
      };
      auto res = spawn_runner(*sys_, std::move(o));
      REQUIRE_MESSAGE(res.errors.empty(), (res.errors.empty() ? "" : res.errors.front()));
      r->runners.push_back(res.runner);
    }
    r->runner = r->runners.front();
    reps_.push_back(std::move(r));
  }
  settle();
}

lease_key sim_world::lease_at(std::size_t k) const {
  if (opts_.leases <= 1)
    return opts_.lease;
  return {opts_.lease.ns, opts_.lease.name + "-" + std::to_string(k)};
}

void sim_world::start_group(std::size_t i, std::size_t n) {
  REQUIRE(opts_.balance);
  spawn_group(i, n, true);
}

void sim_world::start_candidates(std::size_t i) {
  REQUIRE_FALSE(opts_.balance);
  REQUIRE(opts_.leases == 1);
  spawn_group(i, 1, false);
}

void sim_world::spawn_group(std::size_t i, std::size_t n, bool assign) {
  auto& r = rep(i);
  balance_group_options g;
  g.identity = r.identity;
  g.ns = opts_.lease.ns;
  g.group = assign ? opts_.lease.name : candidate_set_group(opts_.lease.name);
  for (std::size_t k = 0; k < (n ? std::min(n, opts_.leases) : opts_.leases); ++k)
    g.leases.emplace_back(lease_at(k).name, r.runners[k]);
  g.membership = spawn_sim_membership(*sys_, members_, r.identity);
  g.timings = opts_.timings;
  g.settle = assign ? opts_.settle : caf::timespan{0};
  g.assign = assign;
  auto* rp = &r;
  g.events = [rp, this](const runtime_event& ev) {
    rp->events.push_back(ev);
    rp->timeline.emplace_back(now(), ev);
  };
  r.group = spawn_balance_group(*sys_, std::move(g));
  settle();
}

bool sim_world::leave_group(std::size_t i) {
  // The leave takes simulated time (modules stop, leases are released): ask
  // from an event-based actor and run the world until it has the answer.
  auto answer = std::make_shared<std::optional<bool>>();
  auto group = rep(i).group;
  sys_->spawn([answer, group](caf::event_based_actor* self) {
    self->request(group, caf::infinite, shutdown_atom::value)
      .then([=](bool ok) { *answer = ok; }, [=](caf::error&) { *answer = false; });
  });
  run_until([&] { return answer->has_value(); }, std::chrono::minutes(5));
  return answer->value_or(false);
}

std::vector<std::string> sim_world::group_members(std::size_t i) {
  return group_status(i).members;
}

balance_status sim_world::group_status(std::size_t i) {
  auto answer = std::make_shared<balance_status>();
  auto group = rep(i).group;
  REQUIRE(group);
  sys_->spawn([answer, group](caf::event_based_actor* self) {
    self->request(group, caf::infinite, get_status_atom::value)
      .then([=](balance_status& st) { *answer = std::move(st); }, [](caf::error&) {});
  });
  settle();
  return *answer;
}

void sim_world::kill_replica(std::size_t i) {
  auto& r = rep(i);
  if (r.group)
    caf::anon_send_exit(r.group, caf::exit_reason::kill);
  for (auto& runner : r.runners)
    caf::anon_send_exit(runner, caf::exit_reason::kill);
  if (r.session)
    caf::anon_send_exit(r.session, caf::exit_reason::kill);
  settle();
}

int sim_world::leader_of(std::size_t k) const {
  auto who = tracker_->running("work-" + std::to_string(k));
  REQUIRE(who.size() <= 1);
  for (std::size_t i = 0; i < reps_.size() && !who.empty(); ++i)
    if (reps_[i]->identity == who[0])
      return static_cast<int>(i);
  return -1;
}

bool sim_world::all_led(int who) const {
  for (std::size_t k = 0; k < opts_.leases; ++k)
    if (who < 0 ? leader_of(k) < 0 : leader_of(k) != who)
      return false;
  return true;
}

std::vector<std::size_t> sim_world::loads() const {
  std::vector<std::size_t> out(reps_.size(), 0);
  for (std::size_t k = 0; k < opts_.leases; ++k) {
    auto l = leader_of(k);
    if (l >= 0)
      ++out[static_cast<std::size_t>(l)];
  }
  return out;
}

sim_world::~sim_world() {
  for (auto& r : reps_) {
    if (r->group)
      caf::anon_send_exit(r->group, caf::exit_reason::kill);
    for (auto& runner : r->runners)
      caf::anon_send_exit(runner, caf::exit_reason::kill);
    caf::anon_send_exit(r->transport, caf::exit_reason::kill);
    if (r->session)
      caf::anon_send_exit(r->session, caf::exit_reason::kill);
  }
  sched_->run();
  sys_->await_actors_before_shutdown(false);
}

sim_clock_time sim_world::now() const {
  return sched_->clock().now();
}

void sim_world::settle() {
  sched_->run();
  check_safety();
}

void sim_world::check_safety() {
  auto leaders = tracker_->running_leaders();
  if (opts_.leases <= 1 && leaders.size() > 1)
    tracker_->violations.push_back("two replicas run leader-only modules: " + leaders[0] + ", "
                                   + leaders[1]);
  for (std::size_t k = 0; opts_.leases > 1 && k < opts_.leases; ++k) {
    auto who = tracker_->running("work-" + std::to_string(k));
    if (who.size() > 1)
      tracker_->violations.push_back("two replicas run the work of lease " + std::to_string(k)
                                     + ": " + who[0] + ", " + who[1]);
  }
  // The message is built even when the check passes (doctest -s logs it):
  // never front() of an empty list.
  REQUIRE_MESSAGE(tracker_->violations.empty(),
                  (tracker_->violations.empty() ? std::string{} : tracker_->violations.front()));
}

bool sim_world::run_until(const std::function<bool()>& pred, caf::timespan limit) {
  auto deadline = now() + limit;
  settle();
  // Bounded: each iteration consumes one timeout; the deadline bounds the count too.
  for (int guard = 0; guard < 10'000'000; ++guard) {
    if (pred())
      return true;
    if (now() >= deadline)
      return false;
    if (expire_etcd_leases(deadline))
      continue;
    if (!sched_->trigger_timeout())
      sched_->clock().current_time = deadline;   // nothing scheduled: time just passes
    if (now() > deadline)
      return pred();
    settle();
  }
  FAIL("run_until: step bound exceeded");
  return false;
}

bool sim_world::expire_etcd_leases(sim_clock_time deadline) {
  auto due = etcd_ ? etcd_->next_expiry() : std::nullopt;
  auto& schedule = sched_->clock().schedule();
  if (!due || *due > deadline || (!schedule.empty() && schedule.begin()->first < *due))
    return false;
  // The store's clock first: the key is gone before a timer due then fires.
  if (*due > now())
    sched_->clock().current_time = *due;
  etcd_->expire_due();
  settle();
  return true;
}

void sim_world::run_for(caf::timespan d) {
  auto end = now() + d;
  run_until([&] { return now() >= end; }, d);
}

void sim_world::run_exactly(caf::timespan d) {
  auto end = now() + d;
  settle();
  for (int guard = 0; guard < 10'000'000; ++guard) {
    if (expire_etcd_leases(end))
      continue;
    auto& schedule = sched_->clock().schedule();
    if (schedule.empty() || schedule.begin()->first > end)
      break;
    sched_->trigger_timeout();
    settle();
  }
  sched_->clock().current_time = std::max(now(), end);
  settle();
}

sim_clock_time sim_world::last_renew(std::size_t i) const {
  sim_clock_time t{};
  for (auto& [at, ev] : reps_.at(i)->timeline)
    if (ev.type == event_type::renewed)
      t = at;
  return t;
}

runner_status sim_world::status(std::size_t i) {
  caf::scoped_actor self{*sys_};
  auto h = self->request(rep(i).runner, caf::infinite, get_status_atom::value);
  sched_->run();
  runner_status out;
  h.receive([&](runner_status& st) { out = std::move(st); },
            [&](caf::error& e) { FAIL("status: " << sys_->render(e)); });
  check_safety();
  return out;
}

elector_handle sim_world::elector(std::size_t i, std::size_t k) {
  caf::scoped_actor self{*sys_};
  auto h = self->request(caf::actor_cast<caf::actor>(rep(i).runners.at(k)), caf::infinite,
                         get_elector_atom::value);
  sched_->run();
  elector_handle out;
  h.receive([&](elector_handle& e) { out = std::move(e); },
            [&](caf::error& e) { FAIL("elector: " << sys_->render(e)); });
  check_safety();
  return out;
}

config_result sim_world::configure(std::size_t i, module_config cfg) {
  caf::scoped_actor self{*sys_};
  auto h = self->request(rep(i).runner, caf::infinite, std::move(cfg));
  sched_->run();
  config_result out;
  h.receive([&](config_result& r) { out = std::move(r); },
            [&](caf::error& e) { FAIL("configure: " << sys_->render(e)); });
  check_safety();
  return out;
}

int sim_world::leader() const {
  auto leaders = tracker_->running_leaders();
  REQUIRE(leaders.size() <= 1);
  if (leaders.empty())
    return -1;
  for (std::size_t i = 0; i < reps_.size(); ++i)
    if (reps_[i]->identity == leaders[0])
      return static_cast<int>(i);
  return -1;
}

std::size_t sim_world::await_leader(caf::timespan limit) {
  REQUIRE(run_until([&] { return leader() >= 0; }, limit));
  return static_cast<std::size_t>(leader());
}

bool sim_world::shutdown(std::size_t i) {
  caf::scoped_actor self{*sys_};
  auto h = self->request(rep(i).runner, caf::infinite, shutdown_atom::value);
  bool done = false;
  // Shutdown takes simulated time (module stop timeouts, API requests).
  run_until([&] { return self->mailbox().size() > 0; }, std::chrono::seconds(60));
  h.receive([&](bool ok) { done = ok; }, [&](caf::error&) { done = false; });
  return done;
}

namespace {
/// Sends `xs` to `to` and runs the world until the yield_result comes back.
template <class... Ts>
yield_result ask_yield(sim_world& w, caf::actor_system& sys, const caf::actor& to,
                       caf::timespan limit, Ts&&... xs) {
  caf::scoped_actor self{sys};
  auto h = self->request(to, caf::infinite, yield_atom::value, std::forward<Ts>(xs)...);
  REQUIRE(w.run_until([&] { return self->mailbox().size() > 0; }, limit));
  yield_result out;
  h.receive([&](yield_result& r) { out = std::move(r); },
            [&](caf::error& e) { FAIL("yield: " << sys.render(e)); });
  return out;
}
} // namespace

yield_result sim_world::yield(std::size_t i, const std::string& target, caf::timespan limit) {
  return ask_yield(*this, *sys_, caf::actor_cast<caf::actor>(rep(i).runner), limit, target);
}

yield_result sim_world::group_yield(std::size_t i, const std::string& lease, const std::string& to) {
  return ask_yield(*this, *sys_, rep(i).group, std::chrono::seconds(60), lease, to);
}

} // namespace leasehold::test
