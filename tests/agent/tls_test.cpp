// kubeconfig auth over TLS: a CA and server certificate made with the
// openssl CLI, the agent verifying the server with certificate-authority and
// sending a bearer token.
#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/agent/harness.hpp"

using namespace leasehold::test;
using nlohmann::json;

namespace {

bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

/// CA + server certificate for 127.0.0.1 under `dir`.
bool make_certificates(const temp_dir& dir) {
  auto d = dir.path();
  write_file(dir.file("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  return sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=leasehold-test-ca"
            " -keyout " + d + "/ca.key -out " + d + "/ca.crt")
         && sh("openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1"
               " -keyout " + d + "/server.key -out " + d + "/server.csr")
         && sh("openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.crt -CAkey " + d
               + "/ca.key -CAcreateserial -days 2 -extfile " + d + "/san.ext -out " + d
               + "/server.crt");
}

} // namespace

TEST_CASE("kubeconfig with certificate-authority and token over TLS: the agent leads") {
  // openssl is a dependency scripts/setup installs: missing, the test fails
  // (a silent skip would count as a pass).
  REQUIRE_MESSAGE(command_exists("openssl"), "the openssl CLI is not installed (scripts/setup installs it)");
  temp_dir dir;
  REQUIRE(make_certificates(dir));
  api_server api(dir, {"--tls-cert", dir.file("server.crt"), "--tls-key", dir.file("server.key")});
  REQUIRE(api.url().rfind("https://", 0) == 0);
  write_file(dir.file("kubeconfig"),
             "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
             "clusters:\n- name: local\n  cluster:\n    server: " + api.url() + "\n"
             "    certificate-authority: " + dir.file("ca.crt") + "\n"
             "contexts:\n- name: test\n  context:\n    cluster: local\n    user: agent\n"
             "    namespace: tls-ns\n"
             "users:\n- name: agent\n  user:\n    token: test-token\n");
  write_file(dir.file("config.json"), short_config().dump());
  agent a(dir, "tls-agent", dir.file("config.json"), {"--kubeconfig", dir.file("kubeconfig")});
  REQUIRE(a.health_port() > 0);
  CHECK(wait_until([&] {
    auto st = agent_state(a);
    return st.is_object() && st["state"] == "leader";
  }, 10s));
  // The namespace comes from the kubeconfig context.
  auto lease = api.lease("tls-ns", "agent-test");
  REQUIRE(lease);
  CHECK((*lease)["spec"]["holderIdentity"] == "tls-agent");
  a.process().signal(SIGTERM);
  CHECK(a.process().wait(3s) == std::optional<int>(0));
}
