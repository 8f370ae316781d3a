#include "sim_cluster.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "leasehold/lease.hpp"
#include "leasehold/balance_group.hpp"
#include "sim_groups.hpp"
#include "tests/support/sim_membership.hpp"
#include "transport/kube/kube_session.hpp"

namespace leasehold::sim {

using namespace std::chrono_literals;

namespace {

long long ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

} // namespace

const char* to_string(backend_kind b) {
  return b == backend_kind::etcd ? "etcd" : "kubernetes";
}

std::optional<backend_kind> parse_backend(const std::string& name) {
  if (name == "kubernetes")
    return backend_kind::kubernetes;
  if (name == "etcd")
    return backend_kind::etcd;
  return std::nullopt;
}

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::api_down: return "api_down";
    case op_kind::api_hang: return "api_hang";
    case op_kind::api_errors: return "api_errors";
    case op_kind::api_latency: return "api_latency";
    case op_kind::partition: return "partition";
    case op_kind::partition_hang: return "partition_hang";
    case op_kind::wipe: return "wipe";
    case op_kind::elector_kill: return "elector_kill";
    case op_kind::crash_loop: return "crash_loop";
    case op_kind::module_hang: return "module_hang";
    case op_kind::stubborn_module: return "stubborn_module";
    case op_kind::slow_module: return "slow_module";
    case op_kind::disable: return "disable";
    case op_kind::enable: return "enable";
    case op_kind::change_value: return "change_value";
    case op_kind::config_burst: return "config_burst";
    case op_kind::pause: return "pause";
    case op_kind::crash: return "crash";
    case op_kind::restart: return "restart";
    case op_kind::graceful_shutdown: return "graceful_shutdown";
    case op_kind::heal: return "heal";
    case op_kind::outside_write: return "outside_write";
    case op_kind::stream_cut: return "stream_cut";
    case op_kind::stream_gone: return "stream_gone";
    case op_kind::stream_replay: return "stream_replay";
    case op_kind::stream_delay: return "stream_delay";
    case op_kind::yield: return "yield";
    case op_kind::join: return "join";
    case op_kind::leave: return "leave";
    case op_kind::kill: return "kill";
    case op_kind::flap: return "flap";
    case op_kind::prefer: return "prefer";
    case op_kind::session_write: return "session_write";
    case op_kind::foreign: return "foreign";
  }
  return "?";
}

std::string op::describe() const {
  std::ostringstream os;
  os << to_string(kind) << " replica=" << replica;
  if (duration.count() > 0)
    os << " for " << ms(duration) << "ms";
  if (param != 0)
    os << " param=" << param;
  if (lease != 0)
    os << " lease=" << (lease < 0 ? std::string("all") : std::to_string(lease));
  return os.str();
}

// -- checker -------------------------------------------------------------------

void checker::started(probe_instance inst) {
  auto t = now();
  if (inst.leader_only && !inst.foreign) {
    if (!inst.fence.valid(t) && inst.valid_at_spawn)
      inst.stale_since = t;   // its term ended between its spawn and its first run
    else if (!inst.fence.valid(t))
      violations.push_back(inst.identity + "/" + inst.module + " started on an invalid fence (term "
                           + std::to_string(inst.term) + ")");
    if (server_expiry && inst.fence.valid(t)) {
      // etcd: a term is a key's life (create_revision); its work starts only
      // while that key exists and names its holder (it outlives the fence).
      auto rec = peek ? peek() : std::nullopt;
      bool cut_from_outside = inst.term == outside_ended_term;
      if (!cut_from_outside && (!rec || rec->spec.holder_identity != inst.identity
                                || rec->spec.lease_transitions != inst.term))
        violations.push_back(inst.identity + "/" + inst.module + " started term "
                             + std::to_string(inst.term) + " but the key "
                             + (rec ? "names " + rec->spec.holder_identity + " in term "
                                        + std::to_string(rec->spec.lease_transitions)
                                    : std::string("is gone")));
    }
    const void* cell = inst.fence.valid_until.get();
    bool known = std::any_of(acquisitions.begin(), acquisitions.end(),
                             [&](const acquisition& a) { return a.cell == cell; });
    if (!known) {
      for (auto& a : acquisitions) {
        bool same_process = a.identity == inst.identity && a.incarnation == inst.incarnation;
        // The earlier term's record was written at most a renew deadline
        // before its work started; a wipe after that write loses it.
        bool wiped_since = last_wipe && *last_wipe + renew_deadline >= a.at;
        if (inst.term <= a.term && (same_process || !wiped_since)) {
          violations.push_back("term did not increase: " + inst.identity + " started term "
                               + std::to_string(inst.term) + " after " + a.identity + "'s term "
                               + std::to_string(a.term));
          break;
        }
      }
      acquisitions.push_back({inst.identity, inst.incarnation, inst.term, cell, t});
      if (inst.fence.valid(t) && unheld_created_at && t < *unheld_created_at + lease_duration)
        violations.push_back(inst.identity + "/" + inst.module + " started term "
                             + std::to_string(inst.term) + " "
                             + std::to_string(ms(t - *unheld_created_at))
                             + "ms after the lease was created unheld, inside its creation hold");
    }
  }
  inst.started = t;
  dirty = true;
  live.push_back(instances.size());
  instances.push_back(std::move(inst));
}

void checker::ended(std::size_t index, time_point at) {
  auto& i = instances.at(index);
  if (i.stopped)
    return;
  i.stopped = at;
  dirty = true;
  live.erase(std::find(live.begin(), live.end(), index));
}

std::vector<std::string> checker::working(const std::function<bool(std::size_t)>& paused) const {
  std::vector<std::string> out;
  for (auto k : live)
    if (auto& i = instances[k]; i.leader_only && !i.stopped && !i.stale_since && !paused(i.replica)
        && !(i.foreign && !i.fence.valid(now()))   // its work ends with its fence
        && std::find(out.begin(), out.end(), i.identity) == out.end())
      out.push_back(i.identity);
  return out;
}

void checker::track_fences() {
  for (auto k : live)
    if (auto& i = instances[k]; i.fence.valid_until)
      i.last_valid_until = std::max(i.last_valid_until, i.fence.valid_until->load());
}

void checker::check(const std::function<bool(std::size_t)>& paused,
                    const std::optional<lease>& record) {
  auto t = now();
  auto w = working(paused);
  if (w.size() > 1)
    violations.push_back("two replicas run leader-only work: " + w[0] + " and " + w[1]);
  dirty = false;
  for (auto k : live) {
    auto& i = instances[k];
    dirty = dirty || i.stale_since.has_value();
    // Counted from the latest resume; a paused process does nothing.
    // A stale instance is gone within the budget of its resume, or, when
    // it cannot be stopped (hung), by the fatal exit: last renew sent +
    // lease_duration - room / 2 = fence end + budget - room / 2.
    if (i.fence.valid_until)
      i.last_valid_until = std::max(i.last_valid_until, i.fence.valid_until->load());
    auto fence_end = time_point{caf::timespan{i.last_valid_until}};
    if (i.stale_since && !paused(i.replica)
        && t > std::max(*i.stale_since + stale_budget, fence_end + stale_budget - room / 2))
      violations.push_back(i.identity + "/" + i.module + " woke up after its fence expired and still runs "
                           + std::to_string(ms(t - *i.stale_since)) + "ms later");
    if (i.leader_only && !i.foreign && !i.stale_since && !paused(i.replica) && i.fence.valid(t) && record
        && record->spec.holder_identity == i.identity
        && record->spec.lease_transitions != i.term)
      violations.push_back(i.identity + "/" + i.module + " runs on term " + std::to_string(i.term)
                           + " but the lease it holds is at leaseTransitions "
                           + std::to_string(record->spec.lease_transitions));
  }
  // Kubernetes: a release (holder emptied) frees the lease for every other
  // replica at once, so the term it ends must have no leader-only work left
  // running. etcd: the key going away (a revoke, or its TTL run out) frees
  // it at once the same way, so the same holds when the key is gone, except
  // for the work of a paused process (its lease ran out while it was
  // frozen: its fence has expired too, and the stale rule judges it once it
  // resumes).
  // A release on etcd writes the released record first (holder ""), then
  // revokes the key's lease: the record's emptying is the release there too.
  bool emptied = last_record && record && !last_record->spec.holder_identity.empty()
                 && record->spec.holder_identity.empty();
  bool gone = server_expiry && last_record && !record && !last_record->spec.holder_identity.empty();
  bool freed = (emptied || gone) && !outside_write;
  outside_write = false;
  if (freed) {
    auto& ended = last_record->spec;
    last_release = t;
    for (auto k : live)
      if (auto& i = instances[k]; i.leader_only && !i.stale_since && i.identity == ended.holder_identity
          && i.term == ended.lease_transitions && !(server_expiry && paused(i.replica))) {
        violations.push_back(std::string(server_expiry ? "the key was deleted (" : "the lease was released (")
                             + ended.holder_identity + ", term "
                             + std::to_string(ended.lease_transitions) + ") while "
                             + i.identity + "/" + i.module + " still runs on that term");
        break;
      }
  }
  last_record = record;
}

// -- the simulated cluster ---------------------------------------------------------

