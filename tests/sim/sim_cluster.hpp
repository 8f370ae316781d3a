// Deterministic simulation of whole leasehold replicas (as FoundationDB's and
// TigerBeetle's VOPR). Each replica is a process of its own: one caf::actor_system on CAF's test
// coordinator, holding its runner, electors, modules and lease transport.
// All replicas share one simulated Lease store (sim_api). One loop drives
// every system: it runs one runnable message at a time, chosen by the seed's
// RNG among all replicas (so the seed decides the interleaving), and when
// nothing is runnable it moves the one simulated clock to the next timeout
// or operation. So:
//   - a *paused* replica (SIGSTOP, a VM freeze) simply gets no turns and its
//     clock stops; on resume its overdue timers fire at once;
//   - a *hung* module (a detached actor blocked in a handler) gets no turns
//     either, so even a kill waits in its mailbox, as in a real process;
//   - a *crashed* replica loses its actor system and everything in it at once.
// The invariants are checked after every message (the checker below).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/runner.hpp"
#include "leasehold/runtime.hpp"
#include "sim_etcd.hpp"
#include "tests/support/sim_transport.hpp"

namespace leasehold::sim {

using time_point = caf::actor_clock::time_point;

/// The store the replicas share.
enum class backend_kind { kubernetes, etcd };
const char* to_string(backend_kind b);
/// "kubernetes" / "etcd"; nullopt for anything else.
std::optional<backend_kind> parse_backend(const std::string& name);

/// One leader-only (or every-replica) probe module instance, as the module
/// itself saw its life: when it started, on which fence, when it ended.
struct probe_instance {
  std::string identity;
  int incarnation = 0;          // process incarnation of the replica
  std::size_t replica = 0;
  std::string module;
  bool leader_only = true;
  /// The peer that is not leasehold (op_kind::foreign): its work ends when
  /// its fence does, and leasehold's own rules (terms, holds) are not its.
  bool foreign = false;
  std::int64_t term = -1;
  fencing_token fence;
  nlohmann::json settings;
  time_point started{};
  std::optional<time_point> stopped;
  caf::actor_id actor = 0;
  /// Its replica was frozen while its fence expired: from `stale_since` on it
  /// does no work (the fence says so) and must be gone within the budget.
  std::optional<time_point> stale_since;
  /// The latest end its fence was seen to have (the cell reads 0 once the
  /// term ended): the last renew sent + renew_deadline.
  std::int64_t last_valid_until = 0;
  /// Its fence was valid when the runtime spawned it. An actor first runs
  /// some steps after its spawn: a term that ended in between (its runner
  /// stepped down and voided the fence) leaves an instance that starts on a
  /// void fence and with its stop already in its mailbox. It does no work
  /// (the fence says so) and is judged as stale from its start.
  bool valid_at_spawn = true;
};

/// The per-module knobs the generator turns (probe settings).
struct probe_knobs {
  int value = 0;                // free: which config a term got
  int crash_after_ms = 0;       // crash loop
  int stop_delay_ms = 0;        // slow to stop
  bool ignore_stop = false;     // only a kill stops it
  int hang_on_stop_ms = 0;      // blocks in its exit handler this long (kill waits too)
};

/// In the multi-lease world (world::leases > 1) each replica holds many
/// leases: a runner per lease, every runner of the replica on one transport
/// with one shared watch stream, whose faults hit all its leases at once.
/// Each lease has its own checker and its own liveness judgement.
///
/// The shared store has either backend's semantics (scenario::backend): the
/// Kubernetes Lease API (sim_api) or etcd (sim_etcd: revisions, lease TTLs
/// expiring by the store's clock, watch). A seed draws the same scenario for
/// both; the replicas' electors get etcd's evidence on etcd, and the checker's
/// backend-dependent rules say which backend they are for.
///
/// Invariants, checked after every step. Violations are strings naming
/// what broke; the first one ends the run.
class checker {
public:
  std::vector<probe_instance> instances;
  std::vector<std::size_t> live;   // indices of instances not stopped (the per-step checks scan these)
  std::vector<std::string> violations;
  std::function<time_point()> now;
  /// Terms of the most recent acquisition per (replica, incarnation), by
  /// fence identity (each acquisition has its own valid_until cell).
  struct acquisition {
    std::string identity;
    int incarnation = 0;
    std::int64_t term = -1;
    const void* cell = nullptr;
    time_point at{};
  };
  std::vector<acquisition> acquisitions;
  std::optional<time_point> last_wipe;
  /// How long a stale instance may outlive its replica's resume.
  caf::timespan stale_budget{0};
  /// lease_duration - renew_deadline - module_stop_timeout: a module killed
  /// but hung (no stop can end it) is ended by the fatal exit, at the
  /// latest half this room before another replica may lead.
  caf::timespan room{0};
  caf::timespan renew_deadline{0};
  caf::timespan lease_duration{0};
  /// When a standby last created the lease unheld (a new record with no
  /// holder that is no release): no term may start on the lease for a
  /// lease duration from then, whoever starts it (docs/safety.md).
  std::optional<time_point> unheld_created_at;
  /// The record as the previous check saw it (to judge transitions).
  std::optional<lease> last_record;
  /// When the store last recorded a release (Kubernetes: holder emptied;
  /// etcd: the key gone, revoked or expired).
  std::optional<time_point> last_release;
  /// etcd: the store ends a term by deleting its key (server_expiry).
  bool server_expiry = false;
  /// An outside write changed the store since the last check: the record
  /// freed by it was not released by its holder (no release rule applies).
  bool outside_write = false;
  /// etcd: the term whose key an outside write deleted (or revoked): its
  /// holder may start a module on its still valid fence before it notices,
  /// as its running ones go on; followers wait that out.
  std::int64_t outside_ended_term = -1;
  /// The record in the store now (for the rules checked when work starts).
  std::function<std::optional<lease>()> peek;
  /// Work started or ended since the last check (the cluster also sets it
  /// when the record changed): a check cannot be skipped. A check that
  /// found a stale instance keeps it set (the stale rule is judged by time).
  bool dirty = true;

