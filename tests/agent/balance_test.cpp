// Balance groups in `leasehold run`: three agents
// spread nine balanced exec modules, each under its own lease, against
// leasehold-apiserver. The checks read what the modules' own commands wrote
// (a "start"/"stop" line per run in the module's work file): each agent runs
// its floor/ceil share, no two agents ever ran one module's command at once,
// a SIGTERMed agent's modules run elsewhere within a second and a joining
// agent takes its share with exactly floor(M/(N+1)) moves; a reload reaches
// every lease's module; a SIGKILLed agent's modules run elsewhere after its
// leases expire. /debug/state, /leader and /metrics must say the same as the
// work. On Kubernetes (LeaseCandidate membership) and on etcd (member keys).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;
using steady = std::chrono::steady_clock;

namespace {

constexpr int modules = 9;
/// The group's settle time, set on one module (balance: {group, settle_ms}).
constexpr int settle_ms = 2500;   // longer than the default 1 s plus rounds: the joiner check tells them apart

/// The exec command: notes its start, and its stop on SIGTERM (the exec
/// module's stop); a SIGKILLed agent's command dies with it (the fence
/// keeper's PR_SET_PDEATHSIG) and notes nothing. The trap is set before the
/// start is noted: an agent SIGTERMed just after it started the command
/// (d, taking a's released leases as the test stops a) used to kill it
/// between the two lines, a start without a stop (a CI run of
/// agent-balance failed so).
const char* work_script = R"(#!/bin/bash
f="$1"
trap 'echo "stop $LEASEHOLD_IDENTITY $EPOCHREALTIME -" >> "$f"; exit 0' TERM
echo "start $LEASEHOLD_IDENTITY $EPOCHREALTIME ${WORK_VERSION:-1}" >> "$f"
sleep 3600 & wait $!
)";

std::string work_file(const temp_dir& dir, int k) {
  return dir.file("work-" + std::to_string(k) + ".log");
}

/// `version`: the commands' WORK_VERSION (a reload changes it).
json balance_config(const temp_dir& dir, int version = 1) {
  auto script = dir.file("work.sh");
  write_file(script, work_script);
  ::chmod(script.c_str(), 0755);
  json mods = json::array();
  for (int k = 0; k < modules; ++k)
    mods.push_back({{"type", "exec"},
                    {"name", "work-" + std::to_string(k)},
                    {"balance", k == 0 ? json{{"group", "workers"}, {"settle_ms", settle_ms}}
                                       : json("workers")},
                    {"settings", {{"command", {script, work_file(dir, k)}},
                                  {"env", {{"WORK_VERSION", std::to_string(version)}}},
                                  // The stop line is the work's own word that it
                                  // stopped: a command SIGKILLed after its grace
                                  // writes none. 200 ms was too short for bash to
                                  // run its trap at load 8 (an agent-balance run
                                  // failed so); below module_stop_timeout (400 ms)
                                  // with room for the kill.
                                  {"grace_ms", 350}}}});
  mods.push_back({{"type", "leader_endpoint"}});
  auto doc = short_config();
  doc["lease_name"] = "balance-test";
  doc["modules"] = mods;
  return doc;
}

/// One run of a module's command: who, from, to (seconds, wall clock; to
/// is infinite while it runs).
struct run {
  std::string identity;
  double from = 0, to = 1e18;
  std::string version;   // the command's WORK_VERSION
};

/// The runs of module k, from its work file. A start without its stop ends
/// at `ended[identity]` (the agent was SIGKILLed then), else it runs.
std::vector<run> runs_of(const temp_dir& dir, int k, const std::map<std::string, double>& ended) {
  std::ifstream in(work_file(dir, k));
  std::string what, id, version;
  double at = 0;
  std::vector<run> out;
  std::map<std::string, std::size_t> open;
  while (in >> what >> id >> at >> version) {
    if (what == "start") {
      open[id] = out.size();
      out.push_back({id, at, 1e18, version});
    } else if (what == "stop" && open.count(id)) {
      out[open[id]].to = at;
      open.erase(id);
    }
  }
  for (auto& [id, i] : open)
    if (auto e = ended.find(id); e != ended.end())
      out[i].to = e->second;
  return out;
}