namespace {

using stop_now_atom = caf::atom_constant<caf::atom("sim_stop")>;
using crash_atom = caf::atom_constant<caf::atom("sim_crash")>;
using foreign_tick_atom = caf::atom_constant<caf::atom("sim_ftick")>;
using foreign_deadline_atom = caf::atom_constant<caf::atom("sim_fdead")>;

struct knobs_by_module {
  probe_knobs work, side, every;
  bool leader_only_enabled = true;   // both leader-only modules
  bool work_off = false, side_off = false;   // one of them switched off alone
};

probe_knobs parse_knobs(const nlohmann::json& s) {
  probe_knobs k;
  k.value = s.value("value", 0);
  k.crash_after_ms = s.value("crash_after_ms", 0);
  k.stop_delay_ms = s.value("stop_delay_ms", 0);
  k.ignore_stop = s.value("ignore_stop", false);
  k.hang_on_stop_ms = s.value("hang_on_stop_ms", 0);
  return k;
}

nlohmann::json to_settings(const probe_knobs& k) {
  nlohmann::json s = nlohmann::json::object();
  s["value"] = k.value;
  if (k.crash_after_ms > 0)
    s["crash_after_ms"] = k.crash_after_ms;
  if (k.stop_delay_ms > 0)
    s["stop_delay_ms"] = k.stop_delay_ms;
  if (k.ignore_stop)
    s["ignore_stop"] = true;
  if (k.hang_on_stop_ms > 0)
    s["hang_on_stop_ms"] = k.hang_on_stop_ms;
  return s;
}

module_config make_config(const knobs_by_module& k) {
  module_config cfg;
  auto add = [&](const char* name, bool leader_only, bool enabled, const probe_knobs& kn) {
    module_spec m;
    m.name = name;
    m.type = "simprobe";
    m.leader_only = leader_only;
    m.enabled = enabled;
    m.settings = to_settings(kn);
    cfg.modules.push_back(std::move(m));
  };
  add("work", true, k.leader_only_enabled && !k.work_off, k.work);
  add("side", true, k.leader_only_enabled && !k.side_off, k.side);
  add("every", false, true, k.every);
  return cfg;
}

class cluster {
public:
  explicit cluster(const scenario& sc)
    : sc_(sc), rng_(sc.seed ^ 0xA5A5A5A5DEADBEEFULL),
      judge_(std::max<std::size_t>(1, sc.leases), group_bound(sc.timings, sc.backend, sc.settle)) {
    now_ = time_point{} + std::chrono::hours(1);
    start_ = now_;
    if (sc_.backend == backend_kind::etcd) {
      etcd_ = std::make_shared<sim_etcd>([this] { return now_; });
      api_ = etcd_;
    } else {
      kube_ = std::make_shared<sim_api>();
      api_ = kube_;
    }
    // One checker per lease: the invariants are a lease's.
    auto n = std::max<std::size_t>(1, sc_.leases);
    chk_.resize(n);
    live_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      leases_.push_back({"default", n == 1 ? "sim-lock" : "sim-lock-" + std::to_string(k)});
      lease_index_[leases_.back().name] = k;
      auto& c = chk_[k];
      c.now = [this] { return now_; };
      c.stale_budget = sc_.timings.lease_duration - sc_.timings.renew_deadline;
      c.room = c.stale_budget - sc_.timings.module_stop_timeout;
      c.renew_deadline = sc_.timings.renew_deadline;
      c.lease_duration = sc_.timings.lease_duration;
      c.server_expiry = sc_.backend == backend_kind::etcd;
      c.peek = [this, k] { return api_->peek(leases_[k]); };
    }
    api_->set_latency_jitter(sc_.base_latency, sc_.seed);
    // etcd has no released record: a release revokes the key, so a lease
    // "left behind by an earlier run" is no key at all there.
    if (sc_.precreated_lease && kube_)
      for (auto& l : leases_)
        kube_->create_released(l);
    // Balance groups: one membership store (etcd's forgets a member whose
    // key's ttl ran out; a LeaseCandidate's readers stop counting it).
    members_ = std::make_shared<sim_members>([this] { return now_; }, sc_.backend == backend_kind::etcd);
    procs_.resize(sc_.replicas);
    if (kube_) {   // who binds the leases it takes to its session
      std::string who;
      for (std::size_t i = 0; i < procs_.size(); ++i)
        who += (i == 0 ? "" : ", ") + std::string("replica-") + std::to_string(i)
               + (binds(i) ? " binds" : " plain");
      note("sessions: " + who + "; a bound lease lasts " + std::to_string(ms(sc_.bound_duration)) + "ms");
    }
    for (std::size_t i = 0; i < procs_.size(); ++i) {
      procs_[i].index = i;
      procs_[i].identity = "replica-" + std::to_string(i);
      procs_[i].knobs.resize(n);
      procs_[i].out = sc_.groups && i < sc_.out_at_start.size() && sc_.out_at_start[i];
      if (procs_[i].out)
        note(procs_[i].identity + " is out of the group at the start");
      else
        start_proc(i);
    }
  }

  ~cluster() {
    for (std::size_t i = 0; i < procs_.size(); ++i)
      if (procs_[i].alive)
        kill_proc(i, "end of run", false);
    if (foreign_) {
      caf::anon_send_exit(foreign_->elector, caf::exit_reason::kill);
      caf::anon_send_exit(foreign_->transport, caf::exit_reason::kill);
      foreign_->sched->run();
      foreign_->sys->await_actors_before_shutdown(false);
    }
  }

  run_result run() {
    std::size_t next_op = 0;
    auto end = start_ + sc_.length;
    std::size_t quiet_index = 0;
    for (std::uint64_t guard = 0; guard < 50'000'000 && ok(); ++guard) {
      while (next_op < sc_.ops.size() && start_ + sc_.ops[next_op].at <= now_)
        apply(sc_.ops[next_op++]);
      while (!timed_.empty() && timed_.begin()->first <= now_) {
        auto f = std::move(timed_.begin()->second);
        timed_.erase(timed_.begin());
        f();
      }
      if (!ok())
        break;
      liveness(quiet_index);
      if (step())
        continue;
      if (now_ >= end)
        break;
      auto next = end;
      if (next_op < sc_.ops.size())
        next = std::min(next, start_ + sc_.ops[next_op].at);
      if (!timed_.empty())
        next = std::min(next, timed_.begin()->first);
      if (auto g = judge_.next_deadline())
        next = std::min(next, *g);
      for (auto& p : procs_)
        if (p.alive && !p.paused && !p.sched->clock().schedule().empty())
          next = std::min(next, p.sched->clock().schedule().begin()->first);
      if (foreign_ && !foreign_->sched->clock().schedule().empty())
        next = std::min(next, foreign_->sched->clock().schedule().begin()->first);
      for (auto& [key, until] : hung_)
        if (until > now_)
          next = std::min(next, until);
      if (etcd_)
        if (auto e = etcd_->next_expiry())
          next = std::min(next, *e);
      if (quiet_index < sc_.quiet.size())
        next = std::min(next, next_liveness_deadline(quiet_index));
      advance(std::max(next, now_));
    }
    if (ok() && now_ < end)   // the guard ran out before the end of the scenario
      violation("the simulation stopped making progress at "
                + std::to_string(ms(now_ - start_)) + "ms (a simulator defect)");
    run_result r;
    r.ok = ok();
    if (!r.ok)
      r.violation = first_violation();
    r.log = log_;
    r.steps = steps_;
    r.simulated = now_ - start_;
    r.requests = api_->request_count();
    r.group_max_unowned = judge_.max_unowned;
    r.group_max_to_balance = judge_.max_to_balance;
    r.group_max_moves = judge_.max_moves;
    r.group_judgements = judge_.balanced_judgements;
    r.group_bound = group_bound(sc_.timings, sc_.backend, sc_.settle);
    for (auto& c : chk_)
      r.takes += c.acquisitions.size();
    r.foreign_takes = foreign_takes_;
    r.takes += foreign_takes_;
    for (auto& q : api_->requests())
      if (q.verb == "PUT" && q.result == error_kind::none && q.lease.find("/lh-session-") != std::string::npos)
        ++r.session_renews;
    if (kube_)
      for (auto& c : api_->changes_since({leases_.front().ns, ""}, 0))
        if (lease_index_.count(c.key.name) && c.record && bound_record(*c.record))
          ++r.bound_writes;
    return r;
  }

private:
  struct proc {
    std::size_t index = 0;
    std::string identity;
    int incarnation = 0;
    std::unique_ptr<caf::actor_system_config> cfg;
    std::unique_ptr<caf::actor_system> sys;
    caf::scheduler::test_coordinator* sched = nullptr;
    std::vector<runner_actor> runners;   // one per lease, all on `transport`
    lease_transport_actor transport;
    lease_transport_actor session;       // Kubernetes: the session actor in front of `transport`
    bool alive = false;
    bool paused = false;
    std::vector<knobs_by_module> knobs;  // per lease
    caf::actor group;                    // its balance group actor (world::groups)
    /// Without groups: a candidate set per lease (a group actor that only
    /// announces the replica), as `leasehold run` spawns outside groups.
    std::vector<caf::actor> sets;
    bool out = false;                    // out of the group: no process until a join
  };

  bool ok() const {
    return errors_.empty() && judge_.violations.empty()
           && std::all_of(chk_.begin(), chk_.end(), [](const checker& c) { return c.ok(); });
  }

  /// The lease named in a line of a multi-lease world ("" in a single-lease one).
  std::string at_lease(std::size_t k) const {
    return leases_.size() == 1 ? std::string{} : " [" + leases_[k].name + "]";
  }

  std::string first_violation() const {
    if (!errors_.empty())
      return errors_.front();
    if (!judge_.violations.empty())
      return judge_.violations.front();
    for (std::size_t k = 0; k < chk_.size(); ++k)
      if (!chk_[k].ok())
        return chk_[k].violations.front() + at_lease(k);
    return {};
  }

  /// The leases an operation targets: its own (modulo the count), or every one (-1).
  std::vector<std::size_t> targets(int lease) const {
    std::vector<std::size_t> out;
    if (lease < 0)
      for (std::size_t k = 0; k < leases_.size(); ++k)
        out.push_back(k);
    else
      out.push_back(static_cast<std::size_t>(lease) % leases_.size());
    return out;
  }

  void note(const std::string& line) {
    log_.push_back("t=" + std::to_string(ms(now_ - start_)) + "ms " + line);
  }

  void violation(const std::string& what) { errors_.push_back(what); }

  // -- processes ---------------------------------------------------------------

