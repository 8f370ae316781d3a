// `leasehold yield` between three agents against leasehold-apiserver:
// the CLI's exit codes and messages, /leader, the Lease, the
// metric, the Event, and the order of the journaled module stop and start;
// a yield asked of a follower, carried to the holder through the record's
// preferredHolder (Kubernetes and etcd); a target that is no member of a balance group refused
// before anything moves; and the POST /yield endpoint's refusals (loopback
// only, bad bodies).
#include <doctest/doctest.h>

#include <sstream>

#include "cmd/leasehold/health_server.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

agent* leader_of(three_agents& agents) {
  for (auto* x : agents.all) {
    auto l = json::parse(http_get(x->health_port(), "/leader").body, nullptr, false);
    if (l.is_object() && l.value("leading", false))
      return x;
  }
  return nullptr;
}

/// The journal's mono_ns of `identity`'s last `event` of module "tick" (0: none).
long long journaled(agent& a, const std::string& event) {
  std::istringstream in(read_file(a.journal_file()));
  std::string line;
  long long at = 0;
  while (std::getline(in, line)) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event && j.value("module", "") == "tick")
      at = j["mono_ns"].get<long long>();
  }
  return at;
}

std::string addr(agent& a) {
  return "127.0.0.1:" + std::to_string(a.health_port());
}

/// The candidates of `x`'s own lease, as its /debug/state lists them.
json candidates(agent& x) {
  auto l = agent_state(x)["leases"];
  return l.is_array() && !l.empty() ? l[0].value("candidates", json()) : json();
}

/// Every agent of `all` lists all of them as candidates of its own lease
/// (on Kubernetes a replica counts once seen to renew): a --to may name any.
void await_candidates(const std::vector<agent*>& all) {
  for (auto* x : all)
    REQUIRE(wait_until([&] { return candidates(*x).size() == all.size(); }, 15s));
}

} // namespace

