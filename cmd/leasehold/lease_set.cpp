#include "cmd/leasehold/lease_set.hpp"

#include <algorithm>
#include <chrono>
#include <future>

namespace leasehold::agent {

std::vector<std::string> lease_set::spawn(caf::actor_system& sys, const lease_layout& layout,
                                          lease_set_options opts) {
  std::vector<const lease_plan*> plans{&layout.main};
  for (auto& p : layout.others)
    plans.push_back(&p);
  std::vector<std::string> errs;
  std::vector<entry> spawned;
  for (auto* p : plans) {
    auto ro = opts.base;
    ro.lease = {opts.base.lease.ns, p->lease};
    ro.modules = p->modules;
    ro.events = opts.events(ro.lease);
    ro.compete = p->group.empty();   // a group's runner competes when its group says so
    auto r = spawn_runner(sys, ro);
    for (auto& e : r.errors)
      errs.push_back(p == plans.front() ? e : "lease " + p->lease + ": " + e);
    if (r.errors.empty())
      spawned.push_back({p->lease, p->group, r.runner, {}});
  }
  if (!errs.empty()) {
    for (auto& e : spawned)
      caf::anon_send_exit(e.runner, caf::exit_reason::user_shutdown);
    return errs;
  }
  runners_ = std::move(spawned);
  auto options = [&](const std::string& group) {
    balance_group_options g;
    g.identity = opts.base.identity;
    g.ns = opts.base.lease.ns;
    g.group = group;
    g.membership = opts.membership;
    g.timings = opts.base.timings;
    return g;
  };
  for (auto& [group, leases] : layout.groups()) {
    auto g = options(group);
    auto ms = layout.settle_ms.find(group);
    g.settle = ms != layout.settle_ms.end() ? caf::timespan(std::chrono::milliseconds(ms->second))
                                            : opts.settle;
    for (auto& e : runners_)
      if (e.group == group)
        g.leases.emplace_back(e.lease, e.runner);
    groups_.emplace_back(group, spawn_balance_group(sys, std::move(g)));
  }
  // A lease outside any group: its replicas announce themselves too, so that
  // a yield naming none of them is refused before anything moves. A name too
  // long for a label value goes without (anyone may be named).
  for (auto& e : runners_) {
    auto set = candidate_set_group(e.lease);
    if (!e.group.empty() || !opts.membership || set.empty())
      continue;
    auto g = options(set);
    g.settle = caf::timespan{0};
    g.assign = false;
    g.leases.emplace_back(e.lease, e.runner);
    e.candidates = spawn_balance_group(sys, std::move(g));
  }
  return {};
}

namespace {
/// What is left of `timeout` since `start` (at least 1 ms): one bound for a
/// whole series of requests, so a probe never waits a timeout per lease.
caf::timespan left(std::chrono::steady_clock::time_point start, caf::timespan timeout) {
  auto spent = std::chrono::steady_clock::now() - start;
  return std::max<caf::timespan>(timeout - spent, std::chrono::milliseconds(1));
}
} // namespace

std::vector<lease_state> lease_set::leases(caf::actor_system& sys, caf::timespan timeout) const {
  auto start = std::chrono::steady_clock::now();
  std::vector<lease_state> out;
  for (auto& e : runners_)
    out.push_back({e.lease, e.group, status(sys, e.runner, left(start, timeout))});
  return out;
}

std::vector<group_state> lease_set::groups(caf::actor_system& sys, caf::timespan timeout) const {
  auto start = std::chrono::steady_clock::now();
  std::vector<group_state> out;
  for (auto& [name, g] : groups_)
    out.push_back({name, group_status(sys, g, left(start, timeout))});
  return out;
}

std::vector<std::string> lease_set::apply(caf::actor_system& sys, const lease_layout& next,
                                          caf::timespan timeout) {
  std::vector<std::string> errs;
  for (auto& e : runners_) {
    const lease_plan* plan = &next.main;
    for (auto& p : next.others)
      plan = p.lease == e.lease ? &p : plan;
    if (plan == &next.main && e.lease != next.main.lease)
      continue;   // not in `next`: the caller checked same_leases
    auto r = apply_config(sys, e.runner, plan->modules, timeout);
    if (!r.accepted)
      for (auto& err : r.errors)
        errs.push_back("lease " + e.lease + ": " + err);
  }
  return errs;
}

std::vector<std::string> lease_set::names() const {
  std::vector<std::string> out;
  for (auto& e : runners_)
    out.push_back(e.lease);
  return out;
}

std::optional<yield_result> lease_set::yield(caf::actor_system& sys, const std::string& lease,
                                             const std::string& to, caf::timespan timeout) const {
  for (auto& e : runners_) {
    if (e.lease != lease)
      continue;
    for (auto& [name, g] : groups_)
      if (name == e.group)
        return yield_lease(sys, g, lease, to, timeout);
    if (e.candidates)
      return yield_lease(sys, e.candidates, lease, to, timeout);
    return yield_leadership(sys, e.runner, to, timeout);
  }
  return std::nullopt;
}

std::optional<runner_status> lease_set::status_of(caf::actor_system& sys, const std::string& lease,
                                                  caf::timespan timeout) const {
  for (auto& e : runners_)
    if (e.lease == lease)
      return status(sys, e.runner, timeout);
  return std::nullopt;
}

bool lease_set::shut_down(caf::actor_system& sys, caf::timespan bound) {
  // At once: the whole stop takes one release, not one per lease.
  std::vector<std::future<bool>> done;
  for (auto& [name, g] : groups_)
    done.push_back(std::async(std::launch::async, [&sys, g = g, bound] {
      return leave_group(sys, g, bound);
    }));
  for (auto& e : runners_)
    if (e.group.empty())
      done.push_back(std::async(std::launch::async, [&sys, e, bound] {
        return e.candidates ? leave_group(sys, e.candidates, bound) : shutdown(sys, e.runner, bound);
      }));
  bool ok = true;
  for (auto& f : done)
    ok = f.get() && ok;
  return ok;
}

void lease_set::kill_all() {
  for (auto& [name, g] : groups_)
    caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
  for (auto& e : runners_) {
    caf::anon_send_exit(e.runner, caf::exit_reason::user_shutdown);
    if (e.candidates)
      caf::anon_send_exit(e.candidates, caf::exit_reason::user_shutdown);
  }
  groups_.clear();
  runners_.clear();
}

} // namespace leasehold::agent
