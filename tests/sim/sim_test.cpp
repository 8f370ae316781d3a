// The seeded simulation in CI: the kept regression seeds (on both backends),
// a fixed block of seeds and a fresh random block (its first seed printed),
// each run with the invariants checked after every step.
// LEASEHOLD_SIM_SEED=N replays one seed and prints its whole step log;
// LEASEHOLD_SIM_BACKEND=etcd runs the replay and the blocks on the simulated
// etcd instead of the Kubernetes Lease API. LEASEHOLD_SIM_LEASES=L (and
// LEASEHOLD_SIM_REPLICAS=R) run them in the multi-lease world: each replica
// holds L leases on one transport and one shared watch stream.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sim_cluster.hpp"
#include "tests/support/skip.hpp"

using namespace leasehold::sim;

namespace {

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

backend_kind env_backend() {
  const char* v = std::getenv("LEASEHOLD_SIM_BACKEND");
  if (v == nullptr || *v == '\0')
    return backend_kind::kubernetes;
  auto b = parse_backend(v);
  if (!b) {
    FAIL("LEASEHOLD_SIM_BACKEND: must be kubernetes or etcd (is \"" << v << "\")");
  }
  return *b;
}

/// The world the variables ask for (the single-lease one by default).
world env_world() {
  world w;
  w.leases = std::max<std::uint64_t>(1, env_u64("LEASEHOLD_SIM_LEASES", 1));
  w.replicas = env_u64("LEASEHOLD_SIM_REPLICAS", 0);
  w.groups = env_u64("LEASEHOLD_SIM_GROUPS", 0) != 0;
  return w;
}

void run_block(std::uint64_t first, std::uint64_t count) {
  auto backend = env_backend();
  auto w = env_world();
  std::uint64_t failures = 0;
  for (std::uint64_t s = first; s < first + count; ++s) {
    auto rep = run_seed(s, backend, true, w);
    if (!rep.result.ok) {
      ++failures;
      FAIL_CHECK(format_failure(rep));
      if (failures >= 3)
        break;   // enough to act on; each is printed with its replay line
    }
  }
  CHECK(failures == 0);
}

/// Adds operation `kind` at `at` for `d` with `param`, on replica `r`, or
/// on every replica of the scenario (r < 0); keeps the list sorted.
void add_op(scenario& sc, op_kind kind, caf::timespan at, caf::timespan d, int param, int r = -1) {
  for (std::size_t i = 0; i < sc.replicas; ++i) {
    if (r >= 0 && static_cast<std::size_t>(r) != i)
      continue;
    op o;
    o.kind = kind;
    o.replica = i;
    o.at = at;
    o.duration = d;
    o.param = param;
    sc.ops.push_back(o);
  }
  std::stable_sort(sc.ops.begin(), sc.ops.end(), [](const op& a, const op& b) { return a.at < b.at; });
}

/// Two replicas on `backend` whose followers watch, 10 ms of latency.
scenario two_watching(backend_kind backend, std::uint64_t seed) {
  using namespace std::chrono_literals;
  scenario sc;
  sc.seed = seed;
  sc.replicas = 2;
  sc.watch = true;
  sc.base_latency = 10ms;
  sc.backend = backend;
  return sc;
}

} // namespace

// The cases driven by a variable are skipped (LEASEHOLD_SKIP: reported as
// skipped, never as passed) when it is not set.
static bool unset(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' || std::string(v) == "0";
}

TEST_CASE("simulation: a replayed seed (LEASEHOLD_SIM_SEED)") {
  if (unset("LEASEHOLD_SIM_SEED"))
    LEASEHOLD_SKIP("LEASEHOLD_SIM_SEED is not set");
  const char* v = std::getenv("LEASEHOLD_SIM_SEED");
  auto rep = run_seed(std::strtoull(v, nullptr, 10), env_backend(), true, env_world());
  if (rep.result.ok) {
    std::cout << "seed " << v << " (" << to_string(rep.minimal.backend) << "): ok, " << rep.result.steps << " steps, "
              << std::chrono::duration_cast<std::chrono::seconds>(rep.result.simulated).count()
              << " s simulated\n";
    for (auto& line : rep.result.log)
      std::cout << "  " << line << "\n";
  }
  CHECK_MESSAGE(rep.result.ok, format_failure(rep));
}

