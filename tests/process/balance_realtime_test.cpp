// Balance groups in real time over real HTTP, against leasehold-apiserver on
// 127.0.0.1: the LeaseCandidate membership backend, and three replicas (one
// process, each with its own transport, membership client and 12 runners)
// spreading 12 leases. The checker reads what the leader-only work itself
// recorded: never two replicas running one lease's work at once.
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "leasehold/balance_group.hpp"
#include "leasehold/runtime.hpp"
#include "tests/support/timings.hpp"
#include "tests/support/wait.hpp"
#include "tests/support/work_log.hpp"
#include "transport/kube/lease_candidates.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using leasehold::test::eventually;
using leasehold::test::load_slack;
using leasehold::test::short_timings;
using leasehold::test::work_log;
using leasehold::test::work_registry;

namespace {

connection_config conn_to(const local_api_server& server) {
  connection_config c;
  c.server = "http://127.0.0.1:" + std::to_string(server.port());
  return c;
}

/// Kills every actor it holds when the test ends, passed or not, so that a
/// failed REQUIRE does not leave the actor system waiting for them.
struct kill_on_exit {
  std::vector<caf::actor> actors;
  template <class Handle>
  void add(const Handle& h) {
    actors.push_back(caf::actor_cast<caf::actor>(h));
  }
  ~kill_on_exit() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }
};

bool loads_are(work_log& log, std::map<std::string, int> want) {
  return log.loads() == want;
}

} // namespace

TEST_CASE("LeaseCandidate membership against leasehold-apiserver: announce, list, renew, withdraw") {
  local_api_server server;
  REQUIRE(server.start().error.empty());
  auto t = short_timings();
  lease_candidates a(conn_to(server)), b(conn_to(server)), c(conn_to(server));
  candidate ca{"default", "workers", "agent-a", t.lease_duration, ""};
  candidate cb{"default", "workers", "Agent_B", t.lease_duration, ""};   // not a DNS name as is
  candidate other{"default", "others", "agent-c", t.lease_duration, ""};
  auto first = a.announce(ca);
  REQUIRE_MESSAGE(first.ok(), first.error.describe());
  REQUIRE(c.announce(other).ok());
  auto seen = b.announce(cb);
  REQUIRE(seen.ok());
  REQUIRE(seen.value->size() == 2);   // the other group's candidate is not listed
  std::map<std::string, member_record> by_id;
  for (auto& m : *seen.value)
    by_id[m.identity] = m;
  REQUIRE(by_id.count("agent-a"));
  REQUIRE(by_id.count("Agent_B"));
  CHECK(by_id["agent-a"].joined <= by_id["Agent_B"].joined);
  // The object as kubectl sees it.
  httplib::Client http("127.0.0.1", server.port());
  auto got = http.Get("/apis/coordination.k8s.io/v1beta1/namespaces/default/leasecandidates/workers-agent-b");
  REQUIRE(got);
  REQUIRE(got->status == 200);
  auto obj = nlohmann::json::parse(got->body);
  CHECK(obj["spec"]["leaseName"] == "workers");
  CHECK(obj["metadata"]["labels"]["leasehold.io/group"] == "workers");
  CHECK(obj["metadata"]["annotations"]["leasehold.io/identity"] == "Agent_B");
  // A renewal changes the marker, not the join order.
  std::this_thread::sleep_for(5ms);
  auto again = a.announce(ca);
  REQUIRE(again.ok());
  for (auto& m : *again.value)
    if (m.identity == "agent-a") {
      CHECK(m.renewed != by_id["agent-a"].renewed);
      CHECK(m.joined == by_id["agent-a"].joined);
    }
  // Withdraw: gone for the others; a second withdraw finds nothing.
  auto w = a.withdraw(ca);
  REQUIRE(w.ok());
  CHECK(*w.value);
  auto after = b.announce(cb);
  REQUIRE(after.ok());
  REQUIRE(after.value->size() == 1);
  CHECK(after.value->front().identity == "Agent_B");
  auto w2 = a.withdraw(ca);
  REQUIRE(w2.ok());
  CHECK_FALSE(*w2.value);
}

TEST_CASE("LeaseCandidate lists that are not what the API defines name the field") {
  CHECK(parse_lease_candidates("[]", "g").error == "body: not a JSON object");
  CHECK(parse_lease_candidates(R"({"items":{}})", "g").error == "items: expected an array");
  auto no_id = parse_lease_candidates(
    R"({"items":[{"metadata":{"labels":{"leasehold.io/group":"g"},"creationTimestamp":"2026-12-04T06:00:00Z"},"spec":{"renewTime":"2026-12-04T06:00:00.000000Z"}}]})",
    "g");
  CHECK(no_id.error == "items[0].metadata.annotations.leasehold.io/identity: expected a string");
  auto bad_time = parse_lease_candidates(
    R"({"items":[{"metadata":{"labels":{"leasehold.io/group":"g"},"annotations":{"leasehold.io/identity":"x"},"creationTimestamp":"yesterday"},"spec":{"renewTime":"2026-12-04T06:00:00.000000Z"}}]})",
    "g");
  CHECK(bad_time.error == "items[0].metadata.creationTimestamp: expected an RFC 3339 time");
}

