// Two agents against leasehold-apiserver: one leader, the HTTP endpoints,
// live config reload, and the lease handed over on SIGTERM.
#include <doctest/doctest.h>

#include <signal.h>

#include <thread>

#include "leasehold/lease.hpp"
#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

bool leads(agent& a) {
  auto st = agent_state(a);
  return st.is_object() && st["state"] == "leader";
}

std::string module_state(agent& a, const std::string& name) {
  auto st = agent_state(a);
  if (!st.is_object())
    return "";
  for (auto& m : st["modules"])
    if (m["name"] == name)
      return m["state"];
  return "";
}

} // namespace

TEST_CASE("two agents: one leader, endpoints, reload, SIGTERM hand-over") {
  temp_dir dir;
  api_server api(dir);
  auto config = dir.file("config.json");
  write_file(config, short_config().dump());
  agent a(dir, "agent-a", config, {"--server", api.url()});
  agent b(dir, "agent-b", config, {"--server", api.url()});
  REQUIRE(a.health_port() > 0);
  REQUIRE(b.health_port() > 0);

  // Exactly one leads.
  REQUIRE(wait_until([&] { return leads(a) || leads(b); }, 10s));
  agent& leader = leads(a) ? a : b;
  agent& follower = leads(a) ? b : a;
  // Once the other one has seen the leader's term, it does not lead.
  REQUIRE(wait_until([&] { return agent_state(follower)["holder"] == leader.identity(); }, 5s));
  CHECK(!leads(follower));
  REQUIRE(wait_until([&] { return module_state(leader, "tick") == "running"; }, 5s));
  CHECK(module_state(follower, "tick") == "stopped");

  SUBCASE("debug state, health, readiness, metrics, leader") {
    auto st = agent_state(follower);
    CHECK(st["holder"] == leader.identity());
    CHECK(st["identity"] == follower.identity());
    CHECK(st["lease"] == "default/agent-test");

    auto h = http_get(leader.health_port(), "/healthz");
    CHECK(h.status == 200);
    CHECK(json::parse(h.body)["status"] == "ok");
    REQUIRE_MESSAGE(wait_until([&] { return http_get(follower.health_port(), "/readyz").status == 200; }, 5s),
                    http_get(follower.health_port(), "/readyz").body);
    CHECK(http_get(leader.health_port(), "/readyz").status == 200);

    // Renewals happen every retry period: the histogram fills.
    CHECK(wait_until([&] {
      auto r = http_get(leader.health_port(), "/metrics");
      return r.status == 200 && r.body.find("leasehold_renew_latency_seconds_count 0\n") == std::string::npos;
    }, 5s));
    auto m = http_get(leader.health_port(), "/metrics");
    REQUIRE(m.status == 200);
    CHECK(prometheus_violations(m.body).empty());
    CHECK(m.body.find("# TYPE leasehold_is_leader gauge") != std::string::npos);
    CHECK(m.body.find("\nleasehold_is_leader 1\n") != std::string::npos);
    CHECK(m.body.find("leasehold_module_running{module=\"tick\"} 1") != std::string::npos);
    CHECK(m.body.find("leasehold_renew_latency_seconds_count 0\n") == std::string::npos);
    auto fm = http_get(follower.health_port(), "/metrics");
    CHECK(prometheus_violations(fm.body).empty());
    CHECK(fm.body.find("\nleasehold_is_leader 0\n") != std::string::npos);

    // The holder comes with when it was observed: a live leader renews
    // every retry period (300 ms), so the follower's view is fresh.
    CHECK(st["holder_age_ms"].get<long>() >= 0);
    CHECK(st["holder_age_ms"].get<long>() < 1000);
    CHECK(st["holder_observed_at"].is_string());
    // And stays fresh: sampled over two lease durations. A bound Lease is
    // not written by its renews; its session's are what the follower sees.
    long oldest = 0;
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(200ms);
      auto s = agent_state(follower);
      REQUIRE(s.is_object());
      CHECK(s["holder"] == leader.identity());
      oldest = std::max(oldest, s["holder_age_ms"].get<long>());
    }
    CHECK(oldest < 1000);
    auto l = http_get(follower.health_port(), "/leader");
    REQUIRE(l.status == 200);
    auto lj = json::parse(l.body);
    CHECK(lj["leader"] == leader.identity());
    CHECK(lj["age_ms"].get<long>() < 1000);
    CHECK(lj["observed_at"].is_string());
    CHECK(http_get(follower.health_port(), "/nothing-here").status == 404);
  }

  SUBCASE("config reload: disabling the ticker stops it; an invalid file is rejected") {
    write_file(config, short_config(false).dump());
    CHECK(wait_until([&] { return module_state(leader, "tick") == "disabled"
                                  || module_state(leader, "tick") == "stopped"; }, 5s));
    // Nothing leader-only is enabled: the runner stops electing.
    CHECK(wait_until([&] { auto st = agent_state(leader); return st.is_object() && st["state"] != "leader"; }, 5s));

    auto bad = short_config();
    bad["modules"][0]["type"] = "tickr";
    write_file(config, bad.dump());
    CHECK(wait_until([&] {
      for (auto& l : leader.log_lines())
        if (l.value("msg", "").find("config file rejected") == 0)
          return l.dump().find("modules[0].type: unknown module type") != std::string::npos;
      return false;
    }, 5s));
    // Rejected as a whole: the running config (disabled) stays.
    CHECK(module_state(leader, "tick") != "running");
    CHECK(leader.process().running());

    // Re-enabling starts electing again and someone runs the ticker.
    write_file(config, short_config(true).dump());
    CHECK(wait_until([&] { return module_state(a, "tick") == "running"
                                  || module_state(b, "tick") == "running"; }, 10s));
  }

  SUBCASE("SIGTERM of the leader releases the lease and the other takes over fast") {
    leader.process().signal(SIGTERM);
    // Exit within module_stop_timeout (400ms) + 2s, as the agent bounds it.
    CHECK(leader.process().wait(2400ms + load_slack) == std::optional<int>(0));
    auto lease = api.lease("default", "agent-test");
    REQUIRE(lease);
    auto holder = (*lease)["spec"].value("holderIdentity", "");
    CHECK((holder.empty() || holder == follower.identity()));
    REQUIRE(wait_until([&] { return leads(follower); }, 2s + load_slack));
    // Released: the follower did not wait for expiry. By the agents' own
    // clocks (not this test's, which may be late on a loaded machine), the
    // new term began before the released one could have expired: within
    // one lease duration (2 s) of the release.
    std::optional<leasehold::wall_time> released;
    std::istringstream journal(read_file(leader.journal_file()));
    for (std::string line; std::getline(journal, line);) {
      auto j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("event", "") == "lease_released")
        released = leasehold::parse_micro_time(j.value("wall", ""));
    }
    REQUIRE(released);
    auto now_held = api.lease("default", "agent-test");
    REQUIRE(now_held);
    CHECK((*now_held)["spec"].value("holderIdentity", "") == follower.identity());
    auto acquired = leasehold::parse_micro_time((*now_held)["spec"].value("acquireTime", ""));
    REQUIRE(acquired);
    CHECK(*acquired >= *released - 100ms);   // the same host clock; the journal's is in ms
    CHECK(*acquired - *released < 2s);
    // The other replica's view: itself, freshly observed.
    auto st = agent_state(follower);
    CHECK(st["holder"] == follower.identity());
    CHECK(st["holder_age_ms"].get<long>() < 1000);
    CHECK(json::parse(http_get(follower.health_port(), "/leader").body)["leader"]
          == follower.identity());
  }

  SUBCASE("an API outage longer than lease_duration: the holder is unknown, and says why") {
    // The follower counts a lease duration from the last renewal it saw:
    // the Lease's renewTime, or its session's when the Lease is bound (a
    // bound renew writes only the session, which the follower reads every
    // half retry period). So that the test knows which renewal that is, the
    // leader is cut off first; the outage begins once the follower has seen
    // its last renewal (the watch streams a plain Lease's at once; a bound
    // one's, after three more reads).
    auto lease = api.lease("default", "agent-test");
    REQUIRE(lease);
    auto labels = (*lease)["metadata"].value("labels", json::object());
    std::string session = labels.value("leasehold.io/session", "");
    auto gets = [&] {
      auto j = json::parse(http_get(api.control_port(), "/_leasehold/stats").body, nullptr, false);
      if (!j.is_object() || !j["by_identity"].contains(follower.identity()))
        return 0L;
      return j["by_identity"][follower.identity()].value("by_verb", json::object()).value("get", 0L);
    };
    auto before = gets();
    REQUIRE(api.fault({{"partition", {{"identity", leader.identity()}, {"action", "close"}}}}));
    if (session.empty())
      std::this_thread::sleep_for(300ms);
    else
      REQUIRE(wait_until([&] { return gets() >= before + 3; }, 1200ms));
    lease = api.lease("default", session.empty() ? "agent-test" : session);
    REQUIRE(lease);
    auto renewed = leasehold::parse_micro_time((*lease)["spec"].value("renewTime", ""));
    REQUIRE(renewed);
    REQUIRE(api.fault({{"mode", "down"}}));
    // Still known just after the outage began (observed < lease_duration 2 s ago).
    CHECK(agent_state(follower)["holder"] == leader.identity());
    CHECK(wait_until([&] { return agent_state(follower)["holder"] == "unknown"; }, 4s));
    auto after = leasehold::wall_now() - *renewed;
    INFO("unknown " << std::chrono::duration_cast<std::chrono::milliseconds>(after).count()
                    << "ms after the last renewal");
    CHECK(after >= 1900ms);   // not before lease_duration (2 s), less the journal's ms
    auto st = agent_state(follower);
    CHECK(st["last_observed_holder"] == leader.identity());
    CHECK(st["holder_age_ms"].get<long>() > 2000);
    CHECK(st["holder_unknown_reason"].get<std::string>().find("lease_duration (2000ms)")
          != std::string::npos);
    auto lj = json::parse(http_get(follower.health_port(), "/leader").body);
    CHECK(lj["leader"] == "unknown");
    CHECK(lj["last_observed_leader"] == leader.identity());
    REQUIRE(api.fault({{"mode", "recover"}}));
    CHECK(wait_until([&] { auto h = agent_state(follower)["holder"];
                           return h.is_string() && h != "unknown"; }, 5s));
  }
}