/// Pairs of runs of one module by two agents that overlap in time.
int overlaps(const temp_dir& dir, const std::map<std::string, double>& ended) {
  int n = 0;
  for (int k = 0; k < modules; ++k) {
    auto rs = runs_of(dir, k, ended);
    for (std::size_t i = 0; i < rs.size(); ++i)
      for (std::size_t j = i + 1; j < rs.size(); ++j)
        if (rs[i].identity != rs[j].identity && rs[i].from < rs[j].to && rs[j].from < rs[i].to)
          ++n;
  }
  return n;
}

/// Who runs each module's command now ("" nobody; "?" more than one), or
/// with `version`, which WORK_VERSION.
std::vector<std::string> runners(const temp_dir& dir, const std::map<std::string, double>& ended,
                                 bool version = false) {
  std::vector<std::string> out;
  for (int k = 0; k < modules; ++k) {
    std::string who;
    for (auto& r : runs_of(dir, k, ended))
      if (r.to >= 1e18)
        who = who.empty() ? (version ? r.version : r.identity) : "?";
    out.push_back(who);
  }
  return out;
}

/// "work-k: who" for each module whose command still runs (a failure's message).
std::string running(const std::vector<std::string>& who) {
  std::string out;
  for (int k = 0; k < modules; ++k)
    if (!who[k].empty())
      out += "work-" + std::to_string(k) + ": " + who[k] + "; ";
  return out;
}

