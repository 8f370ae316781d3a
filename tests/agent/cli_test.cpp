// `leasehold validate`, `version`, `--help` and start-up errors, as processes.
#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;


TEST_CASE("validate accepts a good config") {
  temp_dir dir;
  write_file(dir.file("ok.json"), short_config().dump());
  auto r = run_cli(dir, {"validate", "--config", dir.file("ok.json"), "--server",
                         "http://127.0.0.1:9"});
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find(": ok (2 modules") != std::string::npos);
}

TEST_CASE("validate prints every error with its JSON path and exits 1") {
  temp_dir dir;
  auto doc = short_config();
  doc["timings"]["retry_period"] = "2x";
  doc["modules"][0]["type"] = "tickr";
  doc["extra"] = true;
  write_file(dir.file("bad.json"), doc.dump());
  auto r = run_cli(dir, {"validate", "--config", dir.file("bad.json")});
  CHECK(r.code == 1);
  CHECK(r.err.find("timings.retry_period: invalid duration \"2x\"") != std::string::npos);
  CHECK(r.err.find("modules[0].type: unknown module type \"tickr\"") != std::string::npos);
  CHECK(r.err.find("extra: unknown field") != std::string::npos);
  CHECK(r.err.find("3 errors") != std::string::npos);
}

TEST_CASE("version and --help on every command") {
  temp_dir dir;
  auto r = run_cli(dir, {"version"});
  CHECK(r.code == 0);
  CHECK(r.out.rfind("leasehold ", 0) == 0);
  for (auto cmd : {"run", "validate", "version", "status", "yield"}) {
    r = run_cli(dir, {cmd, "--help"});
    CHECK_MESSAGE(r.code == 0, cmd);
    CHECK_MESSAGE(r.out.find("--help") != std::string::npos, cmd);
  }
  r = run_cli(dir, {"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("validate") != std::string::npos);
  // The defaults as they are, not as an older help text put them.
  r = run_cli(dir, {"run", "--help"});
  CHECK(r.out.find("the hostname plus \"_\" and a 12-hex-digit per-process suffix")
        != std::string::npos);
  CHECK(r.out.find("kubeconfig context's namespace") != std::string::npos);
  // fence-keeper: --help is a question (stdout, 0), a misuse is not (2).
  r = run_cli(dir, {"fence-keeper", "--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("usage: ") == 0);
  CHECK(r.out.find("-- COMMAND...") != std::string::npos);
  CHECK(run_cli(dir, {"fence-keeper", "--bogus"}).code == 2);
}

TEST_CASE("run refuses bad input at start-up with a clear error") {
  temp_dir dir;
  auto base = std::vector<std::string>{"run", "--health-addr", "127.0.0.1:0",
                                       "--server", "http://127.0.0.1:9"};

  SUBCASE("unknown module type") {
    auto doc = short_config();
    doc["modules"][0]["type"] = "tickr";
    write_file(dir.file("c.json"), doc.dump());
    auto args = base;
    args.insert(args.end(), {"--config", dir.file("c.json")});
    auto r = run_cli(dir, args);
    CHECK(r.code == 1);
    CHECK(r.err.find("unknown module type") != std::string::npos);
  }
  SUBCASE("--log-format text: the start-up errors as lines a person reads") {
    auto args = base;
    args.insert(args.end(), {"--lease-name", "Bad_Name", "--log-format", "text"});
    auto r = run_cli(dir, args);
    CHECK(r.code == 1);
    CAPTURE(r.err);
    CHECK(r.err.find("{") == std::string::npos);   // no JSON
    CHECK(r.err.find(" ERROR invalid config  identity=") != std::string::npos);
    CHECK(r.err.find(" path=\"\" error=\"lease_name: must be a lowercase RFC 1123 subdomain")
          != std::string::npos);
  }
  SUBCASE("bad timing relation") {
    write_file(dir.file("c.json"), short_config().dump());
    auto args = base;
    args.insert(args.end(), {"--config", dir.file("c.json"), "--renew-deadline", "5s"});
    auto r = run_cli(dir, args);
    CHECK(r.code == 1);
    CHECK(r.err.find("timings.lease_duration: must be > renew_deadline") != std::string::npos);
  }
  SUBCASE("unreadable token and bad CA file (kubeconfig)") {
    write_file(dir.file("c.json"), short_config().dump());
    write_file(dir.file("ca.crt"), "not a certificate\n");
    write_file(dir.file("kubeconfig"),
               "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
               "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:9\n"
               "    certificate-authority: " + dir.file("ca.crt") + "\n"
               "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
               "users:\n- name: u\n  user:\n    token: abc\n");
    auto r = run_cli(dir, {"run", "--health-addr", "127.0.0.1:0", "--config", dir.file("c.json"),
                           "--kubeconfig", dir.file("kubeconfig")});
    CHECK(r.code == 1);
    CHECK(r.err.find("bad CA file") != std::string::npos);

    write_file(dir.file("kubeconfig2"),
               "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
               "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:9\n"
               "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
               "users:\n- name: u\n  user:\n    tokenFile: " + dir.file("missing-token") + "\n");
    r = run_cli(dir, {"run", "--health-addr", "127.0.0.1:0", "--config", dir.file("c.json"),
                      "--kubeconfig", dir.file("kubeconfig2")});
    CHECK(r.code == 1);
    CHECK(r.err.find("missing-token") != std::string::npos);
  }
}

TEST_CASE("an unreachable server is not fatal: the agent keeps trying, not ready") {
  temp_dir dir;
  write_file(dir.file("c.json"), short_config().dump());
  agent a(dir, "lonely", dir.file("c.json"), {"--server", "http://127.0.0.1:9"});
  int port = a.health_port();
  REQUIRE(port > 0);
  // The agent's own report that it has kept failing for longer than
  // renew_deadline (1.5 s), not a sleep: it is still running and trying.
  CHECK(wait_until([&] {
    auto r = http_get(port, "/readyz");
    return r.status == 503 && r.body.find("lease API failing for") != std::string::npos;
  }, 1500ms + load_slack));
  CHECK(a.process().running());
  CHECK(http_get(port, "/healthz").status == 200);
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(3s) == std::optional<int>(0));
}

TEST_CASE("the config shipped in deploy/configmap.yaml validates") {
  temp_dir dir;
  auto cm = YAML::LoadFile(source_root() + "/deploy/configmap.yaml");
  write_file(dir.file("config.json"), cm["data"]["config.json"].as<std::string>());
  // The connection is the cluster's (in-cluster files); here a plain URL.
  auto r = run_cli(dir, {"validate", "--config", dir.file("config.json"), "--server",
                         "http://127.0.0.1:9"});
  CHECK_MESSAGE(r.code == 0, r.err);
}

TEST_CASE("--version, version, an unknown command, run without --config") {
  temp_dir dir;
  auto v = run_cli(dir, {"version"});
  auto flag = run_cli(dir, {"--version"});
  CHECK(v.code == 0);
  CHECK(flag.code == 0);
  CHECK(v.out == "leasehold " LEASEHOLD_VERSION "\n");
  CHECK(flag.out == v.out);

  auto bogus = run_cli(dir, {"bogus"});
  CHECK(bogus.code == 2);
  // One usage exit code (2) for every misuse (CLI11 gave
  // 106 for a missing subcommand, 109 for an extra argument, ...).
  for (auto args : std::vector<std::vector<std::string>>{
         {}, {"fence"}, {"run", "--no-such-flag"}, {"run", "--config"}, {"version", "extra"},
         {"fence", "check", "--margin-ms", "-5"}}) {
    auto r = run_cli(dir, args);
    std::string shown;
    for (auto& a : args)
      shown += a + " ";
    CHECK_MESSAGE(r.code == 2, "leasehold " << shown << "-> " << r.code << ": " << r.err);
    CHECK_MESSAGE(!r.err.empty(), shown);
  }
  CHECK_MESSAGE(bogus.err.find("unknown command \"bogus\" (valid: run, validate, yield, version, fence, "
                               "fence-keeper") != std::string::npos, bogus.err);

  // The README: every field is optional, --config too (defaults and flags).
  auto val = run_cli(dir, {"validate", "--server", "http://127.0.0.1:9", "--identity", "x",
                           "--namespace", "ns1"});
  CHECK_MESSAGE(val.code == 0, val.err);
  CHECK(val.out.find("(no config file): ok (0 modules, lease ns1/leasehold, identity x") == 0);
  child run({build_root() + "/cmd/leasehold/leasehold", "run", "--server", "http://127.0.0.1:9",
             "--health-addr", "127.0.0.1:0"},
            dir.file("run.out"), dir.file("run.err"));
  CHECK(wait_until([&] { return read_file(dir.file("run.err")).find("agent started")
                                != std::string::npos; }, 5s));
  run.signal(SIGTERM);
  CHECK(run.wait(3s) == std::optional<int>(0));
}

TEST_CASE("leasehold-apiserver parses its flags with CLI11") {
  temp_dir dir;
  auto bin = build_root() + "/cmd/leasehold-apiserver/leasehold-apiserver";
  auto help = run_program(dir, {bin, "--help"});
  CHECK(help.code == 0);
  for (auto f : {"--host", "--port", "--control-port", "--snapshot", "--tls-cert", "--tls-key",
                 "--log-requests", "--version", "--help"})
    CHECK_MESSAGE(help.out.find(f) != std::string::npos, f);
  auto bogus = run_program(dir, {bin, "--bogus"});
  CHECK(bogus.code != 0);
  CHECK_MESSAGE(bogus.err.find("--bogus") != std::string::npos, bogus.err);
  auto port = run_program(dir, {bin, "--port", "18o8o"});
  CHECK(port.code != 0);
  CHECK_MESSAGE(port.err.find("--port") != std::string::npos, port.err);
  auto v = run_program(dir, {bin, "--version"});
  CHECK(v.out == "leasehold-apiserver " LEASEHOLD_VERSION "\n");
}

TEST_CASE("the default identity is unique per process; an explicit one is kept") {
  temp_dir dir;
  unsetenv("POD_NAME");
  auto identity = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"validate", "--server", "http://127.0.0.1:9"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_cli(dir, args);
    auto at = r.out.find("identity ");
    REQUIRE_MESSAGE(at != std::string::npos, r.err);
    return r.out.substr(at + 9, r.out.find(',', at) - at - 9);
  };
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto a = identity({});
  auto b = identity({});
  CHECK(a != b);
  CHECK(a.rfind(std::string(host) + "_", 0) == 0);
  CHECK(a.size() == std::string(host).size() + 13);
  CHECK(identity({"--identity", "mine"}) == "mine");

  // Two agents on one host with no identity: both run, exactly one leads.
  api_server api(dir);
  write_file(dir.file("c.json"), short_config().dump());
  std::vector<std::unique_ptr<child>> agents;
  for (int i = 0; i < 2; ++i)
    agents.push_back(std::make_unique<child>(
      std::vector<std::string>{build_root() + "/cmd/leasehold/leasehold", "run", "--config",
                               dir.file("c.json"), "--server", api.url(), "--health-addr",
                               "127.0.0.1:0"},
      dir.file("a" + std::to_string(i) + ".out"), dir.file("a" + std::to_string(i) + ".err")));
  auto became_leader = [&](int i) {
    return read_file(dir.file("a" + std::to_string(i) + ".err")).find("became leader")
           != std::string::npos;
  };
  REQUIRE(wait_until([&] { return became_leader(0) || became_leader(1); }, 8s));
  int other = became_leader(0) ? 1 : 0;
  // The other one sees the leader as someone else: its "leader changed"
  // names a holder that is not its own identity (a shared identity would
  // make it renew the leader's term as its own instead).
  json seen;
  CHECK(wait_until([&] {
    std::istringstream log(read_file(dir.file("a" + std::to_string(other) + ".err")));
    for (std::string line; std::getline(log, line);) {
      auto j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("msg", "") == "leader changed" && !j.value("holder", "").empty())
        seen = j;
    }
    return !seen.is_null();
  }, 5s));
  CHECK(seen.value("holder", "") != seen.value("identity", ""));
  CHECK(!became_leader(other));
  for (auto& c : agents) {
    c->signal(SIGTERM);
    CHECK(c->wait(3s) == std::optional<int>(0));
  }
}

TEST_CASE("a busy port is a start-up error naming the port and the setting") {
  temp_dir dir;
  api_server api(dir);
  write_file(dir.file("c.json"), short_config().dump());
  agent first(dir, "first", dir.file("c.json"), {"--server", api.url()});
  int port = first.health_port();
  REQUIRE(port > 0);
  auto second = run_cli(dir, {"run", "--config", dir.file("c.json"), "--server", api.url(),
                              "--health-addr", "127.0.0.1:" + std::to_string(port)},
                        5s);
  CHECK(second.code == 1);
  CHECK_MESSAGE(second.err.find("127.0.0.1:" + std::to_string(port)) != std::string::npos,
                second.err);
  CHECK(second.err.find("in use") != std::string::npos);
  CHECK(second.err.find("health_addr") != std::string::npos);
  CHECK(http_get(port, "/healthz").status == 200);   // the first one still answers

  auto bin = build_root() + "/cmd/leasehold-apiserver/leasehold-apiserver";
  auto busy = run_program(dir, {bin, "--port", std::to_string(api.port())}, 5s);
  CHECK(busy.code == 1);
  CHECK_MESSAGE(busy.err.find("127.0.0.1:" + std::to_string(api.port())) != std::string::npos,
                busy.err);
  CHECK(busy.err.find("--port") != std::string::npos);
  auto busy_control = run_program(dir, {bin, "--control-port", std::to_string(api.control_port())},
                                  5s);
  CHECK(busy_control.code == 1);
  CHECK(busy_control.err.find("--control-port") != std::string::npos);
  first.process().signal(SIGTERM);
  CHECK(first.process().wait(3s) == std::optional<int>(0));
}

TEST_CASE("the shipped manifests' settings under a read-only root: fence files go to the "
          "emptyDir; an unwritable fence directory is a start-up error") {
  temp_dir dir;
  auto dep = YAML::LoadFile(source_root() + "/deploy/deployment.yaml");
  auto pod = dep["spec"]["template"]["spec"];
  auto c = pod["containers"][0];
  REQUIRE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  std::string fence_dir;
  for (auto e : c["env"])
    if (e["name"].as<std::string>() == "LEASEHOLD_FENCE_DIR")
      fence_dir = e["value"].as<std::string>();
  REQUIRE(!fence_dir.empty());
  std::string volume;
  for (auto m : c["volumeMounts"])
    if (m["mountPath"].as<std::string>() == fence_dir)
      volume = m["name"].as<std::string>();
  REQUIRE(!volume.empty());
  bool memory_empty_dir = false;
  for (auto v : pod["volumes"])
    if (v["name"].as<std::string>() == volume)
      memory_empty_dir = v["emptyDir"] && v["emptyDir"]["medium"].as<std::string>() == "Memory";
  CHECK(memory_empty_dir);

  // The shipped config with a leader-only exec job, as examples/fenced-job.sh.
  auto cm = YAML::LoadFile(source_root() + "/deploy/configmap.yaml");
  auto cfg = nlohmann::json::parse(cm["data"]["config.json"].as<std::string>());
  cfg["modules"].push_back({{"type", "exec"}, {"name", "job"}, {"leader_only", true},
                            {"settings", {{"command", {"/bin/true"}}}}});
  write_file(dir.file("config.json"), cfg.dump());
  // The read-only root: /tmp (TMPDIR) cannot be written; the emptyDir stands
  // in as a temporary directory.
  std::string ro = dir.file("readonly-root-tmp");   // does not exist: not writable
  std::string empty_dir = dir.file("fence");
  REQUIRE(::mkdir(empty_dir.c_str(), 0700) == 0);
  std::vector<std::string> args;
  for (auto a : c["args"])
    args.push_back(a.as<std::string>());
  REQUIRE(args.size() >= 3);
  REQUIRE(args[0] == "run");
  auto with_env = [&](std::vector<std::string> env, const std::string& cmd) {
    std::vector<std::string> argv{"/usr/bin/env", "TMPDIR=" + ro};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(build_root() + "/cmd/leasehold/leasehold");
    argv.push_back(cmd);
    argv.insert(argv.end(), {"--config", dir.file("config.json"), "--server", "http://127.0.0.1:9",
                             "--health-addr", "127.0.0.1:0"});
    return run_program(dir, argv);
  };
  // As shipped (the env's directory, here the stand-in): validate passes.
  auto ok = with_env({"LEASEHOLD_FENCE_DIR=" + empty_dir}, "validate");
  CHECK_MESSAGE(ok.code == 0, ok.err);
  // Without the emptyDir: a start-up error naming the directory, for
  // validate and for run (no child with an empty LEASEHOLD_FENCE_FILE).
  for (auto cmd : {"validate", "run"}) {
    auto bad = with_env({}, cmd);
    CHECK_MESSAGE(bad.code == 1, cmd);
    CHECK_MESSAGE(bad.err.find("fence_dir: cannot create a fence file in") != std::string::npos,
                  bad.err);
    CHECK_MESSAGE(bad.err.find(ro) != std::string::npos, bad.err);
  }
}

TEST_CASE("validate names every etcd endpoint, not only the first") {
  temp_dir dir;
  write_file(dir.file("c.json"), short_config().dump());
  auto r = run_cli(dir, {"validate", "--config", dir.file("c.json"), "--backend", "etcd",
                         "--etcd-endpoints", "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3"});
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(r.out.find("etcd http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3")
                  != std::string::npos,
                r.out);
}

TEST_CASE("validate warns when etcd timings make a crash's takeover take two lease durations") {
  temp_dir dir;
  auto etcd_args = [&](const std::string& file) {
    return std::vector<std::string>{"validate", "--config", dir.file(file), "--backend", "etcd",
                                    "--etcd-endpoints", "http://127.0.0.1:1"};
  };
  // 1.5 s + 300 ms + 1 s > 2 s: no TTL reading can tell an expiry.
  write_file(dir.file("slow.json"), short_config().dump());
  auto slow = run_cli(dir, etcd_args("slow.json"));
  CHECK_MESSAGE(slow.code == 0, slow.err);
  CHECK_MESSAGE(slow.err.find("warning: timings: on etcd renew_deadline + request_timeout + 1 s "
                              "(1500 ms + 300 ms + 1000 ms) exceeds the key's TTL (2 s)")
                  != std::string::npos,
                slow.err);
  // 800 ms + 200 ms + 1 s <= 2 s (bench/balance.py's etcd timings): no warning.
  auto fast_doc = short_config();
  fast_doc["timings"] = test_timings("2s", "800ms", "200ms", "400ms");
  write_file(dir.file("fast.json"), fast_doc.dump());
  auto fast = run_cli(dir, etcd_args("fast.json"));
  CHECK_MESSAGE(fast.code == 0, fast.err);
  CHECK_MESSAGE(fast.err.find("warning") == std::string::npos, fast.err);
  // Kubernetes judges expiry from the last renew seen: no warning at any timings.
  auto k8s = run_cli(dir, {"validate", "--config", dir.file("slow.json"), "--server",
                           "http://127.0.0.1:9"});
  CHECK_MESSAGE(k8s.code == 0, k8s.err);
  CHECK_MESSAGE(k8s.err.find("warning") == std::string::npos, k8s.err);
}
