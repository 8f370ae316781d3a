// The views of an agent that leads several balanced leases, against
// leasehold-apiserver: /leader, /debug/state, /metrics and /readyz answer
// per lease and per module, labelled by lease, beside the agent's own
// lease's answer (which stays as it was: an agent whose leader-only modules
// all run under leases of their own does not elect its own lease).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

/// Three balanced exec modules (work-0 .. work-2) and leader_endpoint; work-2
/// exits after 200 ms and is restarted (its restarts must show).
json views_config() {
  json mods = json::array();
  for (int k = 0; k < 3; ++k) {
    auto cmd = k == 2 ? json{"sh", "-c", "sleep 0.2; exit 1"} : json{"sleep", "3600"};
    mods.push_back({{"type", "exec"},
                    {"name", "work-" + std::to_string(k)},
                    {"balance", "workers"},
                    {"restart", {{"max_restarts", 1000}, {"within_ms", 60000}}},
                    {"settings", {{"command", cmd}, {"grace_ms", 100}}}});
  }
  mods.push_back({{"type", "leader_endpoint"}});
  auto doc = short_config();
  doc["lease_name"] = "views-test";
  doc["modules"] = mods;
  return doc;
}

/// The entry of `lease` in an array of {"lease": ...} objects (null: none).
json entry(const json& list, const std::string& lease) {
  if (list.is_array())
    for (auto& l : list)
      if (l.value("lease", "") == lease)
        return l;
  return nullptr;
}

json module_in(const json& lease_entry, const std::string& name) {
  if (lease_entry.is_object() && lease_entry["modules"].is_array())
    for (auto& m : lease_entry["modules"])
      if (m.value("name", "") == name)
        return m;
  return nullptr;
}

} // namespace

TEST_CASE("an agent leading three balanced leases: /leader, /debug/state, /metrics and /readyz "
          "answer per lease and per module") {
  temp_dir dir;
  api_server api(dir);
  auto config = dir.file("config.json");
  write_file(config, views_config().dump());
  agent a(dir, "agent-a", config, {"--server", api.url()});
  int port = a.health_port();
  REQUIRE(port > 0);
  std::vector<std::string> works{"work-0", "work-1", "work-2"};
  json view;
  REQUIRE(wait_until([&] {
    view = json::parse(http_get(port, "/leader").body, nullptr, false);
    if (!view.is_object())
      return false;
    for (auto& w : works)
      if (!entry(view["leases"], w).value("leading", false))
        return false;
    return true;
  }, 20s));
  CAPTURE(view.dump());

  // /leader: each lease with its holder and term; the agent's own lease
  // (no leader-only module under it) stays "unknown", saying why.
  for (auto& w : works) {
    auto l = entry(view["leases"], w);
    CHECK(l["group"] == "workers");
    CHECK(l["holder"] == "agent-a");
    CHECK(l["term"].get<long long>() >= 0);
    CHECK(l["holder_age_ms"].get<long long>() >= 0);
    auto lease = api.lease("default", w);
    REQUIRE(lease);
    CHECK((*lease)["spec"]["holderIdentity"] == "agent-a");
  }
  auto own = entry(view["leases"], "views-test");
  CHECK(own["group"] == "");
  CHECK(own["leading"] == false);
  CHECK(view["leader"] == "unknown");
  CHECK(view["unknown_reason"].get<std::string>().find("no leader-only module runs under this lease")
        != std::string::npos);
  CHECK(view["leads"].size() == 3);

  // /debug/state: each lease's modules with their state and restarts.
  json state;
  REQUIRE(wait_until([&] {
    state = agent_state(a);
    auto m = module_in(entry(state["leases"], "work-2"), "work-2");
    return m.is_object() && m["restarts"].get<long long>() >= 1;
  }, 10s));
  CAPTURE(state.dump());
  for (auto& w : works) {
    auto l = entry(state["leases"], w);
    CHECK(l["leading"] == true);
    CHECK(l["holder"] == "agent-a");
    CHECK(l["holder_age_ms"].get<long long>() >= 0);
    CHECK(l["ms_since_renew"].get<long long>() >= 0);
    auto m = module_in(l, w);
    REQUIRE(m.is_object());
    CHECK(m["type"] == "exec");
    CHECK(m["leader_only"] == true);
  }
  CHECK(module_in(entry(state["leases"], "work-0"), "work-0")["state"] == "running");
  CHECK(module_in(entry(state["leases"], "work-0"), "work-0")["restarts"] == 0);
  // The top-level answer is the agent's own lease's, as before.
  CHECK(state["modules"].size() == 1);
  CHECK(state["modules"][0]["name"] == "leader_endpoint");

  // /metrics: per lease, and per lease's module; the agent's own series
  // still describe its own lease.
  auto series = [&](const std::string& name, const std::string& lease, const std::string& module = "") {
    auto labels = "lease=\"" + lease + "\",group=\"workers\""
                  + (module.empty() ? "" : ",module=\"" + module + "\"");
    return metric(port, name + "{" + labels + "}");
  };
  for (auto& w : works) {
    CHECK(series("leasehold_lease_leader", w) == std::optional<double>(1));
    CHECK(series("leasehold_lease_term", w) >= std::optional<double>(0));
    CHECK(series("leasehold_lease_creation_hold", w) == std::optional<double>(0));
  }
  CHECK(series("leasehold_lease_module_running", "work-0", "work-0") == std::optional<double>(1));
  CHECK(series("leasehold_lease_module_restarts_total", "work-0", "work-0") == std::optional<double>(0));
  CHECK(series("leasehold_lease_module_restarts_total", "work-2", "work-2") >= std::optional<double>(1));
  CHECK(metric(port, "leasehold_lease_module_running{lease=\"views-test\",group=\"\","
                     "module=\"leader_endpoint\"}") == std::optional<double>(1));
  CHECK(metric(port, "leasehold_is_leader") == std::optional<double>(0));
  auto text = http_get(port, "/metrics").body;
  CHECK(prometheus_violations(text).empty());

  // /readyz (and /livez, /healthz): each lease's own answer.
  for (auto* path : {"/readyz", "/livez", "/healthz"}) {
    auto r = http_get(port, path);
    CAPTURE(path);
    CAPTURE(r.body);
    CHECK(r.status == 200);
    auto body = json::parse(r.body, nullptr, false);
    REQUIRE(body.is_object());
    CHECK(body["leases"].size() == 4);
    for (auto& w : works)
      CHECK(entry(body["leases"], w)["status"] == "ok");
  }
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(10s) == std::optional<int>(0));
}
