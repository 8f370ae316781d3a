// A leader-only `exec` module whose command is `false`:
// the agent hands leadership over and backs off instead of bouncing terms,
// says so in /healthz, /readyz, /debug/state, metrics and its log, keeps
// /livez at 200, and a fixed config ends the crash loop ("config accepted").
#include <doctest/doctest.h>

#include <cstdio>
#include <regex>
#include <thread>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

/// lease 2 s; `job` = exec `false`, 1 restart within 10 s; handover backoff
/// 3 s..6 s; `side` = an every-replica exec that prints on both streams.
json crash_loop_config(const json& job_command) {
  auto cfg = short_config(false);
  cfg["timings"]["handover_backoff_min"] = "3s";
  cfg["timings"]["handover_backoff_max"] = "6s";
  cfg["modules"] = json::array(
    {{{"type", "exec"},
      {"name", "job"},
      {"settings", {{"command", job_command}, {"grace_ms", 200}}},   // below module_stop_timeout
      {"restart", {{"max_restarts", 1}, {"within_ms", 10000}}}},
     {{"type", "exec"},
      {"name", "side"},
      {"leader_only", false},
      {"settings", {{"command", {"sh", "-c", "echo to-out; echo to-err >&2; exec sleep 60"}},
                    {"grace_ms", 200}}}}});
  return cfg;
}

std::vector<json> with_msg(const agent& a, const std::string& msg) {
  std::vector<json> out;
  for (auto& l : a.log_lines())
    if (l.value("msg", "") == msg)
      out.push_back(l);
  return out;
}

} // namespace

TEST_CASE("exec `false`: bounded terms, handover reported everywhere, fixed by a config change") {
  temp_dir dir;
  api_server api(dir);
  auto cfg = crash_loop_config({"false"});
  cfg["server"] = api.url();
  write_file(dir.file("a.json"), cfg.dump());
  agent a(dir, "a", dir.file("a.json"), {});
  int port = a.health_port();
  REQUIRE(port > 0);

  // The first term (after the new Lease's wait of one lease duration) ends in
  // a handover within ~1 s: the command fails twice (one restart allowed).
  // The handover is on the state from the start of the step-down; the test
  // waits for its end (a follower again), as the state is "stepping_down"
  // while the module stops and the lease is released.
  json st;
  REQUIRE(wait_until([&] {
    st = agent_state(a);
    return st.is_object() && st["handover"].is_object() && st["state"] != "stepping_down";
  }, 10s));
  CHECK(st["handover"]["module"] == "job");
  CHECK(st["state"] == "follower");
  CHECK(st["electing"] == true);
  auto job = st["modules"][0];
  CHECK(job["name"] == "job");
  CHECK(job["restarts"] == 1);
  CHECK(job["restarts_in_window"] == 2);
  CHECK(job["restart_policy"] == json{{"max_restarts", 1}, {"within_ms", 10000}});
  CHECK(job["backing_off_until"].is_string());

  auto livez = http_get(port, "/livez");
  CHECK(livez.status == 200);
  for (auto path : {"/healthz", "/readyz"}) {
    auto r = http_get(port, path);
    CHECK(r.status == 503);
    CHECK(r.body.find("module job crash-looped") != std::string::npos);
  }
  auto metrics = http_get(port, "/metrics").body;
  CHECK(metrics.find("leasehold_module_restarts_total{module=\"job\"} 1\n") != std::string::npos);

  // Terms stay bounded: the handover backoff (3 s, then 6 s, +-20 %) comes
  // before each new term. Over the next 6 s at most one more term (it came
  // every ~1.5 s with the elector's 200 ms..1 s respawn backoff alone).
  std::this_thread::sleep_for(6s);
  st = agent_state(a);
  CHECK(st["terms_won"].get<int>() >= 1);
  CHECK(st["terms_won"].get<int>() <= 2);
  auto lease = api.lease("default", "agent-test");
  REQUIRE(lease);
  CHECK((*lease)["spec"].value("leaseTransitions", 0) <= 2);

  // The log says what happened, in words.
  auto handovers = with_msg(a, "handing over leadership: a leader-only module is crash-looping");
  REQUIRE(!handovers.empty());
  CHECK(handovers[0]["level"] == "warn");
  CHECK(handovers[0]["module"] == "job");
  auto crashes = with_msg(a, "module crashed");
  REQUIRE(!crashes.empty());
  CHECK(crashes[0]["reason"] == "exec: command exited with status 1");
  CHECK(crashes[0]["code"].is_string());
  bool summarised = false;
  for (auto& l : a.log_lines())
    if (l.value("msg", "").rfind("module crashed … repeated ", 0) == 0 && l["repeated"] >= 1)
      summarised = true;
  CHECK(summarised);
  // Child streams carry `stream`; the module's lines about its child do not.
  bool out_seen = false, err_seen = false, exit_seen = false;
  for (auto& l : a.log_lines()) {
    if (l.value("msg", "") == "child output" && l["module"] == "side") {
      out_seen |= l["stream"] == "stdout" && l["line"] == "to-out";
      err_seen |= l["stream"] == "stderr" && l["line"] == "to-err";
    }
    if (l.value("msg", "") == "module output" && l["module"] == "job"
        && l.value("line", "") == "exited with status 1") {
      exit_seen = true;
      CHECK_FALSE(l.contains("stream"));
    }
  }
  CHECK(out_seen);
  CHECK(err_seen);
  CHECK(exit_seen);
  // Every line: `time` in RFC 3339 UTC with milliseconds; no CAF names in reasons.
  std::regex rfc3339_ms(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (auto& l : a.log_lines()) {
    CHECK(std::regex_match(l.value("time", ""), rfc3339_ms));
    CHECK_FALSE(l.contains("ts"));
    auto reason = l.value("reason", "");
    CHECK(reason.find("caf::") == std::string::npos);
    CHECK(reason.find("error(") == std::string::npos);
  }

  // A broken file, then the fixed one: "config accepted" once, and the fix
  // ends the handover backoff: the replica leads and is healthy again.
  write_file(dir.file("a.json"), "{ not json");
  REQUIRE(wait_until([&] { return !with_msg(a, "config file rejected, the running config stays").empty(); }, 5s));
  auto fixed = crash_loop_config({"sleep", "60"});
  fixed["server"] = api.url();
  write_file(dir.file("a.json"), fixed.dump());
  REQUIRE(wait_until([&] { return http_get(port, "/healthz").status == 200; }, 8s));
  REQUIRE(wait_until([&] { return agent_state(a)["state"] == "leader"; }, 8s));
  CHECK(with_msg(a, "config accepted").size() == 1);
  CHECK(http_get(port, "/readyz").status == 200);

  // The file removed while running: one warning naming
  // it (not one a second), and the running config stays (still leading).
  const std::string missing = "config file cannot be read (removed?), the running config stays";
  std::remove(dir.file("a.json").c_str());
  REQUIRE(wait_until([&] { return !with_msg(a, missing).empty(); }, 5s));
  std::this_thread::sleep_for(2500ms);   // two more polls of the file (1 s apart)
  auto said = with_msg(a, missing);
  CHECK(said.size() == 1);
  CHECK(said.front().value("path", "") == dir.file("a.json"));
  CHECK(agent_state(a)["state"] == "leader");
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(5s) == 0);
}