/// The lines of tests/sim/`file` that are neither empty nor comments.
static std::vector<std::string> kept_lines(const std::string& file) {
  const char* root = std::getenv("LEASEHOLD_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  std::ifstream in(std::string(root) + "/tests/sim/" + file);
  REQUIRE(in);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#')
      out.push_back(line);
  REQUIRE(!out.empty());
  return out;
}

TEST_CASE("simulation: every kept regression seed passes") {
  for (auto& line : kept_lines("regression_seeds.txt")) {
    auto seed = std::strtoull(line.c_str(), nullptr, 10);
    CAPTURE(line);
    for (auto backend : {backend_kind::kubernetes, backend_kind::etcd}) {
      auto rep = run_seed(seed, backend);
      CHECK_MESSAGE(rep.result.ok, format_failure(rep));
    }
  }
}

TEST_CASE("simulation: every kept multi-lease regression seed passes (an open one still fails)") {
  for (auto& line : kept_lines("regression_seeds_many.txt")) {
    CAPTURE(line);
    std::istringstream words(line);
    std::string token, backend_name;
    world w;
    words >> token;
    bool open = token == "open";
    if (open)
      words >> token;
    auto seed = std::strtoull(token.c_str(), nullptr, 10);
    words >> w.leases >> w.replicas >> backend_name;
    std::string world_name;
    words >> world_name;   // optional: "groups", the balance-group world
    REQUIRE_MESSAGE((world_name.empty() || world_name == "groups"),
                    "regression_seeds_many.txt: the fifth word, when there is one, must be groups");
    w.groups = world_name == "groups";
    auto backend = parse_backend(backend_name);
    REQUIRE_MESSAGE(backend, "regression_seeds_many.txt: backend must be kubernetes or etcd");
    REQUIRE(w.leases > 1);
    auto rep = run_seed(seed, *backend, !open, w);
    if (open)
      CHECK_MESSAGE(!rep.result.ok, "seed " << seed << " (" << backend_name
                                            << ") passes now: its defect is fixed? drop \"open\" from its line");
    else
      CHECK_MESSAGE(rep.result.ok, format_failure(rep));
  }
}

// The balance-group world (world::groups): defects it found, each replayed
// from its seed (also kept in regression_seeds_many.txt).
static world groups_of(std::size_t leases, std::size_t replicas) {
  world w;
  w.leases = leases;
  w.replicas = replicas;
  w.groups = true;
  return w;
}

TEST_CASE("groups: a lease no runner reports held becomes every member's after a lease duration "
          "(seed 105: a restarted member and the others disagreed on its holder)") {
  // A crashed member came back under its name: the others still read the
  // expired record naming it, it knew it held nothing. Its group had never
  // seen the lease change hands, so the lease was never "free since" and
  // the orphan rule never applied: nobody competed for it for ever.
  for (auto backend : {backend_kind::kubernetes, backend_kind::etcd}) {
    CAPTURE(to_string(backend));
    auto rep = run_seed(105, backend, false, groups_of(12, 0));
    CHECK_MESSAGE(rep.result.ok, format_failure(rep));
    CHECK(rep.result.group_judgements > 0);
  }
}

TEST_CASE("groups: a module whose term ended between its spawn and its first run is stale, not a "
          "start on an invalid fence (seeds 1, 24)") {
  // A runner told to stand by right after it acquired steps down at once:
  // its modules, spawned on the valid fence, first run after the fence was
  // voided, with their stop already queued. The checker judged that a start
  // on an invalid fence (a simulator defect).
  for (auto [seed, replicas] : {std::pair<std::uint64_t, std::size_t>{1, 0}, {24, 5}}) {
    auto rep = run_seed(seed, backend_kind::kubernetes, false, groups_of(12, replicas));
    CHECK_MESSAGE(rep.result.ok, format_failure(rep));
  }
}

TEST_CASE("simulation: the fixed block of seeds") {
  if (unset("LEASEHOLD_SIM_COUNT"))
    LEASEHOLD_SKIP("LEASEHOLD_SIM_COUNT is not set");
  auto count = env_u64("LEASEHOLD_SIM_COUNT", 0);
  run_block(env_u64("LEASEHOLD_SIM_FIRST", 1), count);
}

TEST_CASE("simulation: a fresh random block of seeds") {
  if (unset("LEASEHOLD_SIM_RANDOM"))
    LEASEHOLD_SKIP("LEASEHOLD_SIM_RANDOM is not set");
  auto count = env_u64("LEASEHOLD_SIM_RANDOM", 0);
  auto first = std::random_device{}() * 1000003ULL + 1'000'000'000ULL;
  std::cout << "random block: seeds " << first << " .. " << first + count - 1
            << " (replay one with LEASEHOLD_SIM_SEED=N)\n";
  run_block(first, count);
}

TEST_CASE("a killed leader-only module that hangs: no release, no renew, the process ends before another may lead") {
  using namespace std::chrono_literals;
  scenario sc;
  sc.seed = 6;
  sc.replicas = 2;
  // The leader's "side" module blocks in its exit handler for 60 s (a kill
  // waits behind it); then the leader is asked to shut down.
  add_op(sc, op_kind::stubborn_module, 20s, 60s, 1);
  add_op(sc, op_kind::graceful_shutdown, 30s, 60s, -1, 0);
  sc.length = 120s;
  auto r = run(sc);
  CHECK_MESSAGE(r.ok, r.violation);
  bool fatal = false, killed = false, taken_after = false;
  for (auto& line : r.log) {
    killed = killed || line.find("killed: did not stop") != std::string::npos;
    fatal = fatal || line.find("fatal exit") != std::string::npos;
    taken_after = taken_after || (fatal && line.find("acquired term 2") != std::string::npos);
  }
  CHECK(killed);
  CHECK(fatal);         // the process ended rather than release with a module running
  CHECK(taken_after);   // and the other replica took over after that
  CHECK(std::none_of(r.log.begin(), r.log.end(), [](const std::string& l) {
    return l.find("released the lease") != std::string::npos;
  }));
}

TEST_CASE("a follower waiting on its watch does not poll a held lease without pause, on either backend") {
  // On etcd a renew is a keepalive: the record and its version stay as they
  // were, so a follower that woke whenever the unchanged record was a lease
  // duration old polled without pause from then on (thousands of reads).
  using namespace std::chrono_literals;
  for (auto backend : {backend_kind::kubernetes, backend_kind::etcd}) {
    std::string name = to_string(backend);
    CAPTURE(name);
    auto sc = two_watching(backend, 7);
    sc.length = 120s;
    auto r = run(sc);
    CHECK_MESSAGE(r.ok, r.violation);
    CHECK(std::any_of(r.log.begin(), r.log.end(), [](const std::string& l) {
      return l.find("acquired term") != std::string::npos;
    }));
    // The leader renews once per retry period; the follower reads far less.
    auto periods = static_cast<std::size_t>(sc.length / sc.timings.retry_period);
    CHECK(r.requests <= 2 * periods);
  }
}

namespace {

/// Two replicas; both leader-only modules of each stop slowly (2 s after
/// their exit message), then at 30 s an operator writes from outside the
/// protocol (param 0: delete; 1: cancel the holder's claim).
run_result outside_write_run(backend_kind backend, int param) {
  using namespace std::chrono_literals;
  scenario sc;
  sc.seed = 12;
  sc.replicas = 2;
  sc.backend = backend;
  add_op(sc, op_kind::slow_module, 20s, 100s, 2000);
  add_op(sc, op_kind::outside_write, 30s, 0s, param, 0);
  sc.length = 90s;
  return run(sc);
}

/// Simulated ms of the first log line after `after` ms containing `what` (-1: none).
long long first_after(const run_result& r, long long after, const std::string& what) {
  for (auto& l : r.log) {
    auto ms = std::stoll(l.substr(2, l.find("ms") - 2));
    if (ms >= after && l.find(what) != std::string::npos)
      return ms;
  }
  return -1;
}

std::string joined(const run_result& r) {
  std::string out;
  for (auto& l : r.log)
    out += l + "\n";
  return out;
}

} // namespace

TEST_CASE("two leaders after a partial disable of a hung module: the term ends, every leader-only module stops, the replica competes again") {
  // Regression. The leader runs "work" and "side"; only "side" is
  // disabled, and it blocks in its exit handler for 7 s: longer than its
  // kill at module_stop_timeout (4 s), shorter than the fatal deadline.
  // Before the fix the fatal check's first phase killed the elector without
  // ending the term: the replica stayed leader with "work" running and no
  // renew, and the other replica took the lease by expiry (two leaders).
  using namespace std::chrono_literals;
  scenario sc;
  sc.seed = 11;
  sc.replicas = 2;
  add_op(sc, op_kind::stubborn_module, 20s, 7s, 1);   // "side" hangs on stop (7 s + 1 ms)
  add_op(sc, op_kind::disable, 21s, 200s, 2);         // only "side" is switched off
  sc.length = 150s;
  auto r = run(sc);
  CHECK_MESSAGE(r.ok, r.violation);
  std::size_t lost = r.log.size(), again = r.log.size();
  for (std::size_t k = 0; k < r.log.size(); ++k) {
    if (lost == r.log.size() && r.log[k].find(" lost term ") != std::string::npos)
      lost = k;
    if (lost < k && again == r.log.size() && r.log[k].find(" acquired term ") != std::string::npos)
      again = k;
  }
  INFO(joined(r));
  CHECK(lost < r.log.size());    // the unconfirmed kill ended the term
  CHECK(again < r.log.size());   // and election went on: a new term was acquired
  CHECK(std::none_of(r.log.begin(), r.log.end(), [](const std::string& l) {
    return l.find("fatal exit") != std::string::npos;   // "side" went down before the deadline
  }));
}


/// Both outside writes on `backend`: the invariants hold, and election goes
/// on (the old holder once its modules are down, or a follower after its
/// wait, takes the lease again; a Kubernetes leader puts a deleted Lease
/// back and its term runs on).
static void outside_writes_keep_one_leader(backend_kind backend) {
  for (int param : {0, 1}) {
    CAPTURE(param);
    auto r = outside_write_run(backend, param);
    INFO(joined(r));
    CHECK_MESSAGE(r.ok, r.violation);
    auto lost = first_after(r, 30000, "lost term");
    CHECK((lost >= 0 || (backend == backend_kind::kubernetes && param == 0)));
    if (lost >= 0) {
      auto next = first_after(r, lost, "acquired term");
      CHECK(next >= 0);
      CHECK(next <= 30000 + 15000 + 5000);
    }
  }
}

TEST_CASE("writes from outside the protocol: a revoked or deleted etcd key is waited out, not taken at once") {
  // Regression. Before the fix a follower created the key as soon as
  // it was gone, while the old leader's slow module still stopped (two
  // leaders for its stop time). Now a key that vanishes before its etcd
  // lease could have expired (by the TTL the follower last read) is waited
  // out for one TTL from then.
  outside_writes_keep_one_leader(backend_kind::etcd);
}

TEST_CASE("writes from outside the protocol: an emptied holderIdentity is waited out, a deleted Lease too") {
  // The same on Kubernetes: `kubectl patch` emptying the holder
  // keeps leaseDurationSeconds (15), unlike a release (1): a follower waits
  // a lease duration from when it saw the change. A deleted Lease was
  // already waited out (its last holder's validity by the follower's clock).
  outside_writes_keep_one_leader(backend_kind::kubernetes);
}

TEST_CASE("the multi-lease world: a shared watch stream's faults hit every lease of its replica at once, and every lease keeps one leader, on either backend") {
  // Two replicas holding five leases each, every replica's runners on one
  // transport and one watch stream. Replica 1's stream is cut for 5 s (all
  // five leases see it go down and come back), then gets a 410 (a re-list),
  // both replicas' streams replay old versions, then deliver 3 s late; then
  // replica 0 shuts down: replica 1 takes every lease it held.
  using namespace std::chrono_literals;
  for (auto backend : {backend_kind::kubernetes, backend_kind::etcd}) {
    std::string name = to_string(backend);
    CAPTURE(name);
    auto sc = two_watching(backend, 13);
    sc.leases = 5;
    sc.shared_watch = true;
    add_op(sc, op_kind::stream_cut, 40s, 5s, 0, 1);
    add_op(sc, op_kind::stream_gone, 60s, 0s, 0, 1);
    add_op(sc, op_kind::stream_replay, 70s, 0s, 200);
    add_op(sc, op_kind::stream_delay, 80s, 10s, 3000);
    add_op(sc, op_kind::graceful_shutdown, 100s, 20s, 0, 0);
    sc.length = 160s;
    auto r = run(sc);
    INFO(joined(r));
    CHECK_MESSAGE(r.ok, r.violation);
    // Replica 1 alone saw its stream cut (a line per lease, names the cut).
    auto down = first_after(r, 40000, "replica-1 watch down: ");
    CHECK(down >= 40000);
    CHECK(down < 41000);
    CHECK(first_after(r, 0, "replica-0 watch down") == -1);
    for (int k = 0; k < 5; ++k) {
      std::string lease = "[sim-lock-" + std::to_string(k) + "]";
      CAPTURE(lease);
      auto line = [&](long long from, const std::string& what) {
        for (auto& l : r.log)
          if (std::stoll(l.substr(2, l.find("ms") - 2)) >= from && l.find(what) != std::string::npos
              && l.find(lease) != std::string::npos)
            return true;
        return false;
      };
      CHECK(line(40000, "stream cut"));   // the cut reached this lease
      CHECK(line(45000, "replica-1 watch up"));        // and its end did
      // The last term of every lease is replica 1's.
      std::string last;
      for (auto& l : r.log)
        if (l.find(" acquired term ") != std::string::npos && l.find(lease) != std::string::npos)
          last = l;
      CHECK(last.find("replica-1 acquired") != std::string::npos);
    }
  }
}

TEST_CASE("a peer that is not leasehold (client-go's rule) takes a lease left to expire, never beside a replica's work") {
  // Both replicas bind the leases they take to their sessions (a bound Lease
  // says it lasts 60 s); the peer comes once one of them leads. Both are cut
  // off for 100 s: the peer takes the lease once the record it saw stopped
  // changing for its leaseDurationSeconds (15 s plain, 60 s bound). An
  // operator relabels replica 0's session Lease. Then the store is down for
  // 20 s: the peer's term ends at its renew deadline, and whoever takes the
  // lease next, one runs at a time.
  using namespace std::chrono_literals;
  scenario sc;
  sc.seed = 15;
  sc.replicas = 2;
  sc.bind = {true, true};
  sc.bound_duration = 60s;
  add_op(sc, op_kind::foreign, 10s, 0s, 0, 0);
  add_op(sc, op_kind::partition, 30s, 100s, 0);
  add_op(sc, op_kind::session_write, 140s, 0s, 2, 0);
  add_op(sc, op_kind::api_down, 160s, 20s, 0, 0);
  sc.length = 260s;
  auto r = run(sc);
  INFO(joined(r));
  CHECK_MESSAGE(r.ok, r.violation);
  CHECK(r.foreign_takes >= 1);
  auto led = first_after(r, 0, "acquired term");
  CHECK(led >= 0);
  CHECK(led < 10000);
  auto took = first_after(r, 0, "foreign/work starts");
  // Not before the bound record's 60 s from the peer's first sight of it.
  CHECK(took >= 10000 + 60000);
  CHECK(first_after(r, 160000, "foreign/work stops") >= 160000);
}
