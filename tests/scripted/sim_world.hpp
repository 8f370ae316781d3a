// Scripted-message test harness: N replicas (runner + elector + modules)
// sharing one simulated Lease API, on CAF's test coordinator. Time is
// simulated: the world jumps from one pending timeout to the next, so every
// state change is observed and checked, exactly and fast.
#pragma once

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/runner.hpp"
#include "leasehold/balance_group.hpp"
#include "leasehold/runtime.hpp"
#include "tests/sim/sim_etcd.hpp"
#include "tests/support/sim_membership.hpp"
#include "tests/support/sim_transport.hpp"

namespace leasehold::test {

using sim_clock_time = caf::actor_clock::time_point;

/// Watches every leader-only module instance of every replica. A start while
/// another replica has one alive is a safety violation, recorded at once;
/// sim_world REQUIREs that there is none after every step it runs (settle,
/// run_until, run_for, status, elector, configure), so a test never needs to
/// check `violations` itself.
struct probe_tracker {
  struct instance {
    std::string identity;
    std::string module;
    std::int64_t term = -1;
    nlohmann::json settings;
    sim_clock_time started{};
    std::optional<sim_clock_time> stopped;
    bool leader_only = true;
    fencing_token fence;
  };
  std::vector<instance> instances;
  std::vector<std::string> violations;
  std::function<sim_clock_time()> now;

  /// Identities with at least one leader-only instance alive.
  std::vector<std::string> running_leaders() const;
  /// Identities with a leader-only instance of `module` alive.
  std::vector<std::string> running(const std::string& module) const;
  int alive(const std::string& identity, bool leader_only = true) const;
  int started(const std::string& identity, const std::string& module = {}) const;
  int stopped(const std::string& identity, const std::string& module = {}) const;
  const instance* last(const std::string& identity, const std::string& module) const;
};

/// Registers the "probe" module type: settings
///   ignore_stop (bool): ignores exit messages (only kill stops it)
///   crash_after_ms (int): quits with an error that long after starting
///   crash_on (string): only on this identity (default: everywhere)
///   value (any): free, recorded to check which configuration a term got
void register_probe(module_registry& reg, std::shared_ptr<probe_tracker> t);

struct replica {
  std::string identity;
  runner_actor runner;                 // runners[0]
  std::vector<runner_actor> runners;   // one per lease (world_options::leases)
  caf::actor group;                    // the balance group actor, or the candidate set
  lease_transport_actor transport;    // the simulated transport (its stream faults)
  lease_transport_actor session;      // world_options::session: the session actor in front of it
  std::vector<runtime_event> events;
  std::vector<std::pair<sim_clock_time, runtime_event>> timeline;
  int count(event_type t) const;
};

struct world_options {
  std::size_t replicas = 1;
  election_timings timings;       // the original agent's: 15 s / 10 s / 2 s, stop 4 s
  supervision_policy supervision;
  module_config modules;          // default: one leader-only probe "work"
  lease_key lease{"default", "agent-lock"};
  std::uint64_t seed = 42;
  /// A released Lease object exists at start, as in any cluster where
  /// leasehold ran before. Without it the first leader waits one lease
  /// duration (an absent lease is waited out; see docs/safety.md).
  bool lease_exists = true;
  /// Followers watch the lease through the simulated transport (false: poll).
  bool watch = true;
  /// The store: the Kubernetes Lease API (sim_api), or etcd (sim_etcd: the
  /// term is the key's create_revision, keepalives change nothing, the store
  /// deletes a key whose TTL ran out; the electors get server_expiry).
  bool etcd = false;
  /// Leases per replica: with more than one, lease k is "<lease.name>-<k>"
  /// and its runner runs one leader-only probe "work-<k>"; safety is then
  /// judged per lease (never two replicas running one lease's work).
  std::size_t leases = 1;
  /// The replicas' runners form one balance group over their leases
  /// (include/leasehold/balance_group.hpp), announced through `members`.
  /// Replica i joins when start_group(i) is called.
  bool balance = false;
  caf::timespan settle{std::chrono::seconds(1)};
  /// Kubernetes: each replica's leases are bound to its session
  /// (transport/kube/kube_session.hpp), one session actor per replica.
  bool session = std::getenv("LEASEHOLD_SIM_SESSION") != nullptr;   // meson's *-bound runs
  std::chrono::seconds bound_duration{600};   // session_options::min_bound_duration
};

class sim_world {
public:
  explicit sim_world(world_options opts);
  ~sim_world();