TEST_CASE("leasehold yield --to: the named agent leads, the old leader's module stopped first; "
          "refusals exit 1 with the reason") {
  temp_dir dir;
  api_server api(dir);
  auto config = write_short_config(dir, short_config()["timings"]);
  three_agents agents(dir, config, {"--server", api.url()});
  agent* leader = nullptr;
  REQUIRE(wait_until([&] { return (leader = leader_of(agents)) != nullptr; }, 15s));
  await_candidates(agents.all);
  agent* target = leader == &agents.a ? &agents.b : &agents.a;
  agent* other = leader == &agents.c ? &agents.b : &agents.c;
  REQUIRE(wait_until([&] { return agent_state(*target)["holder"] == leader->identity(); }, 5s));

  auto r = run_cli(dir, {"yield", "--to", target->identity(), "--health-addr", addr(*leader)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("handed over to " + target->identity()) != std::string::npos);
  auto lease = api.lease("default", "agent-test");
  REQUIRE(lease);
  CHECK((*lease)["spec"]["holderIdentity"] == target->identity());
  CHECK((*lease)["spec"]["preferredHolder"] == target->identity());
  REQUIRE(wait_until([&] { return leader_of(agents) == target; }, 5s));
  auto view = json::parse(http_get(target->health_port(), "/leader").body);
  CHECK(view["leader"] == target->identity());
  // Never two at once: the old leader's ticker stopped before the target's started.
  REQUIRE(wait_until([&] { return journaled(*target, "module_started") > 0; }, 5s));
  CHECK(journaled(*leader, "module_stopped") > 0);
  CHECK(journaled(*leader, "module_stopped") <= journaled(*target, "module_started"));
  CHECK(metric(leader->health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(1));
  CHECK(metric(target->health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(0));
  CHECK(wait_until([&] {
    auto ev = http_get(api.port(), "/api/v1/namespaces/default/events");
    return ev.body.find(leader->identity() + " handed leadership over to " + target->identity())
           != std::string::npos;
  }, 5s));

  // Refusals: a target that is the leader itself, from a follower and
  // from the leader.
  r = run_cli(dir, {"yield", "--to", target->identity(), "--health-addr", addr(*other)}, 20s);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.err.find("unknown_target: \"" + target->identity() + "\" already holds the lease")
                  != std::string::npos, r.err);
  r = run_cli(dir, {"yield", "--to", target->identity(), "--health-addr", addr(*target)}, 20s);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.err.find("unknown_target") != std::string::npos, r.err);
  CHECK(leader_of(agents) == target);

  // Without a target: one of the others takes it.
  r = run_cli(dir, {"yield", "--health-addr", addr(*target)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  REQUIRE(wait_until([&] { auto* now = leader_of(agents); return now && now != target; }, 5s));
  CHECK(metric(target->health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(1));

  // Usage errors exit 2; an agent that is not there exits 1.
  CHECK(run_cli(dir, {"yield", "--to"}).code == 2);
  CHECK(run_cli(dir, {"yield", "--health-addr", "nonsense"}).code == 2);
  r = run_cli(dir, {"yield", "--health-addr", "127.0.0.1:1"});
  CHECK(r.code == 1);
  CHECK(r.err.find("cannot connect") != std::string::npos);
}

TEST_CASE("POST /yield: only from loopback; a bad body names the field") {
  int calls = 0;
  auto yield = [&](const std::string&, const std::string& to) -> std::optional<leasehold::yield_result> {
    ++calls;
    return leasehold::yield_result{leasehold::yield_status::handed_over, to.empty() ? "b" : to, ""};
  };
  using leasehold::agent::yield_reply;
  std::vector<std::string> names{"own", "work-1"};
  CHECK(yield_reply("10.1.2.3", "", names, yield).first == 403);
  CHECK(yield_reply("10.1.2.3", "", names, yield).second["error"].get<std::string>().find("loopback")
        != std::string::npos);
  CHECK(yield_reply("127.0.0.1", "[1]", names, yield).first == 400);
  CHECK(yield_reply("127.0.0.1", "{\"to\": 3}", names, yield).second["error"]
        == "POST /yield: body.to: must be a string (an identity)");
  CHECK(yield_reply("::1", "{\"too\": \"x\"}", names, yield).first == 400);
  CHECK(calls == 0);
  auto ok = yield_reply("::1", "{\"to\": \"c\"}", names, yield);
  CHECK(ok.first == 200);
  CHECK(ok.second["successor"] == "c");
  CHECK(yield_reply("127.0.0.1", "", names, yield).second["status"] == "handed_over");
  auto none = [](const std::string&, const std::string&) -> std::optional<leasehold::yield_result> {
    return std::nullopt;
  };
  CHECK(yield_reply("127.0.0.1", "", names, none).first == 504);
  // "lease": one of the agent's (default its own); another is a 404 naming it and listing them.
  std::string asked;
  auto which = [&](const std::string& lease, const std::string&) -> std::optional<leasehold::yield_result> {
    asked = lease;
    return leasehold::yield_result{leasehold::yield_status::handed_over, "b", ""};
  };
  CHECK(yield_reply("127.0.0.1", "", names, which).first == 200);
  CHECK(asked == "own");
  auto one = yield_reply("127.0.0.1", "{\"lease\": \"work-1\"}", names, which);
  CHECK(one.first == 200);
  CHECK(one.second["lease"] == "work-1");
  CHECK(asked == "work-1");
  auto missing = yield_reply("127.0.0.1", "{\"lease\": \"work-9\"}", names, which);
  CHECK(missing.first == 404);
  CHECK(missing.second["error"]
        == "POST /yield: body.lease: this agent has no lease \"work-9\" (its leases: own, work-1)");
  CHECK(yield_reply("127.0.0.1", "{\"lease\": 1}", names, which).second["error"]
        == "POST /yield: body.lease: must be a string (a lease name)");
  CHECK(asked == "work-1");
}

TEST_CASE("etcd: leasehold yield --to hands over to each named agent in turn (the target travels "
          "in the key's value)") {
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  auto config = write_short_config(dir, short_config()["timings"]);
  three_agents agents(dir, config, {"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()});
  agent* leader = nullptr;
  REQUIRE(wait_until([&] { return (leader = leader_of(agents)) != nullptr; }, 20s));
  await_candidates(agents.all);
  // Each round names the agent that would not be next by order: a chance winner would miss.
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    agent* target = nullptr;
    for (auto* x : agents.all)
      if (x != leader)
        target = x;   // the last one that is not the leader
    REQUIRE(wait_until([&] { return agent_state(*target)["holder"] == leader->identity(); }, 5s));
    auto r = run_cli(dir, {"yield", "--to", target->identity(), "--health-addr", addr(*leader)}, 20s);
    CHECK_MESSAGE(r.code == 0, r.err);
    REQUIRE(wait_until([&] { return leader_of(agents) == target; }, 5s));
    CHECK(journaled(*leader, "module_stopped") <= journaled(*target, "module_started"));
    leader = target;
  }
}

namespace {

/// A yield asked of a follower of `agents`: --to the other follower, then
/// without --to; `stored_holder` reads the holder the store keeps.
void yield_asked_of_follower(const temp_dir& dir, three_agents& agents,
                             const std::function<std::string()>& stored_holder) {
  agent* leader = nullptr;
  REQUIRE(wait_until([&] { return (leader = leader_of(agents)) != nullptr; }, 20s));
  await_candidates(agents.all);
  std::vector<agent*> followers;
  for (auto* x : agents.all)
    if (x != leader)
      followers.push_back(x);
  auto* asked = followers[0];
  auto* target = followers[1];
  for (auto* f : followers)
    REQUIRE(wait_until([&] { return agent_state(*f)["holder"] == leader->identity(); }, 5s));

  auto r = run_cli(dir, {"yield", "--to", target->identity(), "--health-addr", addr(*asked)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("handed over to " + target->identity() + ": carried through the store")
        != std::string::npos);
  CHECK(stored_holder() == target->identity());
  REQUIRE(wait_until([&] { return leader_of(agents) == target; }, 5s));
  REQUIRE(wait_until([&] { return journaled(*target, "module_started") > 0; }, 5s));
  CHECK(journaled(*leader, "module_stopped") > 0);
  CHECK(journaled(*leader, "module_stopped") <= journaled(*target, "module_started"));
  CHECK(metric(leader->health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(1));
  CHECK(metric(asked->health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(0));

  // Without --to: the follower asked names itself.
  REQUIRE(wait_until([&] { return agent_state(*asked)["holder"] == target->identity(); }, 5s));
  r = run_cli(dir, {"yield", "--health-addr", addr(*asked)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("handed over to " + asked->identity()) != std::string::npos);
  REQUIRE(wait_until([&] { return leader_of(agents) == asked; }, 5s));
  CHECK(stored_holder() == asked->identity());
}

} // namespace

TEST_CASE("leasehold yield asked of a follower: carried to the holder through preferredHolder on "
          "the Lease; without --to the follower asked takes it") {
  temp_dir dir;
  api_server api(dir);
  auto config = write_short_config(dir, short_config()["timings"]);
  three_agents agents(dir, config, {"--server", api.url()});
  yield_asked_of_follower(dir, agents, [&]() -> std::string {
    auto lease = api.lease("default", "agent-test");
    return lease ? (*lease)["spec"].value("holderIdentity", "") : "(no Lease)";
  });
}

TEST_CASE("etcd: leasehold yield asked of a follower: carried to the holder through preferredHolder "
          "in the key's value, the key left on the holder's etcd lease; without --to the follower "
          "asked takes it") {
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  auto config = write_short_config(dir, short_config()["timings"]);
  three_agents agents(dir, config, {"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()});
  leasehold::etcd_config store;
  store.endpoints = {etcd.endpoint()};
  yield_asked_of_follower(dir, agents, [&] {
    auto l = leasehold::etcd_client(store).get_lease({"default", "agent-test"});
    return l.ok() ? l.value->spec.holder_identity : l.error.describe();
  });
}

TEST_CASE("leasehold yield --to a name that is no member of the balance group is refused on every "
          "agent before anything moves; a member named from a follower takes the lease") {
  temp_dir dir;
  api_server api(dir);
  json mods = json::array();
  for (int k = 0; k < 2; ++k)
    mods.push_back({{"type", "exec"},
                    {"name", "work-" + std::to_string(k)},
                    {"balance", "workers"},
                    {"settings", {{"command", {"sleep", "3600"}}, {"grace_ms", 100}}}});
  auto doc = short_config();
  doc["lease_name"] = "yield-group";
  doc["modules"] = mods;
  auto config = dir.file("config.json");
  write_file(config, doc.dump());
  agent a(dir, "agent-a", config, {"--server", api.url()});
  agent b(dir, "agent-b", config, {"--server", api.url()});
  REQUIRE(a.health_port() > 0);
  REQUIRE(b.health_port() > 0);
  auto holder_of = [&](const std::string& lease) -> std::string {
    auto l = api.lease("default", lease);
    return l ? (*l)["spec"].value("holderIdentity", "") : "";
  };
  auto members = [&](agent& x) {
    auto g = agent_state(x)["groups"];
    return g.is_array() && !g.empty() ? g[0]["members"].size() : 0;
  };
  REQUIRE(wait_until([&] {
    return members(a) == 2 && members(b) == 2 && !holder_of("work-0").empty()
           && holder_of("work-0") != holder_of("work-1") && !holder_of("work-1").empty();
  }, 20s));
  std::this_thread::sleep_for(500ms);   // settled
  auto holder = holder_of("work-0");
  agent& h = holder == "agent-a" ? a : b;
  agent& n = holder == "agent-a" ? b : a;
  for (agent* x : {&n, &h}) {
    CAPTURE(x->identity());
    auto r = run_cli(dir, {"yield", "--lease", "work-0", "--to", "agent-99", "--health-addr",
                           addr(*x)}, 20s);
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.err.find("unknown_target: agent-99 is not a settled member of group workers "
                             "(members: agent-a, agent-b); lease work-0 stays where it is")
                    != std::string::npos, r.err);
    auto lease = api.lease("default", "work-0");
    REQUIRE(lease);
    CHECK((*lease)["spec"]["holderIdentity"] == holder);
    CHECK((*lease)["spec"].value("preferredHolder", "") == "");
  }
  CHECK(metric(h.health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(0));

  auto r = run_cli(dir, {"yield", "--lease", "work-0", "--to", n.identity(), "--health-addr",
                         addr(n)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("lease work-0: handed over to " + n.identity()) != std::string::npos);
  CHECK(wait_until([&] { return holder_of("work-0") == n.identity(); }, 5s));
}

namespace {

/// Two agents of `config` (extra args: the store), each announcing itself for
/// the agent's own lease: a --to naming neither is refused by either before
/// anything moves (the holder's ticker never stops), one naming the follower
/// hands over. `holder_of` and `preferred_of` read the store.
void yield_outside_groups(const temp_dir& dir, const std::string& config,
                          const std::vector<std::string>& store_args,
                          const std::function<std::string()>& holder_of,
                          const std::function<std::string()>& preferred_of) {
  agent a(dir, "agent-a", config, store_args);
  agent b(dir, "agent-b", config, store_args);
  REQUIRE(a.health_port() > 0);
  REQUIRE(b.health_port() > 0);
  await_candidates({&a, &b});
  CHECK(candidates(a) == json{"agent-a", "agent-b"});
  REQUIRE(wait_until([&] { return !holder_of().empty(); }, 10s));
  auto holder = holder_of();
  agent& h = holder == "agent-a" ? a : b;
  agent& n = holder == "agent-a" ? b : a;
  REQUIRE(wait_until([&] { return journaled(h, "module_started") > 0; }, 5s));
  for (agent* x : {&n, &h}) {
    CAPTURE(x->identity());
    auto r = run_cli(dir, {"yield", "--to", "agent-99", "--health-addr", addr(*x)}, 20s);
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.err.find("unknown_target: agent-99 is not a settled member of the replicas of "
                             "lease agent-test (members: agent-a, agent-b); lease agent-test stays "
                             "where it is") != std::string::npos, r.err);
    CHECK(holder_of() == holder);
    CHECK(preferred_of() == "");
  }
  std::this_thread::sleep_for(1s);   // a release would show by now
  CHECK(holder_of() == holder);
  CHECK(journaled(h, "module_stopped") == 0);   // the work itself never stopped
  CHECK(metric(h.health_port(), "leasehold_voluntary_handovers_total") == std::optional<double>(0));

  auto r = run_cli(dir, {"yield", "--to", n.identity(), "--health-addr", addr(n)}, 20s);
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(wait_until([&] { return holder_of() == n.identity(); }, 5s));
  REQUIRE(wait_until([&] { return journaled(n, "module_started") > 0; }, 5s));
  CHECK(journaled(h, "module_stopped") <= journaled(n, "module_started"));
  for (agent* x : {&a, &b}) {
    x->process().signal(SIGTERM);
    CHECK(x->process().wait(10s) == std::optional<int>(0));
  }
}

} // namespace

TEST_CASE("leasehold yield --to a name that announces no lease outside a group is refused on "
          "every agent before anything moves; the LeaseCandidate goes with SIGTERM") {
  temp_dir dir;
  api_server api(dir);
  auto config = write_short_config(dir, short_config()["timings"]);
  auto lease = [&] { return api.lease("default", "agent-test"); };
  yield_outside_groups(dir, config, {"--server", api.url()},
                       [&] { auto l = lease(); return l ? (*l)["spec"].value("holderIdentity", "") : ""; },
                       [&] { auto l = lease(); return l ? (*l)["spec"].value("preferredHolder", "") : ""; });
  // Both agents stopped by SIGTERM: each withdrew its LeaseCandidate.
  for (auto* id : {"agent-a", "agent-b"})
    CHECK(http_get(api.port(), std::string("/apis/coordination.k8s.io/v1beta1/namespaces/default/"
                                           "leasecandidates/lease.agent-test-") + id).status == 404);
}

TEST_CASE("etcd: leasehold yield --to a name that announces no lease outside a group is refused "
          "on every agent before anything moves") {
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  auto config = write_short_config(dir, short_config()["timings"]);
  leasehold::etcd_config store;
  store.endpoints = {etcd.endpoint()};
  auto read = [&] { return leasehold::etcd_client(store).get_lease({"default", "agent-test"}); };
  yield_outside_groups(dir, config, {"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()},
                       [&] { auto l = read(); return l.ok() ? l.value->spec.holder_identity : ""; },
                       [&] { auto l = read(); return l.ok() ? l.value->spec.preferred_holder : ""; });
}
