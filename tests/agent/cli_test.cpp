// `leasehold validate`, `version`, `--help` and start-up errors, as processes.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

std::string leasehold_bin() {
  return build_root() + "/cmd/leasehold/leasehold";
}

struct result {
  int code = -1;
  std::string out, err;
};

result run_cli(const temp_dir& dir, std::vector<std::string> args,
               std::chrono::milliseconds timeout = 10s) {
  args.insert(args.begin(), leasehold_bin());
  child c(args, dir.file("cli.out"), dir.file("cli.err"));
  auto code = c.wait(timeout);
  result r;
  r.code = code.value_or(-1);
  r.out = read_file(dir.file("cli.out"));
  r.err = read_file(dir.file("cli.err"));
  std::remove(dir.file("cli.err").c_str());
  return r;
}

} // namespace

TEST_CASE("validate accepts a good config") {
  temp_dir dir;
  write_file(dir.file("ok.json"), short_config().dump());
  auto r = run_cli(dir, {"validate", "--config", dir.file("ok.json")});
  CHECK(r.code == 0);
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
  for (auto cmd : {"run", "validate", "version"}) {
    r = run_cli(dir, {cmd, "--help"});
    CHECK_MESSAGE(r.code == 0, cmd);
    CHECK_MESSAGE(r.out.find("--help") != std::string::npos, cmd);
  }
  r = run_cli(dir, {"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("validate") != std::string::npos);
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
  std::this_thread::sleep_for(1500ms);
  CHECK(a.process().running());
  CHECK(http_get(port, "/readyz").status == 503);
  CHECK(http_get(port, "/healthz").status == 200);
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(3s) == std::optional<int>(0));
}

TEST_CASE("the config shipped in deploy/configmap.yaml validates") {
  temp_dir dir;
  auto cm = YAML::LoadFile(source_root() + "/deploy/configmap.yaml");
  write_file(dir.file("config.json"), cm["data"]["config.json"].as<std::string>());
  auto r = run_cli(dir, {"validate", "--config", dir.file("config.json")});
  CHECK_MESSAGE(r.code == 0, r.err);
}
