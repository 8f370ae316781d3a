// `leasehold status` and `leasehold-apiserver --kubeconfig-out`: the
// report's judgement on made-up stores (holders, expiry, balanced or not),
// then two agents balancing four modules on leasehold-apiserver, read
// through the kubeconfig the server wrote (by leasehold status and, when it
// is installed, by kubectl), the report matching the Leases the API stored;
// and the same on a real etcd, the report matching its keys.
#include <doctest/doctest.h>

#include "cmd/leasehold/status_command.hpp"
#include "tests/agent/harness.hpp"
#include "transport/etcd/etcd_client.hpp"

using namespace leasehold::test;
using nlohmann::json;
using leasehold::wall_time;

namespace {

leasehold::lease stored(const std::string& name, const std::string& holder, wall_time renewed,
                        int term = 1) {
  leasehold::lease l;
  l.name = name;
  l.ns = "default";
  l.spec.holder_identity = holder;
  l.spec.renew_time = renewed;
  l.spec.lease_duration_seconds = 2;
  l.spec.lease_transitions = term;
  return l;
}

json group_of(const json& report, const std::string& group) {
  for (auto& g : report["groups"])
    if (g["group"] == group)
      return g;
  return nullptr;
}

/// A config whose four exec modules w-0..w-3 balance in group "workers"
/// (lease status-test of its own): its path.
std::string balanced_config(const temp_dir& dir) {
  json mods = json::array();
  for (int k = 0; k < 4; ++k)
    mods.push_back({{"type", "exec"},
                    {"name", "w-" + std::to_string(k)},
                    {"balance", "workers"},
                    {"settings", {{"command", {"sleep", "3600"}}, {"grace_ms", 100}}}});
  auto doc = short_config();
  doc["lease_name"] = "status-test";
  doc["modules"] = mods;
  auto config = dir.file("config.json");
  write_file(config, doc.dump());
  return config;
}

/// `leasehold status --config` (with `store` flags) once it says group
/// workers is balanced, checked against the store (`stored`: a lease's
/// holder and term there); the text report as well.
json balanced_report(const temp_dir& dir, const std::string& config,
                     const std::vector<std::string>& store,
                     const std::function<std::pair<std::string, int>(const std::string&)>& stored) {
  auto args = [&](std::vector<std::string> a) {
    a.insert(a.end(), store.begin(), store.end());
    return a;
  };
  json report;
  REQUIRE(wait_until([&] {
    auto r = run_cli(dir, args({"status", "--config", config, "-o", "json"}));
    report = json::parse(r.out, nullptr, false);
    return r.code == 0 && report.is_object() && group_of(report, "workers")["balanced"] == true;
  }, 20s));
  CAPTURE(report.dump());
  CHECK(report["namespace"] == "default");
  REQUIRE(report["leases"].size() == 5);
  CHECK(report["leases"][0]["lease"] == "status-test");
  // Every module is balanced: nobody competes for the agent's own lease,
  // and the report says so instead of a bare "no such lease".
  CHECK(report["leases"][0]["found"] == false);
  CHECK(report["leases"][0]["idle"] == true);
  // Outside a group the lease lists who announces it (a yield may name them);
  // that set is no group of the report.
  CHECK(report["leases"][0]["candidates"] == json{"agent-a", "agent-b"});
  CHECK(report["groups"].size() == 1);
  for (auto& l : report["leases"]) {
    auto name = l["lease"].get<std::string>();
    if (name == "status-test")
      continue;
    auto [holder, term] = stored(name);
    CHECK(l["group"] == "workers");
    CHECK(l["holder"] == holder);
    CHECK(l["term"] == term);
    CHECK(l["renewed_ago_ms"].get<long long>() < 2000);
  }
  auto g = group_of(report, "workers");
  CHECK(g["members"] == json{"agent-a", "agent-b"});
  CHECK(g["held"] == json{{"agent-a", 2}, {"agent-b", 2}});

  // The text for a person; a namespace alone lists every lease in it.
  auto t = run_cli(dir, args({"status", "--config", config}));
  CHECK(t.code == 0);
  CHECK_MESSAGE(t.out.find("LEASE") == t.out.find('\n') + 1, t.out);
  CHECK(t.out.find("agent-a(2),agent-b(2)") != std::string::npos);
  CHECK(t.out.find("(no module runs under it: nobody competes)") != std::string::npos);
  CHECK(t.out.find("yes") != std::string::npos);
  auto ns = run_cli(dir, args({"status", "--namespace", "default", "-o", "json"}));
  CHECK(ns.code == 0);
  auto nr = json::parse(ns.out, nullptr, false);
  REQUIRE(nr.is_object());
  for (int k = 0; k < 4; ++k) {
    bool listed = false;
    for (auto& l : nr["leases"])
      listed = listed || l["lease"] == "w-" + std::to_string(k);
    CHECK(listed);
  }
  CHECK(group_of(nr, "workers")["balanced"].is_null());
  return nr;
}

} // namespace