std::map<std::string, int> loads(const std::vector<std::string>& who) {
  std::map<std::string, int> out;
  for (auto& w : who)
    if (!w.empty())
      ++out[w];
  return out;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::int64_t ms_since(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

/// The leases an agent says it leads (/debug/state), sorted.
std::set<std::string> says_it_leads(agent& a) {
  std::set<std::string> out;
  auto st = agent_state(a);
  if (st.is_object() && st["leases"].is_array())
    for (auto& l : st["leases"])
      if (l.value("leading", false) && l.value("group", "") == "workers")
        out.insert(l["lease"].get<std::string>());
  return out;
}

std::set<std::string> runs_on(const std::vector<std::string>& who, const std::string& id) {
  std::set<std::string> out;
  for (int k = 0; k < modules; ++k)
    if (who[k] == id)
      out.insert("work-" + std::to_string(k));
  return out;
}

} // namespace

/// The scenario on one backend (`args`: how to reach it). `full`: also a
/// reload and a SIGKILL (each a few seconds: on one backend only).
void balance_scenario(const temp_dir& dir, const std::vector<std::string>& args, bool full) {
  auto config = dir.file("config.json");
  write_file(config, balance_config(dir).dump());
  std::vector<std::string> validate{"validate", "--config", config};
  validate.insert(validate.end(), args.begin(), args.end());
  auto v = run_cli(dir, validate);
  CHECK_MESSAGE(v.code == 0, v.err);
  CHECK(v.out.find("lease default/balance-test, balance group workers (9 leases)")
        != std::string::npos);
  std::map<std::string, double> ended;
  auto a = std::make_unique<agent>(dir, "agent-a", config, args);
  auto b = std::make_unique<agent>(dir, "agent-b", config, args);
  auto c = std::make_unique<agent>(dir, "agent-c", config, args);
  REQUIRE(a->health_port() > 0);
  REQUIRE(b->health_port() > 0);
  REQUIRE(c->health_port() > 0);
  auto started = steady::now();
  std::map<std::string, int> three_each{{"agent-a", 3}, {"agent-b", 3}, {"agent-c", 3}};
  REQUIRE(wait_until([&] { return loads(runners(dir, ended)) == three_each; }, 20s));
  auto balanced_ms = ms_since(started);
  MESSAGE("3/3/3 by the work files " << balanced_ms << " ms after the start");
  // A fresh store: each Lease is created unheld by the first agent to find
  // it absent, and its creation hold (a lease duration, 2 s) runs during
  // the settle time. Not a timed goal (bench/README.md has the figure): an
  // upper bound that holds only if they overlap (in sequence they took
  // settle + 2 rounds + lease duration + a round, ~5.4 s; now ~3.4 s, so
  // 1.6 s of margin for a loaded machine).
  CHECK(balanced_ms < settle_ms + 2000 + 500);
  std::this_thread::sleep_for(600ms);   // settled: nothing moves
  auto who = runners(dir, ended);
  CHECK(loads(who) == three_each);
  // What the agents say is what the work shows.
  for (auto* x : {a.get(), b.get(), c.get()}) {
    CHECK(says_it_leads(*x) == runs_on(who, x->identity()));
    auto view = json::parse(http_get(x->health_port(), "/leader").body, nullptr, false);
    REQUIRE(view.is_object());
    std::set<std::string> leads;
    for (auto& l : view["leads"])
      if (l != "balance-test")
        leads.insert(l.get<std::string>());
    CHECK(leads == runs_on(who, x->identity()));
    CHECK(metric(x->health_port(), "leasehold_balance_assigned{group=\"workers\"}")
          == std::optional<double>(3));
    CHECK(metric(x->health_port(), "leasehold_balance_members{group=\"workers\"}")
          == std::optional<double>(3));
    // Standing by for the others' leases is healthy and ready.
    CHECK(http_get(x->health_port(), "/livez").status == 200);
    CHECK(http_get(x->health_port(), "/healthz").status == 200);
    CHECK(http_get(x->health_port(), "/readyz").status == 200);
  }
  auto k0 = std::find(who.begin(), who.end(), "agent-a") - who.begin();
  CHECK(metric(a->health_port(),
               "leasehold_lease_leader{lease=\"work-" + std::to_string(k0) + "\",group=\"workers\"}")
        == std::optional<double>(1));
  CHECK(overlaps(dir, ended) == 0);

  // A yield of one balanced lease: a's work-k0 goes to the group's
  // rendezvous runner-up and stays there for good (the yield hold pins it
  // while the group rebalances around it: one of the successor's leases
  // comes to a); never two runs at once. A lease a does not have is a
  // usage error naming it.
  auto a_addr = "127.0.0.1:" + std::to_string(a->health_port());
  auto bad = run_cli(dir, {"yield", "--lease", "work-99", "--health-addr", a_addr}, 10s);
  CHECK(bad.code == 2);
  CHECK_MESSAGE(bad.err.find("no lease \"work-99\" (its leases: balance-test, work-") != std::string::npos,
                bad.err);
  auto lease0 = "work-" + std::to_string(k0);
  auto yielded_at = steady::now();
  auto y = run_cli(dir, {"yield", "--lease", lease0, "--health-addr", a_addr}, 20s);
  CHECK_MESSAGE(y.code == 0, y.err);
  CHECK(y.out.find("lease " + lease0 + ": handed over to agent-") != std::string::npos);
  std::string successor;
  REQUIRE(wait_until([&] {
    auto now_who = runners(dir, ended);
    successor = now_who[k0];
    return !successor.empty() && successor != "agent-a" && successor != "?"
           && loads(now_who) == three_each;
  }, 5s));
  MESSAGE(lease0 << " ran on " << successor << " and the group was 3/3/3 again "
                 << ms_since(yielded_at) << " ms after the yield");
  CHECK(y.out.find("handed over to " + successor) != std::string::npos);
  std::this_thread::sleep_for(2600ms);   // past the yield hold (lease duration 2 s): nothing moves back
  auto after_yield = runners(dir, ended);
  CHECK(after_yield[k0] == successor);
  CHECK(loads(after_yield) == three_each);
  int yield_moves = 0;
  for (int k = 0; k < modules; ++k)
    if (after_yield[k] != who[k]) {
      ++yield_moves;
      CHECK((k == k0 || after_yield[k] == "agent-a"));   // the swap: one of the successor's to a
    }
  CHECK(yield_moves == 2);
  CHECK(metric(a->health_port(), "leasehold_voluntary_handovers_total") >= std::optional<double>(1));
  CHECK(metric(a->health_port(), "leasehold_lease_voluntary_handovers_total{lease=\"" + lease0
                                   + "\",group=\"workers\"}")
        == std::optional<double>(1));
  CHECK(overlaps(dir, ended) == 0);
  who = after_yield;

  // SIGTERM: c leaves its group (withdraws, releases); its three move to a and b.
  auto left_at = steady::now();
  c->process().signal(SIGTERM);
  REQUIRE(wait_until([&] {
    auto l = loads(runners(dir, ended));
    return l.count("agent-c") == 0 && l["agent-a"] + l["agent-b"] == modules
           && std::abs(l["agent-a"] - l["agent-b"]) <= 1;
  }, 5s));
  auto term_ms = ms_since(left_at);
  MESSAGE("a SIGTERMed agent's modules ran elsewhere after " << term_ms << " ms");
  CHECK(term_ms < 2000);   // no expiry wait (lease duration 2 s); typically ~100 ms
  CHECK(c->process().wait(5s) == std::optional<int>(0));
  // Only c's leases moved.
  auto after_leave = runners(dir, ended);
  for (int k = 0; k < modules; ++k)
    if (who[k] != "agent-c")
      CHECK(after_leave[k] == who[k]);

  // A joiner: 9 over 3 again, floor(9/3) = 3 moves, all to d, none before
  // d has been a member for the group's settle time.
  auto d_started = wall_now();
  auto d = std::make_unique<agent>(dir, "agent-d", config, args);
  REQUIRE(d->health_port() > 0);
  auto joined_at = steady::now();
  std::map<std::string, int> with_d{{"agent-a", 3}, {"agent-b", 3}, {"agent-d", 3}};
  REQUIRE(wait_until([&] { return loads(runners(dir, ended)) == with_d; }, 10s));
  MESSAGE("the joiner ran its share " << ms_since(joined_at) << " ms after its start");
  std::this_thread::sleep_for(600ms);
  auto after_join = runners(dir, ended);
  CHECK(loads(after_join) == with_d);
  int moves = 0;
  for (int k = 0; k < modules; ++k)
    if (after_join[k] != after_leave[k]) {
      ++moves;
      CHECK(after_join[k] == "agent-d");
    }
  CHECK(moves == 3);
  CHECK(overlaps(dir, ended) == 0);
  double d_first = 1e18;
  for (int k = 0; k < modules; ++k)
    for (auto& r : runs_of(dir, k, ended))
      if (r.identity == "agent-d")
        d_first = std::min(d_first, r.from);
  MESSAGE("the joiner's first work started " << (d_first - d_started) * 1000 << " ms after its start");
  CHECK(d_first - d_started >= settle_ms / 1000.0);
  auto groups = agent_state(*d)["groups"];
  REQUIRE(groups.is_array());
  CHECK(groups[0]["settle_ms"] == settle_ms);
  if (!full) {
    for (auto* x : {a.get(), b.get(), d.get()})
      x->process().signal(SIGTERM);
    for (auto* x : {a.get(), b.get(), d.get()})
      CHECK(x->process().wait(5s) == std::optional<int>(0));
    CHECK_MESSAGE(loads(runners(dir, ended)).empty(), running(runners(dir, ended)));
    CHECK(overlaps(dir, ended) == 0);
    return;
  }

  // A reload that moves a module to another group takes a restart: it is
  // rejected as a whole (the log says why) and nothing moves.
  auto moved = balance_config(dir);
  moved["modules"][0]["balance"] = "others";
  write_file(config, moved.dump());
  REQUIRE(wait_until([&] {
    for (auto& l : a->log_lines())
      if (l.value("msg", "").find("which leases or balance groups") != std::string::npos)
        return true;
    return false;
  }, 5s));
  CHECK(runners(dir, ended) == after_join);

  // A reload changes every module's settings where it runs: each command
  // restarts with WORK_VERSION 2 on the agent that leads its lease.
  write_file(config, balance_config(dir, 2).dump());
  REQUIRE(wait_until([&] {
    return runners(dir, ended, true) == std::vector<std::string>(modules, "2");
  }, 5s));
  CHECK(runners(dir, ended) == after_join);
  CHECK(overlaps(dir, ended) == 0);

  // SIGKILL: b's leases expire and run elsewhere; its commands died with it.
  ended["agent-b"] = wall_now();
  b->process().signal(SIGKILL);
  REQUIRE(wait_until([&] {
    auto l = loads(runners(dir, ended));
    return l.count("agent-b") == 0 && l["agent-a"] + l["agent-d"] == modules;
  }, 10s));
  CHECK(overlaps(dir, ended) == 0);
  for (auto* x : {a.get(), d.get()}) {
    x->process().signal(SIGTERM);
    CHECK(x->process().wait(5s) == std::optional<int>(0));
  }
  // Every command stopped with its agent.
  CHECK_MESSAGE(loads(runners(dir, ended)).empty(), running(runners(dir, ended)));
  CHECK(overlaps(dir, ended) == 0);
}

TEST_CASE("Kubernetes: three agents balance nine modules; SIGTERM moves one agent's share at "
          "once; a joiner takes exactly its share; a reload reaches every lease; SIGKILL; never "
          "two runs of one module at once") {
  temp_dir dir;
  api_server api(dir);
  balance_scenario(dir, {"--server", api.url()}, true);
}

TEST_CASE("etcd: the same balance, yield, leave, join, reload and SIGKILL on member keys") {
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  balance_scenario(dir, {"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()}, true);
}

TEST_CASE("a crash-looping module on a lease of its own fails /healthz naming that lease; "
          "/livez stays up") {
  temp_dir dir;
  api_server api(dir);
  auto doc = short_config();
  doc["modules"].push_back({{"type", "exec"},
                            {"name", "crashy"},
                            {"balance", "workers"},
                            {"restart", {{"max_restarts", 0}, {"within_ms", 60000}}},
                            {"settings", {{"command", {"false"}}, {"grace_ms", 100}}}});
  auto config = dir.file("config.json");
  write_file(config, doc.dump());
  agent a(dir, "agent-a", config, {"--server", api.url()});
  REQUIRE(a.health_port() > 0);
  http_reply h;
  REQUIRE(wait_until([&] { return (h = http_get(a.health_port(), "/healthz")).status == 503; },
                     15s));
  auto body = json::parse(h.body);
  CAPTURE(h.body);
  auto reason = body["reason"].get<std::string>();
  CHECK(reason.rfind("lease crashy: module crashy ", 0) == 0);
  CHECK(reason.find("crash-loop") != std::string::npos);
  CHECK(http_get(a.health_port(), "/livez").status == 200);
}

TEST_CASE("Kubernetes: a SIGTERMed agent removes its own LeaseCandidate; a SIGKILLed one's is "
          "removed by the others two lease durations after its last renew") {
  temp_dir dir;
  api_server api(dir);
  auto doc = short_config();
  doc["modules"] = json::array();
  for (int k = 0; k < 2; ++k)
    doc["modules"].push_back({{"type", "exec"},
                              {"name", "w-" + std::to_string(k)},
                              {"balance", "workers"},
                              {"settings", {{"command", {"sleep", "3600"}}, {"grace", "100ms"}}}});
  auto config = dir.file("config.json");
  write_file(config, doc.dump());
  three_agents agents(dir, config, {"--server", api.url()});
  auto candidate = [&](agent* x) {
    return http_get(api.port(), "/apis/coordination.k8s.io/v1beta1/namespaces/default/"
                                "leasecandidates/workers-" + x->identity()).status;
  };
  for (auto* x : agents.all)
    REQUIRE(wait_until([&] { return candidate(x) == 200; }, 10s));
  auto* termed = agents.all[0];
  auto* killed = agents.all[1];
  termed->process().signal(SIGTERM);
  REQUIRE(termed->process().wait(10s) == std::optional<int>(0));
  CHECK(candidate(termed) == 404);   // withdrawn before the exit
  killed->process().signal(SIGKILL);
  REQUIRE(killed->process().wait(5s));
  auto killed_at = std::chrono::steady_clock::now();
  CHECK(candidate(killed) == 200);   // left behind
  // Two lease durations (2 s each) on the survivor's clock, then its next round.
  REQUIRE(wait_until([&] { return candidate(killed) == 404; }, 8s));
  CHECK(std::chrono::steady_clock::now() - killed_at >= 3500ms);
  CHECK(candidate(agents.all[2]) == 200);
}