  /// The probe module of replica `replica`'s runner of lease `lease`.
  void register_probe(module_registry& reg, std::size_t replica, std::size_t lease, int incarnation) {
    module_type mt;
    mt.type = "simprobe";
    mt.default_leader_only = true;
    mt.factory = [this, replica, lease, incarnation](caf::actor_system& sys,
                                                     const module_context& ctx) -> caf::actor {
      // The runtime spawns it now; its first run may come steps later.
      bool valid_at_spawn = !ctx.leader_only || ctx.fence.valid(now_);
      auto fn = [this, replica, lease, incarnation, ctx,
                 valid_at_spawn](caf::event_based_actor* self) -> caf::behavior {
        if (!procs_[replica].alive || procs_[replica].incarnation != incarnation) {
          // The process is being torn down (kill_proc drains its mailboxes
          // after it died): in a real process no code runs any more.
          self->quit();
          return {};
        }
        probe_instance inst;
        inst.identity = ctx.identity;
        inst.incarnation = incarnation;
        inst.replica = replica;
        inst.module = ctx.name;
        inst.leader_only = ctx.leader_only;
        inst.term = ctx.leader_only ? ctx.fence.term : -1;
        inst.fence = ctx.fence;
        inst.settings = ctx.settings;
        inst.actor = self->id();
        inst.valid_at_spawn = valid_at_spawn;
        auto& chk = chk_[lease];
        chk.started(inst);
        auto index = chk.instances.size() - 1;
        if (ctx.leader_only)
          note(ctx.identity + "/" + ctx.name + " starts, term " + std::to_string(inst.term) + at_lease(lease));
        self->attach_functor([this, lease, index] { chk_[lease].ended(index, now_); });
        auto knobs = std::make_shared<probe_knobs>(parse_knobs(ctx.settings));
        self->set_exit_handler([this, self, knobs, replica](caf::exit_msg& m) {
          if (knobs->hang_on_stop_ms > 0) {
            hung_[{replica, self->id()}] = now_ + std::chrono::milliseconds(knobs->hang_on_stop_ms);
            self->send(self, stop_now_atom::value);
          } else if (knobs->stop_delay_ms > 0) {
            self->delayed_send(self, std::chrono::milliseconds(knobs->stop_delay_ms),
                               stop_now_atom::value);
          } else if (!knobs->ignore_stop) {
            self->quit(m.reason);
          }
        });
        if (knobs->crash_after_ms > 0)
          self->delayed_send(self, std::chrono::milliseconds(knobs->crash_after_ms),
                             crash_atom::value);
        return {
          [self](stop_now_atom) { self->quit(caf::exit_reason::user_shutdown); },
          [self](crash_atom) { self->quit(caf::make_error(caf::sec::runtime_error, "probe crash")); },
          [this, lease, index, knobs](module_settings& ms) {
            *knobs = parse_knobs(ms.settings);
            chk_[lease].instances[index].settings = ms.settings;
          },
          [](leadership_changed&) {},
        };
      };
      return sys.spawn(fn);
    };
    reg.add(std::move(mt));
  }

  /// A process's actor system, on a test coordinator whose clock reads now.
  template <class Process>
  void boot(Process& p) {
    p.cfg = std::make_unique<caf::actor_system_config>();
    p.cfg->set("scheduler.policy", caf::atom("testing"));
    p.cfg->set("logger.file-verbosity", caf::atom("quiet"));
    p.cfg->set("logger.console-verbosity", caf::atom("quiet"));
    p.sys = std::make_unique<caf::actor_system>(*p.cfg);
    p.sched = &dynamic_cast<caf::scheduler::test_coordinator&>(p.sys->scheduler());
    p.sched->clock().current_time = now_;
  }

  void start_proc(std::size_t i) {
    auto& p = procs_[i];
    ++p.incarnation;
    boot(p);
    // Every runner of the process on one transport: with a shared watch,
    // one stream carries every lease (a stream fault hits them all).
    p.transport = spawn_sim_transport(*p.sys, api_, p.identity,
                                      sc_.shared_watch ? sim_watch_sharing::per_namespace
                                                       : sim_watch_sharing::per_subscriber);
    p.runners.clear();
    // Kubernetes: one session per process, which every runner's lease
    // transport goes through (bound or plain, each judges bound records).
    std::optional<lease_backend> bound;
    if (kube_) {
      session_options so;
      so.identity = p.identity;
      so.timings = sc_.timings;
      so.bind = binds(i);
      so.min_bound_duration = std::chrono::ceil<std::chrono::seconds>(sc_.bound_duration);
      bound = bind_to_session(*p.sys, sim_backend(p.transport, api_, p.identity), std::move(so));
      p.session = bound->transport;
    }
    for (std::size_t k = 0; k < leases_.size(); ++k) {
      auto reg = std::make_shared<module_registry>();
      register_probe(*reg, i, k, p.incarnation);
      runner_options o;
      o.identity = p.identity;
      o.lease = leases_[k];
      o.timings = sc_.timings;
      o.supervision = sc_.supervision;
      o.backend = bound ? *bound : sim_backend(p.transport, api_, p.identity);
      o.registry = reg;
      o.modules = make_config(p.knobs[k]);
      o.seed = rng_();
      o.watch = sc_.watch;
      o.compete = !sc_.groups;   // in a group, the group decides
      o.events = [this, i, k](const runtime_event& ev) { on_event(i, k, ev); };
      // The process ends at this instant: its work (every lease's) with it.
      // The teardown of its actor system follows once the current step has
      // returned.
      o.on_fatal = [this, i, k](const std::string& reason) {
        end_work(i);
        note(procs_[i].identity + " fatal exit: " + reason + at_lease(k));
        if (reason.find("illegal state transition") != std::string::npos)
          violation(procs_[i].identity + " defect: " + reason + at_lease(k));   // runner or elector
        fatal_.push_back(i);
      };
      auto res = spawn_runner(*p.sys, std::move(o));
      if (!res.errors.empty()) {
        violation("generator produced an invalid configuration: " + res.errors.front());
        return;
      }
      p.runners.push_back(res.runner);
    }
    if (sc_.groups) {
      balance_group_options g;
      g.identity = p.identity;
      g.ns = leases_.front().ns;
      g.group = "sim-group";
      for (std::size_t k = 0; k < leases_.size(); ++k)
        g.leases.emplace_back(leases_[k].name, p.runners[k]);
      g.membership = spawn_sim_membership(*p.sys, members_, p.identity);
      g.timings = sc_.timings;
      g.settle = sc_.settle;
      p.group = spawn_balance_group(*p.sys, std::move(g));
    } else {
      auto membership = spawn_sim_membership(*p.sys, members_, p.identity);
      for (std::size_t k = 0; k < leases_.size(); ++k) {
        balance_group_options g;
        g.identity = p.identity;
        g.ns = leases_[k].ns;
        g.group = candidate_set_group(leases_[k].name);
        g.leases.emplace_back(leases_[k].name, p.runners[k]);
        g.membership = membership;
        g.timings = sc_.timings;
        g.settle = caf::timespan{0};
        g.assign = false;
        p.sets.push_back(spawn_balance_group(*p.sys, std::move(g)));
      }
    }
    p.alive = true;
    p.paused = false;
    note(p.identity + " process starts (incarnation " + std::to_string(p.incarnation) + ")");
  }

  /// Every module instance of replica i's current process ends now.
  void end_work(std::size_t i) {
    for (auto& chk : chk_)
      for (auto k : std::vector<std::size_t>(chk.live))   // ended() edits the list
        if (chk.instances[k].replica == i && chk.instances[k].incarnation == procs_[i].incarnation)
          chk.ended(k, now_);
  }

  /// Replica i comes back as a new process after `d` (unless it already has).
  void restart_later(std::size_t i, caf::timespan d) {
    later(d, [this, i] {
      if (!procs_[i].alive && !procs_[i].out)
        start_proc(i);
    });
  }

  /// The process dies at once (SIGKILL, OOM, a fatal exit): so does its work.
  void kill_proc(std::size_t i, const std::string& why, bool logged = true) {
    auto& p = procs_[i];
    if (!p.alive)
      return;
    end_work(i);
    if (logged)
      note(p.identity + " process dies: " + why);
    p.alive = false;
    p.paused = false;
    if (p.group)
      caf::anon_send_exit(p.group, caf::exit_reason::kill);
    for (auto& c : p.sets)
      caf::anon_send_exit(c, caf::exit_reason::kill);
    for (auto& r : p.runners)
      caf::anon_send_exit(r, caf::exit_reason::kill);
    caf::anon_send_exit(p.transport, caf::exit_reason::kill);
    if (p.session)
      caf::anon_send_exit(p.session, caf::exit_reason::kill);
    p.sched->run();
    p.runners.clear();
    p.sets.clear();
    p.group = nullptr;
    p.transport = nullptr;
    p.session = nullptr;
    p.sys->await_actors_before_shutdown(false);
    p.sys.reset();
    p.cfg.reset();
    p.sched = nullptr;
    for (auto it = hung_.begin(); it != hung_.end();)
      it = it->first.first == i ? hung_.erase(it) : std::next(it);
  }

  void pause(std::size_t i) {
    auto& p = procs_[i];
    if (!p.alive || p.paused)
      return;
    p.paused = true;
    recheck_all_ = true;
    note(p.identity + " process paused");
  }

  void resume(std::size_t i) {
    auto& p = procs_[i];
    if (!p.alive || !p.paused)
      return;
    p.paused = false;
    recheck_all_ = true;
    p.sched->clock().current_time = now_;
    for (auto& chk : chk_)
      for (auto& inst : chk.instances)
        if (inst.replica == i && inst.incarnation == p.incarnation && inst.leader_only
            && !inst.stopped && !inst.fence.valid(now_))
          inst.stale_since = now_;
    note(p.identity + " process resumed");
    fire_due(*p.sched);
  }

  /// Sends replica i's runner of lease k its configuration.
  void configure(std::size_t i, std::size_t k) {
    auto& p = procs_[i];
    if (p.alive)
      caf::anon_send(p.runners[k], make_config(p.knobs[k]));
  }