namespace {

/// The messages of the Events the API server keeps in `default`.
std::vector<std::string> event_messages(api_server& api) {
  std::vector<std::string> out;
  auto r = http_get(api.port(), "/api/v1/namespaces/default/events");
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_object())
    for (auto& e : j["items"])
      out.push_back(e.value("message", ""));
  return out;
}

bool has_message(api_server& api, const std::string& text) {
  for (auto& m : event_messages(api))
    if (m.find(text) != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST_CASE("a new Lease's creation hold: /leader, /debug/state, metrics and Events agree on the "
          "holder and its term, and the holder says it is in its hold") {
  // kubectl showed HOLDER agent-1 while agent-1's /leader said leading
  // false, term -1, and its peers term 1.
  temp_dir dir;
  api_server api(dir);   // no Lease yet: the first agent to ask creates it
  auto config = write_short_config(dir, test_timings("4s", "3s", "500ms", "400ms"));
  three_agents agents(dir, config, {"--server", api.url()});
  auto& all = agents.all;

  std::optional<json> lease;
  REQUIRE(wait_until([&] { lease = api.lease("default", "agent-test");
                           return lease && !(*lease)["spec"].value("holderIdentity", "").empty(); }, 10s));
  auto holder_id = (*lease)["spec"]["holderIdentity"].get<std::string>();
  auto term = (*lease)["spec"]["leaseTransitions"].get<int>();
  agent* holder = nullptr;
  for (auto* x : all)
    if (x->identity() == holder_id)
      holder = x;
  REQUIRE(holder != nullptr);

  // In the hold (4 s from the create): every view names the holder and its term.
  for (auto* x : all) {
    CAPTURE(x->identity());
    CHECK(wait_until([&] { return agent_state(*x)["term"] == term; }, 1500ms));
    auto st = agent_state(*x);
    CHECK(st["holder"] == holder_id);
    auto l = json::parse(http_get(x->health_port(), "/leader").body);
    CHECK(l["leader"] == holder_id);
    CHECK(l["term"] == term);
    CHECK(l["leading"] == false);
    CHECK(metric(x->health_port(), "leasehold_term") == std::optional<double>(term));
    CHECK(metric(x->health_port(), "leasehold_is_leader") == std::optional<double>(0));
    if (x != holder) {
      CHECK(st["creation_hold"].is_null());
      CHECK(metric(x->health_port(), "leasehold_creation_hold") == std::optional<double>(0));
      continue;
    }
    // The holder says it holds and when its term starts.
    CHECK(st["state"] == "follower");
    REQUIRE(st["creation_hold"].is_object());
    CHECK(st["creation_hold"]["term"] == term);
    CHECK(st["creation_hold"]["term_starts_in_ms"].get<long>() > 0);
    CHECK(st["creation_hold"]["term_starts_in_ms"].get<long>() <= 4000);
    CHECK(st["creation_hold"]["term_starts_at"].is_string());
    CHECK(l["creation_hold"]["term"] == term);
    CHECK(metric(x->health_port(), "leasehold_creation_hold") == std::optional<double>(1));
  }
  auto holding = holder_id + " created the lease and holds it: its term " + std::to_string(term)
                 + " starts at ";
  CHECK(wait_until([&] { return has_message(api, holding); }, 3s));
  bool logged = false;
  for (auto& l : holder->log_lines())
    logged = logged || (l.value("msg", "").find("created the lease and holds it") == 0
                        && l.value("term", -1) == term);
  CHECK(logged);

  // The term starts with the same number; the hold is over everywhere.
  REQUIRE(wait_until([&] { return agent_state(*holder)["state"] == "leader"; }, 6s));
  auto st = agent_state(*holder);
  CHECK(st["term"] == term);
  CHECK(st["creation_hold"].is_null());
  CHECK(metric(holder->health_port(), "leasehold_creation_hold") == std::optional<double>(0));
  CHECK(metric(holder->health_port(), "leasehold_is_leader") == std::optional<double>(1));
  CHECK(json::parse(http_get(holder->health_port(), "/leader").body)["leading"] == true);
  for (auto* x : all)
    CHECK(agent_state(*x)["term"] == term);
  CHECK(wait_until([&] { return has_message(api, holder_id + " became leader"); }, 3s));
  for (auto* x : all) {
    x->process().signal(SIGTERM);
    CHECK(x->process().wait(3s) == std::optional<int>(0));
  }
}

TEST_CASE("a second agent under an identity another live agent holds warns once and waits; the "
          "holder keeps the lease") {
  temp_dir dir, other_dir;   // one log file per identity and dir
  api_server api(dir);
  auto config = write_short_config(dir, short_config()["timings"]);
  // A plain lease: its renewTimes tell a write this process never sent.
  agent first(dir, "twin", config, {"--server", api.url(), "--session", "off"});
  REQUIRE(first.health_port() > 0);
  REQUIRE(wait_until([&] { return agent_state(first)["state"] == "leader"; }, 10s));
  agent second(other_dir, "twin", config, {"--server", api.url(), "--session", "off"});
  REQUIRE(second.health_port() > 0);
  const std::string words = "the lease is held under this replica's identity by another live "
                            "process (two replicas with one identity?): this one waits";
  auto said = [&](agent& x) {
    int n = 0;
    for (auto& l : x.log_lines())
      if (l.value("msg", "") == words) {
        CHECK(l["level"] == "warn");
        CHECK(l["holder"] == "twin");
        ++n;
      }
    return n;
  };
  REQUIRE(wait_until([&] { return said(second) == 1; }, 5s));
  std::this_thread::sleep_for(2s);   // several renews later: still once
  CHECK(said(second) == 1);
  CHECK(said(first) == 0);
  CHECK(agent_state(first)["state"] == "leader");
  CHECK(agent_state(second)["state"] != "leader");
  auto lease = api.lease("default", "agent-test");
  REQUIRE(lease);
  CHECK((*lease)["spec"]["holderIdentity"] == "twin");
}

TEST_CASE("bound leases: a second agent under the holder's identity never takes its session; the "
          "holder keeps its term") {
  temp_dir dir, other_dir;
  api_server api(dir);
  auto config = write_short_config(dir, short_config()["timings"]);
  agent first(dir, "twin", config, {"--server", api.url(), "--session", "on"});
  REQUIRE(wait_until([&] { return agent_state(first)["state"] == "leader"; }, 10s));
  auto lease = api.lease("default", "agent-test");
  REQUIRE(lease);
  REQUIRE((*lease)["metadata"]["labels"]["leasehold.io/session"] == "lh-session-twin");
  auto term = (*lease)["spec"]["leaseTransitions"];
  auto incarnation = (*api.lease("default", "lh-session-twin"))["spec"]["leaseTransitions"];
  agent second(other_dir, "twin", config, {"--server", api.url(), "--session", "on"});
  REQUIRE(second.health_port() > 0);
  std::this_thread::sleep_for(4s);   // two lease durations of the second following
  CHECK(agent_state(first)["state"] == "leader");
  CHECK(agent_state(second)["state"] != "leader");
  lease = api.lease("default", "agent-test");
  REQUIRE(lease);
  CHECK((*lease)["spec"]["leaseTransitions"] == term);   // one term all along
  CHECK((*api.lease("default", "lh-session-twin"))["spec"]["leaseTransitions"] == incarnation);
}