TEST_CASE("status report: holders, time since renew, expiry, members and whether a group is "
          "balanced") {
  using namespace std::chrono;
  auto now = time_point_cast<microseconds>(leasehold::wall_clock::now());
  leasehold::agent::status_input in;
  in.ns = "default";
  in.now = now;
  in.member_ttl = seconds(2);
  in.leases = {stored("own", "", now), stored("w-0", "a", now - milliseconds(300), 4),
               stored("w-1", "a", now - milliseconds(100)), stored("w-2", "b", now - seconds(5))};
  in.members = {{"workers", "a", now - milliseconds(500)}, {"workers", "b", now},
                {"workers", "gone", now - seconds(30)}};
  in.config_leases = {{"own", ""}, {"w-0", "workers"}, {"w-1", "workers"}, {"w-2", "workers"},
                      {"w-3", "workers"}};
  auto r = leasehold::agent::status_report(in);
  CAPTURE(r.dump());
  REQUIRE(r["leases"].size() == 5);
  CHECK(r["leases"][1]["holder"] == "a");
  CHECK(r["leases"][1]["term"] == 4);
  CHECK(r["leases"][1]["renewed_ago_ms"] == 300);
  CHECK(r["leases"][1]["expired"] == false);
  CHECK(r["leases"][3]["expired"] == true);   // renewed 5 s ago, a 2 s lease
  CHECK(r["leases"][4]["found"] == false);
  auto g = group_of(r, "workers");
  CHECK(g["members"] == json{"a", "b"});
  CHECK(g["stale_members"] == json{"gone"});
  CHECK(g["balanced"] == false);
  auto why = g["why"].get<std::string>();
  CHECK(why.find("w-2 has no holder") != std::string::npos);
  CHECK(why.find("w-3 has no holder") != std::string::npos);
  CHECK(why.find("b holds 0 (a share is 2)") != std::string::npos);

  // Two each: balanced.
  in.leases = {stored("w-0", "a", now), stored("w-1", "b", now), stored("w-2", "b", now),
               stored("w-3", "a", now)};
  r = leasehold::agent::status_report(in);
  g = group_of(r, "workers");
  CHECK(g["balanced"] == true);
  CHECK(g["held"] == json{{"a", 2}, {"b", 2}});
  std::ostringstream text;
  leasehold::agent::print_status(r, text);
  auto line = text.str().substr(text.str().find("\nworkers") + 1);
  line = line.substr(0, line.find('\n'));
  CHECK(line.find("a(2),b(2)") != std::string::npos);
  CHECK(line.substr(line.size() - 3) == "yes");

  // A namespace alone: every stored lease, groups without a judgement.
  in.config_leases.clear();
  r = leasehold::agent::status_report(in);
  CHECK(r["leases"].size() == 4);
  CHECK(group_of(r, "workers")["balanced"].is_null());
}

TEST_CASE("leasehold status through the kubeconfig leasehold-apiserver wrote: two agents "
          "balancing four modules, as the Leases say; kubectl reads the same") {
  temp_dir dir;
  auto kubeconfig = dir.file("kubeconfig");
  api_server api(dir, {"--kubeconfig-out", kubeconfig});
  auto text = read_file(kubeconfig);
  CHECK(text.find("server: http://127.0.0.1:" + std::to_string(api.port()) + "\n")
        != std::string::npos);
  auto config = balanced_config(dir);
  agent a(dir, "agent-a", config, {"--kubeconfig", kubeconfig});
  agent b(dir, "agent-b", config, {"--kubeconfig", kubeconfig});
  REQUIRE(a.health_port() > 0);
  REQUIRE(b.health_port() > 0);
  auto nr = balanced_report(dir, config, {"--kubeconfig", kubeconfig}, [&](const std::string& name) {
    auto l = api.lease("default", name);
    REQUIRE(l);
    return std::make_pair((*l)["spec"].value("holderIdentity", ""),
                          (*l)["spec"].value("leaseTransitions", 0));
  });

  // An unreachable store: exit 1, saying which list failed.
  auto down = run_cli(dir, {"status", "--config", config, "--server", "http://127.0.0.1:1"});
  CHECK(down.code == 1);
  CHECK_MESSAGE(down.err.find("cannot list the Leases of namespace default") != std::string::npos,
                down.err);

  // kubectl reaches the server with the kubeconfig alone.
  if (run_program(dir, {"/bin/sh", "-c", "command -v kubectl"}).code != 0) {
    MESSAGE("kubectl is not installed: its check is skipped");
    return;
  }
  auto k = run_program(dir, {"/bin/sh", "-c", "HOME=" + dir.path() + " kubectl --kubeconfig "
                                                + kubeconfig + " get leases -o json"}, 20s);
  CHECK_MESSAGE(k.code == 0, k.err);
  auto kj = json::parse(k.out, nullptr, false);
  REQUIRE(kj.is_object());
  CHECK(kj["items"].size() == nr["leases"].size());
  for (auto& item : kj["items"])
    for (auto& l : nr["leases"])
      if (l["lease"] == item["metadata"]["name"])
        CHECK(l["holder"] == item["spec"]["holderIdentity"]);
}

TEST_CASE("etcd: leasehold status reads the keys and the member keys, as etcdctl get --prefix: two "
          "agents balancing four modules, as the keys say") {
  temp_dir dir;
  etcd_server etcd(dir);
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), read_file(dir.file("etcd.log")));
  auto config = balanced_config(dir);
  std::vector<std::string> store{"--backend", "etcd", "--etcd-endpoints", etcd.endpoint()};
  agent a(dir, "agent-a", config, store);
  agent b(dir, "agent-b", config, store);
  REQUIRE(a.health_port() > 0);
  REQUIRE(b.health_port() > 0);
  leasehold::etcd_config ec;
  ec.endpoints = {etcd.endpoint()};
  balanced_report(dir, config, store, [&](const std::string& name) {
    auto l = leasehold::etcd_client(ec).get_lease({"default", name});
    REQUIRE_MESSAGE(l.ok(), l.error.describe());
    return std::make_pair(l.value->spec.holder_identity, l.value->spec.lease_transitions);
  });

  // An unreachable store: exit 1, saying what failed.
  auto down = run_cli(dir, {"status", "--config", config, "--backend", "etcd", "--etcd-endpoints",
                            "http://127.0.0.1:1"}, 30s);
  CHECK(down.code == 1);
  CHECK_MESSAGE(down.err.find("cannot read the keys of namespace default") != std::string::npos,
                down.err);
}