  /// Turns a fault knob of replica i's runners of `lease` (-1: every lease)
  /// on (`set(knobs, true)`) for `d`, then off again, sending the changed
  /// configuration each time.
  void knobs_for(std::size_t i, int lease, caf::timespan d,
                 std::function<void(knobs_by_module&, bool)> set) {
    for (auto k : targets(lease)) {
      set(procs_[i].knobs[k], true);
      configure(i, k);
      later(d, [this, i, k, set] {
        set(procs_[i].knobs[k], false);
        configure(i, k);
      });
    }
  }

  // -- scheduling --------------------------------------------------------------

  bool hung(std::size_t i, caf::resumable* job) {
    if (hung_.empty())
      return false;
    auto* a = dynamic_cast<caf::abstract_actor*>(job);
    if (a == nullptr)
      return false;
    auto it = hung_.find({i, a->id()});
    return it != hung_.end() && it->second > now_;
  }

  /// Runs one runnable message, chosen by the seed among all replicas.
  bool step() {
    cands_.clear();
    for (auto& p : procs_) {
      if (!p.alive || p.paused)
        continue;
      for (std::size_t k = 0; k < p.sched->jobs.size(); ++k)
        if (!hung(p.index, p.sched->jobs[k]))
          cands_.emplace_back(p.index, k);
    }
    if (foreign_)   // the foreign peer's process: index procs_.size()
      for (std::size_t k = 0; k < foreign_->sched->jobs.size(); ++k)
        cands_.emplace_back(procs_.size(), k);
    if (cands_.empty())
      return false;
    auto [i, k] = cands_[rng_() % cands_.size()];
    auto* sched = i < procs_.size() ? procs_[i].sched : foreign_->sched;
    auto& jobs = sched->jobs;
    auto* job = jobs[k];
    jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(k));
    jobs.push_front(job);
    sched->run_once();
    ++steps_;
    if (!trace_.empty())
      trace_requests();
    for (auto f : fatal_) {
      kill_proc(f, "fatal exit");
      restart_later(f, 1s);
    }
    fatal_.clear();
    check();
    if (!burst_on_acquire_.empty())
      fire_armed_bursts();
    return true;
  }

  /// LEASEHOLD_SIM_TRACE=<lease name>: every request for that lease that
  /// reached the store goes into the step log (who, what, the answer, the
  /// holder written or read).
  void trace_requests() {
    auto n = api_->request_count();
    if (n == traced_)
      return;
    for (auto& r : api_->requests_since(traced_))
      if (r.lease == "default/" + trace_)
        note("store: " + r.client + " " + r.verb + " " + trace_ + " -> "
             + (r.result == error_kind::none ? std::string("ok") : to_string(r.result))
             + (r.holder.empty() ? std::string{} : " holder " + r.holder));
    traced_ = n;
  }

  /// Disable, disable again (other settings), re-enable, `gap` apart.
  void config_burst(std::size_t i, std::size_t k, caf::timespan gap) {
    procs_[i].knobs[k].leader_only_enabled = false;
    configure(i, k);
    later(gap, [this, i, k] {
      ++procs_[i].knobs[k].side.value;
      configure(i, k);
    });
    later(2 * gap, [this, i, k] {
      procs_[i].knobs[k].leader_only_enabled = true;
      configure(i, k);
    });
  }

  /// Fires each armed burst once its replica's acquire write (a PUT or POST
  /// naming it) has reached the store.
  void fire_armed_bursts() {
    auto fresh = api_->requests_since(requests_seen_);
    requests_seen_ += fresh.size();
    for (auto& r : fresh) {
      if (r.result != error_kind::none || (r.verb != "PUT" && r.verb != "POST"))
        continue;
      for (auto it = burst_on_acquire_.begin(); it != burst_on_acquire_.end(); ++it) {
        auto [i, k] = it->first;
        auto& p = procs_[i];
        if (r.client == p.identity && r.holder == p.identity && r.lease == leases_[k].to_string()
            && p.alive && !current_leader_is(i, k)) {
          auto gap = it->second;
          burst_on_acquire_.erase(it);
          note(p.identity + " config burst at its acquire write" + at_lease(k));
          config_burst(i, k, gap);
          break;
        }
      }
    }
  }

  bool current_leader_is(std::size_t i, std::size_t k) {
    auto l = current_leader(k);
    return l && *l == i;
  }

  void fire_due(caf::scheduler::test_coordinator& sched) {
    auto& clk = sched.clock();
    clk.current_time = now_;
    for (int guard = 0; guard < 100'000; ++guard) {
      if (clk.schedule().empty() || clk.schedule().begin()->first > now_)
        break;
      clk.trigger_timeout();
    }
  }

  void advance(time_point to) {
    now_ = to;
    // The store's clock first: a key whose TTL ran out is gone before any
    // timer due at the same instant fires.
    if (etcd_ && etcd_->expire_due())
      check();
    for (auto& p : procs_)
      if (p.alive && !p.paused)
        fire_due(*p.sched);
    if (foreign_)
      fire_due(*foreign_->sched);
    for (auto it = hung_.begin(); it != hung_.end();)
      it = it->second <= now_ ? hung_.erase(it) : std::next(it);
  }

  /// Checks every lease whose work or record may have changed since its
  /// last check (every lease once a process paused or resumed): the others'
  /// verdicts stand. Time alone changes none (a fence only expires, which
  /// ends no rule's exemption; a lease with a stale instance, which the
  /// stale rule judges by time, is checked every step).
  void check() {
    if (!delete_next_take_.empty())
      fire_armed_deletes();
    if (auto v = api_->last_version(); v != seen_version_) {
      for (auto& c : api_->changes_since({leases_.front().ns, ""}, seen_version_))
        if (auto it = lease_index_.find(c.key.name); it != lease_index_.end())
          chk_[it->second].dirty = true;
      seen_version_ = v;
    }
    // Every request too: an etcd renew (a keepalive) changes no record but
    // extends the fence the stale rule reads.
    // A create that named no holder and succeeded is a standby's unheld
    // create: the checker learns it from the store's log of who wrote
    // what, not from the record's encoding, which the code under test reads.
    if (auto n = api_->request_count(); n != seen_requests_) {
      for (auto& r : api_->requests_since(seen_requests_))
        if (auto slash = r.lease.find('/'); slash != std::string::npos)
          if (auto it = lease_index_.find(r.lease.substr(slash + 1)); it != lease_index_.end()) {
            chk_[it->second].dirty = true;
            if (r.verb == "POST" && r.result == error_kind::none && r.holder.empty()
                && r.client != "operator")
              chk_[it->second].unheld_created_at = now_;
          }
      seen_requests_ = n;
    }
    auto paused = [this](std::size_t r) { return is_paused(r); };
    for (std::size_t k = 0; k < chk_.size(); ++k)
      chk_[k].track_fences();
    for (std::size_t k = 0; k < chk_.size(); ++k)
      if (recheck_all_ || chk_[k].dirty)
        chk_[k].check(paused, api_->peek(leases_[k]));
    recheck_all_ = false;
  }

  void later(caf::timespan d, std::function<void()> f) {
    timed_.emplace(now_ + d, std::move(f));
  }

  // -- operations ----------------------------------------------------------------

  /// The replica running lease k's leader-only work (none, or two: nullopt).
  std::optional<std::size_t> current_leader(std::size_t k) {
    auto w = leader_name(k);
    if (!w)
      return std::nullopt;
    for (auto& p : procs_)
      if (p.identity == *w)
        return p.index;
    return std::nullopt;   // none, or the foreign peer
  }

  /// Who runs lease k's leader-only work (a replica or the foreign peer;
  /// none, or two: nullopt).
  std::optional<std::string> leader_name(std::size_t k) {
    auto w = chk_[k].working([this](std::size_t r) { return is_paused(r); });
    if (w.size() != 1)
      return std::nullopt;
    return w[0];
  }

  /// Replica r is paused (the foreign peer, r = procs_.size(), never is).
  bool is_paused(std::size_t r) const { return r < procs_.size() && procs_[r].paused; }

  /// The record is bound to a session: its annotation's term (the last
  /// field) is its leaseTransitions (kube_session.hpp).
  static bool bound_record(const lease& l) {
    auto* a = l.raw.is_object() ? &l.raw : nullptr;
    if (!a || !a->contains("metadata") || !(*a)["metadata"].contains("annotations"))
      return false;
    auto& notes = (*a)["metadata"]["annotations"];
    auto it = notes.find(session_annotation);
    if (it == notes.end() || !it->is_string())
      return false;
    auto text = it->get<std::string>();
    return text.substr(text.rfind('/') + 1) == std::to_string(l.spec.lease_transitions);
  }

  /// Replica i binds the leases it takes to its session (scenario::bind).
  bool binds(std::size_t i) const { return i < sc_.bind.size() && sc_.bind[i]; }

  /// Asks replica i's live runner of lease k `msg`, running the cluster
  /// (without moving time) until it answers with a T.
  template <class T, class Msg>
  std::optional<T> ask(std::size_t i, std::size_t k, Msg msg) {
    auto& p = procs_[i];
    if (!p.alive || p.paused)
      return std::nullopt;
    caf::scoped_actor self{*p.sys};
    self->send(caf::actor_cast<caf::actor>(p.runners[k]), msg);
    for (int guard = 0; guard < 100'000 && self->mailbox().empty(); ++guard)
      if (!step())
        break;
    std::optional<T> out;
    if (!self->mailbox().empty())
      self->receive([&](T& x) { out = std::move(x); }, [&](caf::error&) {});
    return out;
  }

  std::optional<runner_status> status(std::size_t i, std::size_t k) {
    return ask<runner_status>(i, k, get_status_atom::value);
  }

  void apply(const op& o) {
    auto i = o.replica % procs_.size();
    auto& p = procs_[i];
    auto ks = targets(o.lease);
    if (etcd_ && (o.kind == op_kind::session_write || o.kind == op_kind::foreign))
      return;   // Kubernetes only
    note("op " + o.describe());
    switch (o.kind) {
      case op_kind::api_down:
      case op_kind::api_hang:
      case op_kind::api_errors:
        api_->set_fault(o.kind == op_kind::api_down   ? sim_fault::down
                        : o.kind == op_kind::api_hang ? sim_fault::hang
                                                      : sim_fault::error,
                        {}, o.param == 0 ? 503 : o.param);
        members_->partition("", true);   // the group's announcements go to the same store
        later(o.duration, [this] {
          api_->set_fault(sim_fault::none, {});
          members_->partition("", false);
        });
        break;
      case op_kind::api_latency:
        api_->set_latency(std::chrono::milliseconds(o.param));
        later(o.duration, [this] { api_->set_latency(caf::timespan{0}); });
        break;
      case op_kind::partition:
      case op_kind::partition_hang: {
        auto who = p.identity;
        api_->set_fault(o.kind == op_kind::partition ? sim_fault::down : sim_fault::hang, who);
        members_->partition(who, true);
        later(o.duration, [this, who] {
          api_->set_fault(sim_fault::none, who);
          members_->partition(who, false);
        });
        break;
      }
      case op_kind::wipe:
        // etcd: a store that loses its data is a documented limit (a
        // restored backup hands revisions out again; docs/safety.md), not a
        // fault to survive. The nearest fault etcd does survive is a raft
        // leader change: every lease gets its full TTL again.
        if (etcd_) {
          etcd_->leader_change();
        } else {
          kube_->wipe();
          for (auto& chk : chk_)
            chk.last_wipe = now_;
        }
        break;
      case op_kind::elector_kill:
        for (auto k : ks)
          if (auto e = ask<elector_handle>(i, k, get_elector_atom::value); e && *e) {
            note(p.identity + " elector killed" + at_lease(k));
            caf::anon_send_exit(*e, caf::exit_reason::kill);
          }
        break;
      case op_kind::crash_loop:
        knobs_for(i, o.lease, o.duration, [ms = o.param](knobs_by_module& k, bool on) {
          k.work.crash_after_ms = on ? ms : 0;
        });
        break;
      case op_kind::module_hang:
        for (auto k : ks)
          for (auto& inst : chk_[k].instances)
            if (inst.replica == i && inst.incarnation == p.incarnation && inst.leader_only
                && !inst.stopped && p.alive)
              hung_[{i, inst.actor}] = now_ + std::chrono::milliseconds(o.param);
        break;
      case op_kind::stubborn_module: {
        // param 0: "work" ignores stops; 1: "side" hangs on stop; 2: both;
        // 3, 4: as 1, 2, and "side" alone is switched off 100 ms later, so
        // it hangs while its replica goes on leading with "work".
        int kind = o.param > 2 ? o.param - 2 : o.param;
        int hang = kind >= 1 ? static_cast<int>(ms(o.duration)) + 1 : 0;
        knobs_for(i, o.lease, o.duration, [ignore = kind != 1, hang](knobs_by_module& k, bool on) {
          k.work.ignore_stop = on && ignore;
          k.side.hang_on_stop_ms = on ? hang : 0;
        });
        if (o.param > 2)
          later(100ms, [this, i, l = o.lease, d = o.duration] {
            knobs_for(i, l, d, [](knobs_by_module& k, bool on) { k.side_off = on; });
          });
        break;
      }
      case op_kind::slow_module:
        knobs_for(i, o.lease, o.duration, [delay = o.param](knobs_by_module& k, bool on) {
          k.work.stop_delay_ms = on ? delay : 0;
        });
        break;
      case op_kind::disable:
        // param 0: every leader-only module; 1: only "work"; 2: only "side"
        // (a partial disable: the replica keeps leading with the other).
        knobs_for(i, o.lease, o.duration, [which = o.param](knobs_by_module& k, bool on) {
          if (which == 1)
            k.work_off = on;
          else if (which == 2)
            k.side_off = on;
          else
            k.leader_only_enabled = !on;
        });
        break;
      case op_kind::enable:
        for (auto k : ks) {
          p.knobs[k].leader_only_enabled = true;
          p.knobs[k].work_off = p.knobs[k].side_off = false;
          configure(i, k);
        }
        break;
      case op_kind::change_value:
        for (auto k : ks) {
          ++p.knobs[k].work.value;
          configure(i, k);
        }
        break;
      case op_kind::config_burst:
        // An odd gap: the burst waits for the replica's next acquire write
        // to land and fires while its answer is on the way back (the
        // window in which an old elector's late reply meets a new elector).
        for (auto k : ks) {
          if (o.param % 2 == 1) {
            if (burst_on_acquire_.empty())
              requests_seen_ = api_->request_count();   // only writes from now on
            burst_on_acquire_[{i, k}] = std::chrono::milliseconds(o.param / 8);
            // Disarmed when its window ends: quiet windows stay quiet.
            auto id = ++burst_arms_;
            burst_arm_id_[{i, k}] = id;
            later(o.duration, [this, i, k, id] {
              if (burst_arm_id_[{i, k}] == id)
                burst_on_acquire_.erase({i, k});
            });
          }
          else
            config_burst(i, k, std::chrono::milliseconds(o.param));
        }
        break;
      case op_kind::pause:
        pause(i);
        later(o.duration, [this, i] { resume(i); });
        break;
      case op_kind::crash:
        kill_proc(i, "crash");
        restart_later(i, o.duration);
        break;
      case op_kind::restart:
        if (procs_[i].out)
          break;   // a replica that left the group stays out until it joins
        kill_proc(i, "restart");
        start_proc(i);
        break;
      case op_kind::graceful_shutdown: {
        std::size_t target = i;
        if (o.param == -1) {   // the leader of the op's lease
          auto l = current_leader(ks.front());
          if (!l)
            break;
          target = *l;
        }
        auto& t = procs_[target];
        if (!t.alive || t.paused)
          break;
        note(t.identity + " shuts down gracefully");
        if (t.group)   // leave_group: withdraw, then every runner releases
          caf::anon_send(t.group, shutdown_atom::value);
        for (auto& c : t.sets)   // every lease it holds: withdraw as its runner releases
          caf::anon_send(c, shutdown_atom::value);
        // The process exits once its runner is done (or at this bound), then
        // comes back as a new incarnation.
        later(o.duration, [this, target] {
          kill_proc(target, "exit after shutdown");
          restart_later(target, 1s);
        });
        break;
      }
      case op_kind::heal:
        heal();
        break;
      case op_kind::yield: {   // the leader of the op's lease yields that lease
        auto k = ks.front();
        auto l = current_leader(k);
        if (!l || procs_[*l].paused)
          break;
        std::string to = o.param < 0   ? std::string()
                         : o.param == 7 ? std::string("replica-gone")
                                        : procs_[static_cast<std::size_t>(o.param) % procs_.size()].identity;
        note(procs_[*l].identity + " yields to " + (to.empty() ? "anyone" : to) + at_lease(k));
        caf::anon_send(procs_[*l].runners[k], yield_atom::value, to);
        break;
      }
      case op_kind::join:
        if (auto j = pick_slot(i, true))
          join_group(*j);
        break;
      case op_kind::leave:
        if (auto j = pick_slot(i, false))
          leave_group(*j);
        break;
      case op_kind::kill:
        if (auto j = pick_slot(i, false)) {
          auto before = group_members().size();
          kill_proc(*j, "killed (it leaves the group unannounced)");
          procs_[*j].out = true;
          group_changed(*j, false, before);
        }
        break;
      case op_kind::flap: {   // joins and leaves `param` times, `duration` apart
        // In a quiet window a replica out of the group flaps (none: no
        // flap): no membership change for the judge, whose no-churn rule
        // then says the hysteresis held.
        auto j = in_quiet_ ? pick_slot(i, true) : std::optional<std::size_t>(i);
        for (int n = 0; j && n < o.param; ++n) {
          later(2 * n * o.duration, [this, j = *j] {
            if (procs_[j].out)
              join_group(j, false);
          });
          later((2 * n + 1) * o.duration, [this, j = *j] {
            if (procs_[j].alive && !procs_[j].out && !procs_[j].paused)
              leave_group(j, false);
          });
        }
        break;
      }
      case op_kind::prefer: {
        auto k = ks.front();
        std::string to = o.param < 0   ? std::string()
                         : o.param == 7 ? std::string("replica-gone")
                                        : procs_[static_cast<std::size_t>(o.param) % procs_.size()].identity;
        if (kube_) {   // kubectl patch: preferredHolder (and a strategy, as the API asks)
          auto rec = kube_->peek(leases_[k]);
          if (!rec)
            break;
          rec->spec.preferred_holder = to;
          rec->spec.strategy = to.empty() ? std::string() : "OldestEmulationVersion";
          note("preferredHolder := " + (to.empty() ? std::string("(none)") : to) + at_lease(k));
          kube_->update("kubectl", *rec);
        } else if (etcd_) {   // a follower's yield put on the holder's key (leasehold yield)
          note("preferredHolder := " + (to.empty() ? std::string("(none)") : to) + at_lease(k)
               + " (put keeping the key's etcd lease)");
          etcd_->outside_prefer(leases_[k], to);
        }
        break;
      }
      case op_kind::session_write:
        session_write(p.identity, o.param);
        break;
      case op_kind::foreign:
        start_foreign(ks.front(), o.duration);
        break;
      case op_kind::outside_write:
        if (o.param == 2) {
          // Armed: the next term taken on each lease within `duration` is
          // deleted at once (an operator deleting a fresh take).
          for (auto k : ks) {
            auto rec = api_->peek(leases_[k]);
            delete_next_take_[k] = {now_ + o.duration, rec ? rec->spec.lease_transitions : -1};
          }
          break;
        }
        outside_write(ks, o.param);
        break;
      case op_kind::stream_cut:
      case op_kind::stream_gone:
      case op_kind::stream_replay:
      case op_kind::stream_delay:
        if (p.alive)
          inject_stream_fault(p.transport,
                              o.kind == op_kind::stream_cut      ? sim_stream_fault::cut
                              : o.kind == op_kind::stream_gone   ? sim_stream_fault::gone
                              : o.kind == op_kind::stream_replay ? sim_stream_fault::stale_replay
                                                                 : sim_stream_fault::delay,
                              o.duration, o.param);
        break;
    }
  }

  /// A write from outside the protocol on leases `ks`: param 0 deletes the
  /// object, 1 cancels the holder's claim (op_kind::outside_write).
  void outside_write(const std::vector<std::size_t>& ks, int param) {
    {
        // etcd: revoking a key's lease revokes its replica's session lease,
        // so every key of that replica goes (sim_etcd.hpp).
        auto hit = ks;
        if (etcd_ && param == 1)
          for (auto k : ks)
            for (auto& other : etcd_->keys_sharing_lease(leases_[k]))
              for (std::size_t j = 0; j < leases_.size(); ++j)
                if (leases_[j] == other && std::find(hit.begin(), hit.end(), j) == hit.end())
                  hit.push_back(j);
        for (auto k : hit) {   // every term it ends, before it ends them
          auto& chk = chk_[k];
          chk.outside_write = true;
          chk.dirty = true;   // the next check clears the flag
          if (auto rec = api_->peek(leases_[k]))
            chk.outside_ended_term = rec->spec.lease_transitions;
        }
        for (auto k : ks) {
          auto& chk = chk_[k];
          if (param == 1) {
            api_->outside_revoke(leases_[k]);
          } else {
            api_->outside_delete(leases_[k]);
            // A deleted Lease takes its term history with it, as a wipe does
            // (docs/safety.md, Known limits): a replica that never saw the
            // last term may number its own the same. Terms never overlap.
            if (kube_)
              chk.last_wipe = now_;
          }
        }
    }
  }

  /// An armed outside delete (outside_write param 2): a lease whose record
  /// names a holder in a term other than the one at arming is deleted now.
  void fire_armed_deletes() {
    for (auto& [k, arm] : delete_next_take_) {
      if (!arm.first)
        continue;
      if (now_ > *arm.first) {
        arm.first.reset();
        continue;
      }
      auto rec = api_->peek(leases_[k]);
      if (rec && !rec->spec.holder_identity.empty() && rec->spec.lease_transitions != arm.second) {
        arm.first.reset();
        note("an operator deletes " + leases_[k].name + " (term "
             + std::to_string(rec->spec.lease_transitions) + ") right after its take");
        outside_write({k}, 0);
      }
    }
  }

  void heal() {
    api_->clear_faults();
    delete_next_take_.clear();
    members_->heal();
    api_->set_latency_jitter(sc_.base_latency, sc_.seed + steps_);
    hung_.clear();
    timed_.clear();
    for (auto& p : procs_) {
      std::fill(p.knobs.begin(), p.knobs.end(), knobs_by_module{});
      if (p.out) {   // left the group: its process has exited (or does now)
        kill_proc(p.index, "exit after leaving the group");
        continue;
      }
      if (!p.alive) {
        start_proc(p.index);
        continue;
      }
      resume(p.index);
      for (std::size_t k = 0; k < leases_.size(); ++k)
        configure(p.index, k);
      if (stream_faults_)   // only then: a message more would change every other seed's run
        inject_stream_fault(p.transport, sim_stream_fault::none);
    }
  }

  // -- Kubernetes sessions: operators' writes, a peer that is not leasehold --------

  /// An operator's write to `identity`'s session Lease (op_kind::session_write):
  /// 0 deletes it, 1 empties its holder (kubectl patch keeps the rest), 2
  /// edits a label only (its resourceVersion moves, its spec stays).
  void session_write(const std::string& identity, int param) {
    lease_key key{leases_.front().ns, session_lease_name(identity)};
    auto rec = kube_->peek(key);
    if (!rec)
      return;
    note("an operator " + std::string(param == 0 ? "deletes" : param == 1 ? "empties the holder of" : "relabels")
         + " " + key.name);
    if (param == 0) {
      kube_->outside_delete(key);
    } else if (param == 1) {
      kube_->outside_revoke(key);
    } else {
      rec->raw["metadata"]["labels"]["sim.leasehold.io/touched"] = std::to_string(++touches_);
      kube_->update("operator", *rec);
    }
  }

  /// The peer that is not leasehold (op_kind::foreign), a process of its own
  /// on the store (client "foreign", under the store's faults), with
  /// client-go's rule (tools/leaderelection): it reads the Lease every retry
  /// period; a record is held until its own leaseDurationSeconds after the
  /// peer last saw its spec change (observedTime: client-go compares the
  /// spec alone, so a metadata-only write is no sign of life); a released or
  /// expired record it takes by a PUT on the version read (leaseTransitions
  /// + 1, labels and annotations kept); as holder it renews by a PUT every
  /// retry period, and its term, and its work, end renew_deadline after its
  /// last successful renew's send. It never releases.
  /// One departure: client-go takes an absent Lease, or one whose holder an
  /// operator emptied, at once, beside the old holder's running work, whoever
  /// that holder is (a store's loss and an operator's write are known limits
  /// with such readers, docs/safety.md); this peer waits both out a lease
  /// duration, as leasehold does, so that the wipes and outside writes of a
  /// scenario judge the rest.
  struct outsider {
    std::unique_ptr<caf::actor_system_config> cfg;
    std::unique_ptr<caf::actor_system> sys;
    caf::scheduler::test_coordinator* sched = nullptr;
    lease_transport_actor transport;
    caf::actor elector;
    std::size_t lease = 0;
    std::optional<time_point> retire_at;   // it stops competing then (its term runs out)
    bool retired = false;
    std::optional<leasehold::lease> latest;   // the object last read or written: a PUT's base
    std::optional<lease_spec> observed;    // client-go's observedRecord
    time_point observed_time{};
    bool busy = false;                     // an attempt in flight
    std::optional<std::size_t> work;       // its probe in chk_[lease] while its term runs
    fencing_token fence;
    std::optional<time_point> took_at;     // its latest take
    std::optional<time_point> absent_since;   // it found the Lease absent since
  };

  void start_foreign(std::size_t k, caf::timespan duration) {
    if (foreign_ && !foreign_->retired)
      return;
    if (!foreign_) {
      foreign_ = std::make_unique<outsider>();
      auto& f = *foreign_;
      boot(f);
      f.transport = spawn_sim_transport(*f.sys, api_, "foreign");
      f.elector = f.sys->spawn([this](caf::event_based_actor* self) -> caf::behavior {
        return {
          [this, self](foreign_tick_atom) {
            auto& f = *foreign_;
            if (f.retire_at && now_ >= *f.retire_at) {
              f.retired = true;
              note("foreign stops competing" + at_lease(f.lease));
              return;
            }
            if (!f.busy)
              foreign_attempt(self);
            self->delayed_send(self, sc_.timings.retry_period, foreign_tick_atom::value);
          },
          [this](foreign_deadline_atom) { foreign_deadline(); },
        };
      });
    }
    auto& f = *foreign_;
    f.lease = k;
    f.retired = false;
    f.retire_at = duration.count() > 0 ? std::optional<time_point>(now_ + duration) : std::nullopt;
    f.observed.reset();   // a new process: it has seen nothing yet
    f.latest.reset();
    f.absent_since.reset();
    note("foreign competes" + at_lease(k));
    caf::anon_send(f.elector, foreign_tick_atom::value);
  }

  bool foreign_is_leader() const {
    return foreign_->observed && foreign_->observed->holder_identity == "foreign";
  }

  /// client-go's isLeaseValid: the record it observed, a lease duration (the
  /// record's) after it saw it change.
  bool foreign_sees_held() const {
    auto& f = *foreign_;
    return f.observed
           && now_ < f.observed_time + std::chrono::seconds(f.observed->lease_duration_seconds.value_or(0));
  }

  /// The record the peer writes over `base`: a renew (its own term kept) or a take.
  lease foreign_record(lease base, bool renew) {
    auto at = wall_time{std::chrono::hours(24 * 365 * 56)}
              + std::chrono::duration_cast<std::chrono::microseconds>(now_ - start_);
    lease_spec s;
    s.holder_identity = "foreign";
    s.lease_duration_seconds = duration_seconds(sc_.timings.lease_duration);
    s.renew_time = at;
    s.acquire_time = renew ? base.spec.acquire_time : at;
    s.lease_transitions = base.spec.lease_transitions + (renew ? 0 : 1);
    base.spec = s;
    return base;
  }

  void foreign_done() { foreign_->busy = false; }

  /// tryAcquireOrRenew: the fast path (the holder's PUT on the object it
  /// last wrote), else a GET, then a POST when absent or a PUT when free,
  /// expired or its own.
  void foreign_attempt(caf::event_based_actor* self) {
    auto& f = *foreign_;
    f.busy = true;
    if (foreign_is_leader() && foreign_sees_held() && f.latest)
      foreign_write(self, foreign_record(*f.latest, true), false, true);
    else
      foreign_read(self);
  }

  void foreign_read(caf::event_based_actor* self) {
    auto& f = *foreign_;
    self->request(caf::actor_cast<caf::actor>(f.transport), sc_.timings.effective_request_timeout(),
                  get_lease_atom::value, leases_[f.lease])
      .then(
        [this, self](lease_reply& r) {
          auto& f = *foreign_;
          if (f.retired)
            return foreign_done();
          if (!r.ok()) {
            if (r.kind() != error_kind::not_found)
              return foreign_done();
            if (!f.absent_since)
              f.absent_since = now_;
            auto wait = std::chrono::seconds(std::max(duration_seconds(sc_.timings.lease_duration),
                                                      f.observed ? f.observed->lease_duration_seconds.value_or(0) : 0));
            if (now_ < *f.absent_since + wait)
              return foreign_done();
            lease l;
            l.name = leases_[f.lease].name;
            l.ns = leases_[f.lease].ns;
            return foreign_write(self, foreign_record(l, false), true, false);
          }
          auto& rec = *r.value;
          f.latest = rec;
          f.absent_since.reset();
          if (!f.observed || *f.observed != rec.spec) {
            f.observed = rec.spec;
            f.observed_time = now_;
          }
          if (!released_record(rec.spec) && foreign_sees_held() && !foreign_is_leader())
            return foreign_done();
          foreign_write(self, foreign_record(rec, foreign_is_leader()), false, false);
        },
        [this](caf::error&) { foreign_done(); });
  }

  /// A POST (create) or a PUT; `fast`: the holder's optimistic renew, which
  /// falls back to a read when it fails.
  void foreign_write(caf::event_based_actor* self, lease l, bool create, bool fast) {
    auto& f = *foreign_;
    auto sent = now_;
    auto on_reply = [this, self, sent, fast](lease_reply& r) {
      auto& f = *foreign_;
      if (f.retired)
        return foreign_done();
      if (!r.ok())
        return fast ? foreign_read(self) : foreign_done();
      f.latest = *r.value;
      f.observed = r.value->spec;
      f.observed_time = now_;
      foreign_term(self, sent, r.value->spec.lease_transitions);
      foreign_done();
    };
    auto on_error = [this, self, fast](caf::error&) { fast ? foreign_read(self) : foreign_done(); };
    auto to = caf::actor_cast<caf::actor>(f.transport);
    auto rt = sc_.timings.effective_request_timeout();
    if (create)
      self->request(to, rt, create_lease_atom::value, std::move(l)).then(on_reply, on_error);
    else
      self->request(to, rt, update_lease_atom::value, std::move(l)).then(on_reply, on_error);
  }

  /// A write that named it holder succeeded (sent at `sent`): its term runs
  /// until renew_deadline after that send (a new term when it had none or
  /// the record's term changed).
  void foreign_term(caf::event_based_actor* self, time_point sent, std::int64_t term) {
    auto& f = *foreign_;
    auto until = sent + sc_.timings.renew_deadline;
    if (until <= now_)
      return;   // answered too late to work on
    auto& chk = chk_[f.lease];
    if (f.work && (!f.fence.valid(now_) || f.fence.term != term))
      foreign_end("its record's term changed");
    if (!f.work) {
      f.fence = fencing_token{};
      f.fence.lease = leases_[f.lease];
      f.fence.identity = "foreign";
      f.fence.term = term;
      probe_instance inst;
      inst.identity = "foreign";
      inst.replica = procs_.size();
      inst.module = "work";
      inst.foreign = true;
      inst.term = term;
      inst.fence = f.fence;
      inst.settings = nlohmann::json::object();
      f.fence.valid_until->store(until.time_since_epoch().count());
      chk.started(inst);
      f.work = chk.instances.size() - 1;
      f.took_at = now_;
      ++foreign_takes_;
      note("foreign/work starts, term " + std::to_string(term) + at_lease(f.lease));
    }
    f.fence.valid_until->store(std::max(f.fence.valid_until->load(), until.time_since_epoch().count()));
    self->delayed_send(self, until - now_, foreign_deadline_atom::value);
  }

  /// No renew succeeded within the renew deadline of the last one's send:
  /// its term has ended (its work with it, the checker's working() says so
  /// from that instant); as a new elector it has seen nothing.
  void foreign_deadline() {
    auto& f = *foreign_;
    if (f.work && !f.fence.valid(now_)) {
      foreign_end("no renew succeeded within the renew deadline");
      f.observed.reset();
      f.latest.reset();
    }
  }

  void foreign_end(const std::string& why) {
    auto& f = *foreign_;
    chk_[f.lease].ended(*f.work, now_);
    f.work.reset();
    note("foreign/work stops, term " + std::to_string(f.fence.term) + ": " + why + at_lease(f.lease));
  }

  // -- balance groups ---------------------------------------------------------------

  /// The live members of the group: processes running, in it, not paused.
  std::set<std::size_t> group_members() const {
    std::set<std::size_t> out;
    for (auto& p : procs_)
      if (p.alive && !p.out && !p.paused && p.group)
        out.insert(p.index);
    return out;
  }

  /// From replica `from` on (cyclically), the first one out of the group
  /// (`out`) or the first live member (!`out`).
  std::optional<std::size_t> pick_slot(std::size_t from, bool out) const {
    for (std::size_t n = 0; n < procs_.size(); ++n) {
      auto& p = procs_[(from + n) % procs_.size()];
      if (out ? p.out : (p.alive && !p.out && !p.paused))
        return p.index;
    }
    return std::nullopt;
  }

  /// A membership change: the judge weighs the moves it causes (quiet
  /// windows only).
  void group_changed(std::size_t who, bool join, std::size_t before) {
    if (in_quiet_)
      judge_.change(now_, who, join, before);
  }

  /// Replica i joins: a new process (its group announces it). `change`:
  /// the judge weighs it as a membership change (a flap is not one).
  void join_group(std::size_t i, bool change = true) {
    auto before = group_members().size();
    auto& p = procs_[i];
    p.out = false;
    if (p.alive)   // still exiting after a leave
      kill_proc(i, "exit after leaving the group");
    note(p.identity + " joins the group");
    start_proc(i);
    if (change)
      group_changed(i, true, before);
  }

  /// Replica i leaves cleanly (leave_group: withdraw, then every runner
  /// releases), then its process exits and stays out until a join.
  void leave_group(std::size_t i, bool change = true) {
    auto before = group_members().size();
    auto& p = procs_[i];
    p.out = true;
    note(p.identity + " leaves the group");
    caf::anon_send(p.group, shutdown_atom::value);
    auto& t = sc_.timings;
    auto bound = t.module_stop_timeout + t.release_timeout + 2 * t.effective_request_timeout() + 1s;
    later(bound, [this, i, inc = p.incarnation] {
      if (procs_[i].out && procs_[i].incarnation == inc)
        kill_proc(i, "exit after leaving the group");
    });
    if (change)
      group_changed(i, false, before);
  }

  // -- events and liveness ----------------------------------------------------------

  void on_event(std::size_t i, std::size_t k, const runtime_event& ev) {
    auto& who = procs_[i].identity;
    auto where = at_lease(k);
    auto& l = live_[k];
    switch (ev.type) {
      case event_type::term_acquired:
        note(who + " acquired term " + std::to_string(ev.term) + where);
        break;
      case event_type::term_lost:
        note(who + " lost term " + std::to_string(ev.term) + ": " + ev.reason + where);
        if (in_quiet_ && l.quiet_leader_at)
          l.lost_in_quiet = who + " lost its term while no fault was active: " + ev.reason;
        break;
      case event_type::lease_released:
        note(who + " released the lease" + where);
        if (in_quiet_)
          l.released_at = chk_[k].last_release.value_or(now_);   // when the store freed it
        break;
      case event_type::outside_write:
        note(who + " saw an outside write: " + ev.reason + where);
        break;
      case event_type::voluntary_handover:
        // A group or a candidate set names only its live members as
        // successors: a yield or a preferredHolder naming another moves
        // nothing (docs/balance.md, docs/operations.md).
        if (ev.holder == "replica-gone")
          violation(who + " handed" + where + " over to replica-gone, which announces none of its leases");
        break;
      case event_type::module_killed:
        if (ev.leader_only)
          note(who + "/" + ev.module + " killed: " + ev.reason + where);
        break;
      case event_type::watch_changed:
        // The multi-lease world shows what its shared stream told each lease.
        if (leases_.size() > 1)
          note(who + " watch " + ev.detail + (ev.reason.empty() ? "" : ": " + ev.reason) + where);
        break;
      default:
        break;
    }
  }

  time_point next_liveness_deadline(std::size_t q) const {
    auto [b, e] = sc_.quiet[q];
    if (!in_quiet_)
      return start_ + b;
    if (sc_.groups)   // the group judge keeps its own deadlines
      return start_ + e;
    auto next = time_point::max();
    for (auto& l : live_) {
      if (!l.quiet_leader_at)
        next = std::min({next, start_ + e, start_ + b + liveness_bound(sc_.timings, sc_.backend)});
      else if (l.released_at)
        next = std::min(next, *l.released_at + handover_bound());
      else
        next = std::min(next, start_ + e);
    }
    return next;
  }

  /// At a quiet window's end a follower knows a holder that renews as
  /// current. On Kubernetes each renew is seen within a retry period (a new
  /// version streamed or polled, or the session read twice a period); etcd
  /// renews change nothing, so a follower only knows it within a lease
  /// duration (never "unknown").
  void follower_view(const std::string& identity, std::size_t k,
                     const std::optional<runner_status>& st) {
    auto leads = current_leader(k);   // a replica: the foreign peer is judged by no view
    if (!st || st->state != runner_state::follower || !leads)
      return;
    auto& leader = procs_[*leads].identity;
    auto& t = sc_.timings;
    if (st->holder != leader || chk_[k].acquisitions.back().at + t.lease_duration > now_)
      return;   // another holder in its view, or a term younger than what it judges by
    auto bound = kube_ ? 2 * t.retry_period : t.lease_duration;
    if (st->holder_age_ms > ms(bound))
      violation(identity + " saw its holder " + leader + " last "
                + std::to_string(st->holder_age_ms) + "ms ago, though it renews (at most "
                + std::to_string(ms(bound)) + "ms)" + at_lease(k));
  }

  caf::timespan handover_bound() const {
    auto& t = sc_.timings;
    return std::chrono::duration_cast<caf::timespan>(t.retry_period * 1.2)
           + 2 * t.effective_request_timeout() + 2 * sc_.base_latency;
  }

  /// In quiet windows, for every lease: a leader within the bound; then it
  /// keeps leading (no term lost) unless it is shut down, and then a
  /// successor takes the released lease within one poll.
  void liveness(std::size_t& q) {
    if (q >= sc_.quiet.size())
      return;
    auto [b, e] = sc_.quiet[q];
    if (!in_quiet_) {
      if (now_ < start_ + b)
        return;
      in_quiet_ = true;
      quiet_requests_ = api_->request_count();
      std::fill(live_.begin(), live_.end(), lease_liveness{});
      if (sc_.groups)   // what the chaos left behind is judged by the liveness bound
        judge_.begin(start_ + b + liveness_bound(sc_.timings, sc_.backend));
    }
    auto bound = liveness_bound(sc_.timings, sc_.backend);
    if (sc_.groups) {   // the group's rules replace the single leader's (sim_groups.hpp)
      std::vector<std::optional<std::size_t>> leaders;
      for (std::size_t k = 0; k < live_.size(); ++k)
        leaders.push_back(current_leader(k));
      judge_.observe(now_, leaders, group_members());
    }
    for (std::size_t k = 0; k < live_.size() && !sc_.groups; ++k) {
      auto& l = live_[k];
      if (l.quiet_leader_at && !l.released_at && l.lost_in_quiet.empty())
        continue;   // led, and nothing to judge
      auto leader = leader_name(k);   // the foreign peer leads too
      if (!l.quiet_leader_at && leader) {
        l.quiet_leader_at = now_;
        note("liveness: leader " + *leader + " after "
             + std::to_string(ms(now_ - (start_ + b))) + "ms of quiet" + at_lease(k));
      }
      if (!l.quiet_leader_at && now_ >= start_ + b + bound) {
        violation("no leader within " + std::to_string(ms(bound)) + "ms after the faults healed"
                  + at_lease(k));
        return;
      }
      if (l.released_at) {
        auto taken = chk_[k].acquisitions.back().at;
        if (foreign_ && foreign_->lease == k && foreign_->took_at)
          taken = std::max(taken, *foreign_->took_at);
        if (leader && taken >= *l.released_at) {
          note("handover after " + std::to_string(ms(now_ - *l.released_at)) + "ms" + at_lease(k));
          l.released_at.reset();
          l.lost_in_quiet.clear();
        } else if (now_ >= *l.released_at + handover_bound()) {
          violation("the released lease was not taken within "
                    + std::to_string(ms(handover_bound())) + "ms (one poll)" + at_lease(k));
          return;
        }
      } else if (!l.lost_in_quiet.empty()) {
        violation(l.lost_in_quiet + at_lease(k));
        return;
      }
    }
    if (now_ >= start_ + e) {
      judge_.end();
      for (auto& p : procs_)
        for (std::size_t k = 0; k < leases_.size() && !p.out; ++k) {
          auto st = status(p.index, k);
          auto& kn = p.knobs[k];
          bool wanted = kn.leader_only_enabled && !(kn.work_off && kn.side_off);
          if (st && wanted && !st->electing)
            violation(p.identity + " has leader-only modules enabled but no elector and no respawn"
                      + at_lease(k));
          follower_view(p.identity, k, st);
          if (st && st->state == runner_state::leader) {
            auto el = ask<elector_handle>(p.index, k, get_elector_atom::value);
            if (el && !*el)
              violation(p.identity + " is leader without an elector (nothing renews its term)"
                        + at_lease(k));
          }
        }
      // Without faults a replica sends about one request per retry period
      // and lease (a leader's renew, a polling follower's read; a watching
      // follower less): twice that, plus room for a handover, bounds a
      // window. On Kubernetes each process also runs its session's round
      // (two requests) and reads each other session twice a retry period.
      // More means something polls without pause.
      auto sent = api_->request_count() - quiet_requests_;
      auto periods = static_cast<std::size_t>((e - b) / sc_.timings.retry_period) + 1;
      auto budget = (2 * (procs_.size() + (foreign_ ? 1 : 0)) * periods + 100) * leases_.size();
      if (kube_)
        budget += 2 * procs_.size() * procs_.size() * periods;
      if (sent > budget)
        violation("the store saw " + std::to_string(sent) + " requests in a quiet window of "
                  + std::to_string(ms(e - b)) + "ms (at most " + std::to_string(budget)
                  + "): something polls without pause");
      in_quiet_ = false;
      ++q;
    }
  }

  /// One lease's liveness in the current quiet window.
  struct lease_liveness {
    std::optional<time_point> quiet_leader_at;
    std::optional<time_point> released_at;
    std::string lost_in_quiet;
  };

  const scenario& sc_;
  std::mt19937_64 rng_;
  std::vector<lease_key> leases_;     // one per runner of each replica
  std::shared_ptr<sim_store> api_;    // the store, whichever backend
  std::shared_ptr<sim_api> kube_;     // set on Kubernetes
  std::shared_ptr<sim_etcd> etcd_;    // set on etcd
  std::shared_ptr<sim_members> members_;   // balance groups' membership
  group_judge judge_;                 // balance groups' invariants (quiet windows)
  std::vector<proc> procs_;
  std::vector<checker> chk_;          // per lease
  std::unique_ptr<outsider> foreign_; // the peer that is not leasehold (op_kind::foreign)
  std::size_t foreign_takes_ = 0;
  int touches_ = 0;                   // operators' label edits of session Leases
  /// The scenario has faults of watch streams (the heal ends them).
  bool stream_faults_ = std::any_of(sc_.ops.begin(), sc_.ops.end(), [](const op& o) {
    return o.kind == op_kind::stream_cut || o.kind == op_kind::stream_gone
           || o.kind == op_kind::stream_replay || o.kind == op_kind::stream_delay;
  });
  /// Armed outside deletes: lease -> (until when, the term when armed).
  std::map<std::size_t, std::pair<std::optional<time_point>, std::int64_t>> delete_next_take_;
  std::vector<lease_liveness> live_;  // per lease
  std::vector<std::string> errors_;   // violations the cluster itself finds
  std::map<std::string, std::size_t> lease_index_;   // by lease name
  std::uint64_t seen_version_ = 0;    // the store's last change the checkers saw
  std::size_t seen_requests_ = 0;     // the store's request count then
  std::string trace_ = [] {           // LEASEHOLD_SIM_TRACE: a lease whose requests are logged
    const char* v = std::getenv("LEASEHOLD_SIM_TRACE");
    return std::string(v != nullptr ? v : "");
  }();
  std::size_t traced_ = 0;
  bool recheck_all_ = true;           // time moved, or a process paused or resumed
  time_point now_{};
  time_point start_{};
  std::multimap<time_point, std::function<void()>> timed_;
  std::map<std::pair<std::size_t, caf::actor_id>, time_point> hung_;
  using runner_slot = std::pair<std::size_t, std::size_t>;   // (replica, lease)
  std::map<runner_slot, caf::timespan> burst_on_acquire_;    // armed bursts
  std::size_t requests_seen_ = 0;
  std::map<runner_slot, std::uint64_t> burst_arm_id_;   // the op that armed each burst
  std::uint64_t burst_arms_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> cands_;
  std::vector<std::string> log_;
  std::vector<std::size_t> fatal_;
  std::uint64_t steps_ = 0;
  bool in_quiet_ = false;
  std::size_t quiet_requests_ = 0;   // the store's request count when the window began
};

} // namespace