  caf::actor_system& sys() { return *sys_; }
  caf::scheduler::test_coordinator& sched() { return *sched_; }
  /// The store, whichever backend (faults, requests, peek).
  sim_store& store() { return *store_; }
  sim_api& api() { return *api_; }   // the Kubernetes store (not with etcd)
  probe_tracker& tracker() { return *tracker_; }
  replica& rep(std::size_t i) { return *reps_.at(i); }
  std::size_t size() const { return reps_.size(); }
  sim_clock_time now() const;
  const world_options& options() const { return opts_; }

  /// Runs every pending message, then jumps to the next timeout, until
  /// `pred` holds (true) or `limit` of simulated time passed (false).
  /// Safety is checked after every single step.
  bool run_until(const std::function<bool()>& pred, caf::timespan limit);
  void run_for(caf::timespan d);
  /// Runs every message and timer due within `d`; then the clock reads
  /// exactly now + d (run_for may end at a later timer).
  void run_exactly(caf::timespan d);
  /// Processes all messages now, without advancing time.
  void settle();

  runner_status status(std::size_t i);
  /// The replica's current elector of lease `k` (null when none), asked of
  /// its runner.
  elector_handle elector(std::size_t i, std::size_t k = 0);
  /// Simulated time of replica i's last successful renew (or acquisition).
  sim_clock_time last_renew(std::size_t i) const;
  config_result configure(std::size_t i, module_config cfg);
  bool shutdown(std::size_t i);
  /// Asks replica i to yield (to `target`, "" anyone) and runs the world
  /// until it answers (REQUIREd within `limit`).
  yield_result yield(std::size_t i, const std::string& target = {},
                     caf::timespan limit = std::chrono::seconds(60));
  /// The same asked of replica i's group or candidate set, for lease `lease`
  /// (yield_lease, as `leasehold yield --lease` goes).
  yield_result group_yield(std::size_t i, const std::string& lease, const std::string& to);
  /// The replica whose leader-only modules run, or -1 (asserts at most one).
  int leader() const;
  /// Runs until some replica leads (REQUIREd within `limit`); returns it.
  std::size_t await_leader(caf::timespan limit);
  /// With `leases` > 1: the replica running lease k's work, or -1.
  int leader_of(std::size_t k) const;
  /// Every lease's work runs somewhere (`who` < 0), or all on replica `who`.
  bool all_led(int who = -1) const;
  /// With `leases` > 1: how many leases' work each replica runs.
  std::vector<std::size_t> loads() const;
  /// With `balance`: spawns replica i's group actor (it joins the group).
  /// `n` > 0: with only the first n leases (a member whose config differs).
  void start_group(std::size_t i, std::size_t n = 0);
  /// Without `balance`, one lease: spawns replica i's candidate set (a group
  /// actor that only announces it and tells its runner who may be named).
  void start_candidates(std::size_t i);
  /// With `balance`: replica i leaves cleanly (leave_group: withdraw, then
  /// its runners release); true when it answered.
  bool leave_group(std::size_t i);
  /// With `balance`: replica i's process dies (SIGKILL): its runners and its
  /// group actor are killed; its leader-only modules die with it.
  void kill_replica(std::size_t i);
  /// With `balance`: the members replica i's group counts now (settled, in
  /// join order), as its get_status_atom answers; time does not move.
  std::vector<std::string> group_members(std::size_t i);
  /// Replica i's group status (REQUIREs a group).
  balance_status group_status(std::size_t i);
  sim_members& members() { return *members_; }
  void check_safety();
  /// Lease k's key (with `leases` > 1: "<lease.name>-<k>").
  lease_key lease_at(std::size_t k) const;

private:
  void spawn_group(std::size_t i, std::size_t n, bool assign);
  /// etcd: when a lease's TTL runs out before the next timer (and by
  /// `deadline`), time moves there and the store deletes its keys. True
  /// when it did.
  bool expire_etcd_leases(sim_clock_time deadline);

  world_options opts_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::shared_ptr<sim_api> api_ = std::make_shared<sim_api>();
  std::shared_ptr<sim_etcd> etcd_;      // set with world_options::etcd
  std::shared_ptr<sim_store> store_;    // api_ or etcd_
  std::shared_ptr<sim_members> members_;
  std::shared_ptr<probe_tracker> tracker_ = std::make_shared<probe_tracker>();
  std::shared_ptr<module_registry> registry_ = std::make_shared<module_registry>();
  std::vector<std::unique_ptr<replica>> reps_;
};

/// A module_config with leader-only probes named `names` (settings per name optional).
module_config probes(std::vector<std::string> names, nlohmann::json settings = nlohmann::json::object());

} // namespace leasehold::test