TEST_CASE("a crashed member's leftover LeaseCandidate is not counted by a replica that never "
          "saw it renew") {
  // A SIGKILLed replica leaves its LeaseCandidate behind. A replica started
  // later counted it live for a ttl from its first sight (its own clock),
  // so the dead member got a quota nobody took for a lease duration.
  local_api_server server;
  REQUIRE(server.start().error.empty());
  auto t = short_timings();
  candidate ghost{"default", "workers", "ghost", t.lease_duration, ""};
  auto hour_ago = std::chrono::time_point_cast<std::chrono::microseconds>(wall_clock::now()
                                                                          - std::chrono::hours(1));
  httplib::Client http("127.0.0.1", server.port());
  auto posted = http.Post(lease_candidates_path("default"),
                          lease_candidate_object(ghost, hour_ago).dump(), "application/json");
  REQUIRE(posted);
  REQUIRE(posted->status == 201);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto membership = spawn_http_membership(sys, bounded_by(conn_to(server), t));
  balance_group_options g;
  g.identity = "solo";
  g.ns = "default";
  g.group = "workers";
  g.timings = t;
  g.settle = 200ms;
  g.membership = membership;
  auto group = spawn_balance_group(sys, std::move(g));
  kill_on_exit cleanup;
  cleanup.add(group);
  cleanup.add(membership);
  // Well within the ghost's ttl by a first sight (2 s): never counted.
  bool ghost_counted = false, solo = false;
  for (auto end = steady::now() + 1500ms; steady::now() < end;) {
    auto st = group_status(sys, group, 1s);
    REQUIRE(st);
    ghost_counted = ghost_counted
                    || std::find(st->members.begin(), st->members.end(), "ghost") != st->members.end();
    solo = solo || st->members == std::vector<std::string>{"solo"};
    std::this_thread::sleep_for(50ms);
  }
  CHECK_FALSE(ghost_counted);
  CHECK(solo);
  CHECK(leave_group(sys, group, 5s));
  caf::anon_send_exit(membership, caf::exit_reason::user_shutdown);
}

TEST_CASE("three replicas balance 12 leases over real HTTP, then one leaves cleanly") {
  local_api_server server;
  REQUIRE(server.start().error.empty());
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  work_log log;
  auto reg = work_registry(log);
  auto t = short_timings();
  struct replica {
    lease_backend backend;
    membership_actor membership;
    caf::actor group;
  };
  std::vector<replica> reps;
  kill_on_exit cleanup;
  std::vector<std::string> ids{"bal-a", "bal-b", "bal-c"};
  for (auto& id : ids) {
    replica r;
    r.backend = spawn_http_backend(sys, bounded_by(conn_to(server), t));
    r.membership = spawn_http_membership(sys, bounded_by(conn_to(server), t));
    balance_group_options g;
    g.identity = id;
    g.ns = "default";
    g.group = "workers";
    g.timings = t;
    g.settle = 500ms;
    g.membership = r.membership;
    for (int k = 0; k < 12; ++k) {
      runner_options o;
      o.identity = id;
      o.lease = {"default", "workers-" + std::to_string(k)};
      o.timings = t;
      o.backend = r.backend;
      o.registry = reg;
      o.compete = false;
      o.events = [](const runtime_event&) {};
      module_spec m;
      m.name = "work";
      m.type = "work";
      o.modules.modules = {m};
      auto spawned = spawn_runner(sys, o);
      REQUIRE(spawned.errors.empty());
      cleanup.add(spawned.runner);
      g.leases.emplace_back(o.lease.name, spawned.runner);
    }
    r.group = spawn_balance_group(sys, std::move(g));
    cleanup.add(r.group);
    cleanup.add(r.backend.transport);
    cleanup.add(r.membership);
    reps.push_back(r);
  }
  auto started = steady::now();
  // New Leases: created unheld by the first standby, each held a lease
  // duration (2 s) from its create while the group settles (500 ms), then
  // taken by its assignee; bound with margin.
  REQUIRE(eventually([&] { return loads_are(log, {{"bal-a", 4}, {"bal-b", 4}, {"bal-c", 4}}); },
                     15s + load_slack));
  MESSAGE("4/4/4 after " << std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started).count() << " ms");
  std::this_thread::sleep_for(2 * t.lease_duration);
  CHECK(loads_are(log, {{"bal-a", 4}, {"bal-b", 4}, {"bal-c", 4}}));   // settled: no churn

  auto left_at = steady::now();
  REQUIRE(leave_group(sys, reps[2].group, 10s));
  REQUIRE(eventually([&] { return loads_are(log, {{"bal-a", 6}, {"bal-b", 6}}); }, 5s + load_slack));
  MESSAGE("the leaver's leases ran elsewhere after " << std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - left_at).count() << " ms");
  CHECK(log.overlaps() == 0);

  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(leave_group(sys, reps[i].group, 10s));
  }
  CHECK(log.loads().empty());
  CHECK(log.overlaps() == 0);
  for (auto& r : reps) {
    caf::anon_send_exit(r.backend.transport, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(r.membership, caf::exit_reason::user_shutdown);
  }
}