run_result run(const scenario& sc) {
  cluster c{sc};
  return c.run();
}

seed_report run_seed(std::uint64_t seed, backend_kind backend, bool shrink, const world& w) {
  seed_report rep;
  rep.minimal = generate(seed, w);
  rep.minimal.backend = backend;
  rep.result = run(rep.minimal);
  if (rep.result.ok || !shrink)
    return rep;
  // Drop operations one at a time while the run still fails (bounded: one
  // pass over the list, then a second over what is left).
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t k = 0; k < rep.minimal.ops.size();) {
      auto trial = rep.minimal;
      trial.ops.erase(trial.ops.begin() + static_cast<std::ptrdiff_t>(k));
      auto r = run(trial);
      if (!r.ok) {
        rep.minimal = std::move(trial);
        rep.result = std::move(r);
      } else {
        ++k;
      }
    }
  }
  return rep;
}

std::string format_failure(const seed_report& r) {
  std::ostringstream os;
  auto& t = r.minimal.timings;
  os << "simulation seed " << r.minimal.seed << " (" << to_string(r.minimal.backend)
     << ") FAILED: " << r.result.violation << "\n"
     << "  replay: LEASEHOLD_SIM_SEED=" << r.minimal.seed
     << (r.minimal.backend == backend_kind::etcd ? " LEASEHOLD_SIM_BACKEND=etcd" : "")
     << (r.minimal.leases > 1 ? " LEASEHOLD_SIM_LEASES=" + std::to_string(r.minimal.leases)
                                  + " LEASEHOLD_SIM_REPLICAS=" + std::to_string(r.minimal.replicas)
                              : std::string{})
     << (r.minimal.groups ? " LEASEHOLD_SIM_GROUPS=1" : "")
     << " build/tests/sim/sim-test\n"
     << "  replicas " << r.minimal.replicas
     << (r.minimal.leases > 1 ? " x " + std::to_string(r.minimal.leases) + " leases (one watch stream each)"
                              : std::string{})
     << (r.minimal.groups ? ", one balance group (settle " + std::to_string(ms(r.minimal.settle)) + "ms)"
                          : std::string{})
     << ", lease " << ms(t.lease_duration) << "ms, renew deadline "
     << ms(t.renew_deadline) << "ms, retry " << ms(t.retry_period) << "ms, stop timeout "
     << ms(t.module_stop_timeout) << "ms, request timeout " << ms(t.effective_request_timeout())
     << "ms, base latency " << ms(r.minimal.base_latency) << "ms, lease "
     << (r.minimal.precreated_lease ? "exists" : "absent") << " at start, followers "
     << (r.minimal.watch ? "watch" : "poll") << "\n";
  if (r.minimal.backend == backend_kind::kubernetes) {
    os << "  sessions: replicas binding:";
    for (std::size_t i = 0; i < r.minimal.bind.size(); ++i)
      if (r.minimal.bind[i])
        os << " " << i;
    os << "; a bound lease lasts " << ms(r.minimal.bound_duration) << "ms\n";
  }
  os << "  shortest step log found (" << r.minimal.ops.size() << " operations):\n";
  for (auto& line : r.result.log)
    os << "    " << line << "\n";
  return os.str();
}

} // namespace leasehold::sim
