// Agents on a real etcd (one member, started on loopback ephemeral ports):
// what /leader and /debug/state say about the holder.
#include <doctest/doctest.h>

#include <signal.h>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

TEST_CASE("three etcd agents name the holder in /leader and /debug/state long after the "
          "election") {
  // On etcd a renew is a keepalive and changes no key: every agent, the
  // leader included, said "leader": "unknown" once the record was older
  // than lease_duration (2 s here), although the holder's etcd lease lived.
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  auto config = dir.file("config.json");
  write_file(config, short_config().dump());
  three_agents agents(dir, config, {"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()});
  auto& all = agents.all;
  agent* leader = nullptr;
  REQUIRE(wait_until([&] {
    for (auto* x : all) {
      auto st = agent_state(*x);
      if (st.is_object() && st["state"] == "leader")
        leader = x;
    }
    return leader != nullptr;
  }, 20s));
  auto term = agent_state(*leader)["term"];

  // Three lease durations, every agent sampled about every 100 ms.
  int samples = 0;
  for (auto end = std::chrono::steady_clock::now() + 6s; std::chrono::steady_clock::now() < end;) {
    for (auto* x : all) {
      auto st = agent_state(*x);
      REQUIRE(st.is_object());
      CHECK_MESSAGE(st["holder"] == leader->identity(), x->identity() << ": " << st.dump());
      CHECK_MESSAGE(st["term"] == term, x->identity() << ": " << st.dump());
      auto l = http_get(x->health_port(), "/leader");
      REQUIRE(l.status == 200);
      auto lj = json::parse(l.body);
      CHECK_MESSAGE(lj["leader"] == leader->identity(), x->identity() << ": " << l.body);
      CHECK_MESSAGE(lj["term"] == term, x->identity() << ": " << l.body);
      CHECK(lj["leading"] == (x == leader));
      ++samples;
    }
    std::this_thread::sleep_for(100ms);
  }
  CHECK(samples > 30);
  CHECK(agent_state(*leader)["state"] == "leader");   // one term all along
  for (auto* x : all) {
    x->process().signal(SIGTERM);
    CHECK(x->process().wait(5s) == std::optional<int>(0));
  }
}