  void started(probe_instance inst);
  void ended(std::size_t index, time_point at);
  /// Identities whose leader-only work runs now (alive, not stale, not paused).
  std::vector<std::string> working(const std::function<bool(std::size_t)>& paused) const;
  void check(const std::function<bool(std::size_t)>& paused, const std::optional<lease>& record);
  /// Notes the latest end of every live instance's fence (a renew's reply
  /// moves it in a step that need not dirty the lease; the stale rule needs
  /// it after the term ended): every step, for every lease.
  void track_fences();
  bool ok() const { return violations.empty(); }
};

enum class op_kind {
  api_down, api_hang, api_errors, api_latency, partition, partition_hang, wipe,
  elector_kill, crash_loop, module_hang, stubborn_module, slow_module,
  disable, enable, change_value, config_burst, pause, crash, restart, graceful_shutdown,
  heal,
  /// A write from outside the protocol (an operator): param 0 deletes the
  /// object (Lease / key), 1 cancels the holder's claim (Kubernetes:
  /// holderIdentity emptied; etcd: the key's etcd lease revoked).
  outside_write,   // param 2: arms a delete of the next take within `duration`
  /// Faults of one replica's watch stream (sim_stream_fault), which a
  /// shared stream carries for every lease of the replica: cut for
  /// `duration`, 410 Gone / compaction, a replay from `param` versions
  /// back, every event `param` ms late for `duration`.
  stream_cut, stream_gone, stream_replay, stream_delay,
  /// The leader is asked to yield (yield_atom): param -1 to anyone, 7 to a
  /// replica that does not exist, else to replica param (modulo the count).
  yield,
  /// Balance groups (world::groups): a replica out of the group joins (a
  /// new process), a member leaves cleanly (leave_group, then the process
  /// exits and stays out), a member is killed and stays out, a replica
  /// flaps (joins and leaves `param` times, `duration` apart), and
  /// preferredHolder is written on the op's lease naming replica param (as
  /// yield: -1 clears it, 7 names one that does not exist; on etcd a put
  /// keeping the key's etcd lease, as a follower carrying a yield writes).
  join, leave, kill, flap, prefer,
  /// Kubernetes (a seed draws them on either store; etcd skips them): an
  /// operator's write to replica `replica`'s session Lease (kube_session.hpp):
  /// param 0 deletes it, 1 empties its holderIdentity, 2 edits a label only.
  session_write,
  /// Kubernetes: an elector that is not leasehold (client-go's rule: a
  /// record is held until a lease duration, the record's, after it was last
  /// seen to change) competes for the op's lease from `at` for `duration`
  /// (0: to the end), its leader-only work judged as a replica's.
  foreign,
};
const char* to_string(op_kind k);

struct op {
  caf::timespan at{0};          // from the start of the run
  op_kind kind = op_kind::heal;
  std::size_t replica = 0;      // target (modulo the replica count)
  caf::timespan duration{0};    // how long the fault lasts (0: instant)
  int param = 0;                // status code, latency ms, hang ms, ...
  /// The lease whose runner, modules or record it targets (modulo the
  /// scenario's leases; -1: every lease of the replica).
  int lease = 0;
  std::string describe() const;
};

/// The shape of the simulated world: how many leases each replica holds
/// (one runner per lease, every runner of a replica on one transport) and
/// how many replicas (0: drawn from the seed).
struct world {
  std::size_t leases = 1;
  std::size_t replicas = 0;
  /// The multi-lease world: every replica's runners share one watch stream
  /// per namespace (sim_watch_sharing::per_namespace, as the HTTP
  /// transport's), and the generator adds that stream's faults.
  bool many() const { return leases > 1; }
  /// The balance-group world (multi-lease): every replica's runners stand
  /// by and one balance group per replica decides which leases it competes
  /// for (actors/balance.hpp), with membership in a simulated store
  /// (tests/support/sim_membership.hpp); the generator adds joins, leaves,
  /// kills, flaps and preferredHolder writes, and the group invariants
  /// (sim_groups.hpp) are checked in every quiet window.
  bool groups = false;
};

struct scenario {
  std::uint64_t seed = 0;
  std::size_t replicas = 3;
  std::size_t leases = 1;             // runners per replica, one lease each
  bool shared_watch = false;          // one stream per replica for all its leases
  election_timings timings;
  supervision_policy supervision;
  caf::timespan base_latency{0};      // per-reply jitter in quiet periods
  bool precreated_lease = true;       // a released Lease object exists at start
  bool watch = true;                  // followers watch the lease (false: they poll)
  /// Not drawn: the same seed runs on either backend (run_seed's argument).
  backend_kind backend = backend_kind::kubernetes;
  /// Balance groups (world::groups): the group's settle time, and which
  /// replicas are out of the group at the start (no process until a join).
  bool groups = false;
  caf::timespan settle{std::chrono::seconds(1)};
  std::vector<bool> out_at_start;
  /// Kubernetes: which replicas bind the leases they take to their session
  /// (session_options::bind; missing: plain), and the least
  /// leaseDurationSeconds a bound Lease carries (min_bound_duration).
  std::vector<bool> bind;
  caf::timespan bound_duration{std::chrono::seconds(600)};
  std::vector<op> ops;                // sorted by `at`
  /// Quiet windows [begin, end): no fault active; liveness is checked there.
  std::vector<std::pair<caf::timespan, caf::timespan>> quiet;
  caf::timespan length{0};
};

/// Draws a scenario from one 64-bit seed (all randomness of a run derives
/// from the seed: replaying the seed replays the run exactly).
/// The single-lease world's seeds (world{}) draw exactly what they drew
/// before the multi-lease world existed; its draws come from a stream of
/// their own.
scenario generate(std::uint64_t seed, const world& w = {});

/// The liveness bound after faults heal: the longest a correct cluster may
/// take to have a leader again (see docs/safety.md).
caf::timespan liveness_bound(const election_timings& t);
/// The same on `backend`: etcd's lease TTL is lease_duration rounded up to
/// whole seconds, and a key outlives its leader by that TTL.
caf::timespan liveness_bound(const election_timings& t, backend_kind backend);

/// Balance groups: how long a lease may stay unowned, and how long after a
/// membership change (or after liveness_bound into a quiet window) the
/// group must be balanced, while a member is live and the store reachable:
/// lease_duration + group_slack (docs/balance.md, "The simulator's bounds").
caf::timespan group_slack(const election_timings& t, backend_kind backend, caf::timespan settle);
caf::timespan group_bound(const election_timings& t, backend_kind backend, caf::timespan settle);

struct run_result {
  bool ok = true;
  std::string violation;
  std::vector<std::string> log;       // the step log: operations and leadership events
  std::uint64_t steps = 0;
  caf::timespan simulated{0};
  std::size_t requests = 0;           // requests the store saw (faulted ones too)
  /// Balance groups (sim_groups.hpp): the longest a lease ran nowhere while
  /// judged, the longest a membership change took to balance, the most
  /// leases one change moved, and how many balanced states were judged.
  caf::timespan group_max_unowned{0};
  caf::timespan group_max_to_balance{0};
  std::size_t group_max_moves = 0;
  std::size_t group_judgements = 0;
  caf::timespan group_bound{0};       // the bound both rules use (group_bound())
  /// Terms taken (leasehold's and the foreign peer's), of them the foreign
  /// peer's, writes that renewed a session Lease, and writes that left a
  /// lease bound to a session (a take or a refresh).
  std::size_t takes = 0;
  std::size_t foreign_takes = 0;
  std::size_t session_renews = 0;
  std::size_t bound_writes = 0;
};

/// Runs a scenario; stops at the first violation.
run_result run(const scenario& sc);

/// Runs a seed; on failure shrinks the operation list (drops operations
/// while the run still fails) so the printed log is the shortest found.
struct seed_report {
  run_result result;
  scenario minimal;
};
seed_report run_seed(std::uint64_t seed, backend_kind backend = backend_kind::kubernetes,
                     bool shrink = true, const world& w = {});

/// Formats a failure for the test log: seed, violation, replay hint, step log.
std::string format_failure(const seed_report& r);

} // namespace leasehold::sim
