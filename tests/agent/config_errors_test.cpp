// Config errors no retry can fix: each bad config goes through both
// `leasehold validate` and `leasehold run`; both must exit non-zero with the
// same error (one resolution function behind both), and `run` must not start.
#include <doctest/doctest.h>

#include <functional>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

std::string kubeconfig(const std::string& server, const std::string& cluster_extra,
                       const std::string& user, const std::string& ns = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
         "clusters:\n- name: k\n  cluster:\n    server: " + server + "\n" + cluster_extra +
         "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n" +
         (ns.empty() ? "" : "    namespace: " + ns + "\n") +
         "users:\n- name: u\n  user:\n" + user;
}

struct bad_case {
  const char* name;
  /// Writes files into the dir and returns extra command-line arguments;
  /// may change the config document.
  std::function<std::vector<std::string>(const temp_dir&, json&)> setup;
  const char* expected;   // in both outputs
};

json exec_module(json settings) {
  return {{"type", "exec"}, {"name", "job"}, {"settings", std::move(settings)}};
}

const std::vector<bad_case> bad_cases = {
  {"missing kubeconfig",
   [](const temp_dir& d, json&) { return std::vector<std::string>{"--kubeconfig", d.file("nope")}; },
   "unreadable"},
  {"unparsable kubeconfig",
   [](const temp_dir& d, json&) {
     write_file(d.file("kc"), "clusters: [unclosed\n");
     return std::vector<std::string>{"--kubeconfig", d.file("kc")};
   },
   "kubeconfig"},
  {"exec credential plugin",
   [](const temp_dir& d, json&) {
     write_file(d.file("kc"), kubeconfig("https://127.0.0.1:9", "",
                                         "    exec:\n      command: aws\n"));
     return std::vector<std::string>{"--kubeconfig", d.file("kc")};
   },
   "exec: not supported"},
  {"missing tokenFile",
   [](const temp_dir& d, json&) {
     write_file(d.file("kc"), kubeconfig("https://127.0.0.1:9", "",
                                         "    tokenFile: " + d.file("missing-token") + "\n"));
     return std::vector<std::string>{"--kubeconfig", d.file("kc")};
   },
   "missing-token"},
  {"CA file that is not PEM",
   [](const temp_dir& d, json&) {
     write_file(d.file("ca.crt"), "not a certificate\n");
     write_file(d.file("kc"), kubeconfig("https://127.0.0.1:9",
                                         "    certificate-authority: " + d.file("ca.crt") + "\n",
                                         "    token: abc\n"));
     return std::vector<std::string>{"--kubeconfig", d.file("kc")};
   },
   "no PEM certificate"},
  {"unwritable journal path",
   [](const temp_dir& d, json&) {
     return std::vector<std::string>{"--server", "http://127.0.0.1:9", "--journal",
                                     d.file("no-such-dir/journal")};
   },
   "journal: "},
  {"port 18o8o in the server URL",
   [](const temp_dir&, json&) {
     return std::vector<std::string>{"--server", "http://127.0.0.1:18o8o"};
   },
   "invalid port \\\"18o8o\\\""},
  {"port 18o8o in a kubeconfig's server",
   [](const temp_dir& d, json&) {
     write_file(d.file("kc"), kubeconfig("http://127.0.0.1:18o8o", "", "    token: abc\n"));
     return std::vector<std::string>{"--kubeconfig", d.file("kc")};
   },
   "18o8o"},
  {"userinfo in the server URL",
   [](const temp_dir&, json& c) {
     c["server"] = "http://admin:secret@127.0.0.1:9";
     return std::vector<std::string>{};
   },
   "server: server URL: user information"},
  {"a lease name the API rejects (422)",
   [](const temp_dir&, json& c) {
     c["lease_name"] = "My_Lease";
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "lease_name: must be a lowercase RFC 1123 subdomain"},
  {"a log format that is neither json nor text",
   [](const temp_dir&, json& c) {
     c["log_format"] = "xml";
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "log_format: must be json or text (is \\\"xml\\\")"},
  {"exec with a command that does not exist",
   [](const temp_dir&, json& c) {
     c["modules"].push_back(exec_module({{"command", {"leasehold-no-such-binary", "x"}}}));
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "modules[2].settings.command: \\\"leasehold-no-such-binary\\\" not found on PATH"},
  {"exec grace_ms not below module_stop_timeout",
   [](const temp_dir&, json& c) {
     c["modules"].push_back(exec_module({{"command", {"true"}}, {"grace_ms", 5000}}));
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "modules[2].settings.grace_ms: 5000ms must be below timings.module_stop_timeout (400ms)"},
  {"a misspelt field",
   [](const temp_dir&, json& c) {
     c["lease_nmae"] = "x";
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "lease_nmae: unknown field (did you mean \\\"lease_name\\\"?)"},
  {"a misspelt module field",
   [](const temp_dir&, json& c) {
     c["modules"][0]["leader_onyl"] = true;
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "modules[0].leader_onyl: unknown field (did you mean \\\"leader_only\\\"?)"},
  {"a quoted false",
   [](const temp_dir&, json& c) {
     c["modules"][0]["enabled"] = "false";
     return std::vector<std::string>{"--server", "http://127.0.0.1:9"};
   },
   "modules[0].enabled: must be true or false: \\\"false\\\" was read as a string (quoted); write "
   "false without quotes"},
  {"a missing etcd CA file",
   [](const temp_dir&, json& c) {
     c["backend"] = "etcd";
     c["etcd"] = {{"endpoints", {"https://127.0.0.1:9"}}, {"ca_file", "no-such-ca.pem"}};
     return std::vector<std::string>{};
   },
   "etcd.ca_file: no-such-ca.pem: cannot read the CA file: No such file or directory"},
};

} // namespace

TEST_CASE("validate and run agree on every config error no retry can fix") {
  for (auto& c : bad_cases) {
    CAPTURE(c.name);
    temp_dir dir;
    auto doc = short_config();
    auto extra = c.setup(dir, doc);
    write_file(dir.file("c.json"), doc.dump());
    std::vector<std::string> common{"--config", dir.file("c.json"), "--identity", "x",
                                    "--health-addr", "127.0.0.1:0"};
    common.insert(common.end(), extra.begin(), extra.end());
    auto v_args = common;
    v_args.insert(v_args.begin(), "validate");
    auto r_args = common;
    r_args.insert(r_args.begin(), "run");
    auto v = run_cli(dir, v_args);
    auto r = run_cli(dir, r_args, 5s);
    CHECK(v.code == 1);
    CHECK_MESSAGE(r.code == 1, r.err);
    // validate prints the plain text; run logs it JSON-escaped.
    auto plain = json::parse("\"" + std::string(c.expected) + "\"").get<std::string>();
    CHECK_MESSAGE(v.err.find(plain) != std::string::npos, v.err);
    CHECK_MESSAGE(r.err.find(c.expected) != std::string::npos, r.err);
    CHECK(r.err.find("agent started") == std::string::npos);
  }
}

TEST_CASE("validate prints the namespace run uses (kubeconfig context namespace)") {
  temp_dir dir;
  api_server api(dir);
  write_file(dir.file("kc"), kubeconfig(api.url(), "", "    token: abc\n", "team-a"));
  write_file(dir.file("c.json"), short_config().dump());
  auto v = run_cli(dir, {"validate", "--config", dir.file("c.json"), "--kubeconfig", dir.file("kc")});
  CHECK_MESSAGE(v.code == 0, v.err);
  CHECK(v.out.find("lease team-a/agent-test") != std::string::npos);
  agent a(dir, "ns-check", dir.file("c.json"), {"--kubeconfig", dir.file("kc")});
  REQUIRE(a.health_port() > 0);
  CHECK(agent_state(a)["lease"] == "team-a/agent-test");
  CHECK(wait_until([&] { return api.lease("team-a", "agent-test").has_value(); }, 5s));
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(3s) == std::optional<int>(0));
}

TEST_CASE("a 422 from the API at run time is a fatal config error, not a retry") {
  temp_dir dir;
  api_server api(dir);
  write_file(dir.file("c.json"), short_config().dump());
  agent a(dir, "rejected", dir.file("c.json"), {"--server", api.url()});
  REQUIRE(a.health_port() > 0);
  REQUIRE(api.fault({{"mode", "error"}, {"status", 422}}));
  // The next poll (300 ms) gets the 422; the agent stops within
  // module_stop_timeout + 2 s and exits 1.
  auto code = a.process().wait(4s);
  CHECK(code == std::optional<int>(1));
  bool logged = false;
  for (auto& l : a.log_lines())
    logged = logged || l.value("msg", "").find("rejects the lease as invalid") != std::string::npos;
  CHECK(logged);
}
