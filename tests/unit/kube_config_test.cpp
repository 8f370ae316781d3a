#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/unit/test_support.hpp"
#include "transport/base64.hpp"
#include "transport/kube/kube_client.hpp"
#include "transport/kube/kube_config.hpp"

using namespace leasehold;

namespace {

std::string base64(const std::string& in) { return encode_base64(in); }

/// A kubeconfig with one context `ctx` → cluster `c` and user `u`.
std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& current = "ctx") {
  return "apiVersion: v1\nkind: Config\n"
         "current-context: " + current + "\n"
         "contexts:\n"
         "- name: other\n  context: {cluster: nowhere, user: nobody}\n"
         "- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\n"
         "clusters:\n"
         "- name: c\n  cluster:\n" + cluster +
         "users:\n"
         "- name: someone-else\n  user: {token: wrong}\n"
         "- name: u\n  user:\n" + user;
}

/// Sets an environment variable for the scope of a test, restoring it after.
class scoped_env {
public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char* name_;
  std::optional<std::string> old_;
};

} // namespace

TEST_CASE("decode_base64") {
  CHECK(decode_base64("") == "");
  CHECK(decode_base64("aGVsbG8=") == "hello");
  CHECK(decode_base64("aGVs\nbG8h") == "hello!");
  CHECK(decode_base64("aGVsbA==") == "hell");
  CHECK(decode_base64(base64(std::string("\0\xff\x10", 3))) == std::string("\0\xff\x10", 3));
  CHECK(!decode_base64("aGVsbG8"));
  CHECK(!decode_base64("aGV*bG8="));
  CHECK(!decode_base64("aG=sbG8="));
  CHECK(!decode_base64("aGVsbG8=aGVs"));
}

TEST_CASE("kubeconfig with a token") {
  test::temp_dir dir;
  auto path = dir.file("config");
  test::write_file(path, kubeconfig("    server: https://10.0.0.1:6443\n"
                                    "    insecure-skip-tls-verify: true\n",
                                    "    token: abc.def\n"));
  auto r = load_kubeconfig(path);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config->server == "https://10.0.0.1:6443");
  CHECK(r.config->insecure_skip_tls_verify);
  CHECK(r.config->token == "abc.def");
  CHECK(r.config->token_file.empty());
  CHECK(r.ns == "team-a");
}

TEST_CASE("kubeconfig with CA and client certificate data") {
  test::temp_dir dir;
  auto ca = test::slurp(test::tls_file("ca.crt"));
  auto cert = test::slurp(test::tls_file("client.crt"));
  auto key = test::slurp(test::tls_file("client.key"));
  auto path = dir.file("config");
  test::write_file(path, kubeconfig("    server: https://127.0.0.1:6443\n"
                                    "    certificate-authority-data: " + base64(ca) + "\n",
                                    "    client-certificate-data: " + base64(cert) + "\n" +
                                    "    client-key-data: " + base64(key) + "\n"));
  auto r = load_kubeconfig(path);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config->ca_data == ca);
  CHECK(r.config->client_cert_data == cert);
  CHECK(r.config->client_key_data == key);
  CHECK(r.config->ca_file.empty());
}

TEST_CASE("kubeconfig relative paths resolve against its directory") {
  test::temp_dir dir;
  std::filesystem::create_directories(dir.file("kube/certs"));
  test::write_file(dir.file("kube/certs/ca.crt"), test::slurp(test::tls_file("ca.crt")));
  test::write_file(dir.file("kube/certs/client.crt"), test::slurp(test::tls_file("client.crt")));
  test::write_file(dir.file("kube/certs/client.key"), test::slurp(test::tls_file("client.key")));
  test::write_file(dir.file("kube/token"), "tok\n");
  auto path = dir.file("kube/config");
  test::write_file(path, kubeconfig("    server: https://127.0.0.1:6443\n"
                                    "    certificate-authority: certs/ca.crt\n",
                                    "    tokenFile: token\n"
                                    "    client-certificate: certs/client.crt\n"
                                    "    client-key: " + dir.file("kube/certs/client.key") + "\n"));
  auto r = load_kubeconfig(path);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config->ca_file == dir.file("kube/certs/ca.crt"));
  CHECK(r.config->token_file == dir.file("kube/token"));
  CHECK(r.config->client_cert_file == dir.file("kube/certs/client.crt"));
  CHECK(r.config->client_key_file == dir.file("kube/certs/client.key"));
}

TEST_CASE("kubeconfig errors name the file and the field") {
  test::temp_dir dir;
  auto path = dir.file("config");
  auto load = [&](const std::string& text) {
    test::write_file(path, text);
    auto r = load_kubeconfig(path);
    CHECK(!r.ok());
    return r.error;
  };
  const std::string server = "    server: https://127.0.0.1:6443\n";
  CHECK(load(kubeconfig(server, "    token: t\n", "\"\"")) ==
        "kubeconfig " + path + ": current-context: missing");
  CHECK(load(kubeconfig(server, "    token: t\n", "nope")) ==
        "kubeconfig " + path + ": contexts: no entry named \"nope\" (current-context)");
  CHECK(load(kubeconfig(server, "    client-key-data: '%%%'\n")) ==
        "kubeconfig " + path + ": users[1].user.client-key-data: invalid base64");
  CHECK(load(kubeconfig(server, "    tokenFile: missing-token\n")) ==
        "kubeconfig " + path + ": users[1].user.tokenFile: " + dir.file("missing-token") +
          ": unreadable");
  CHECK(load(kubeconfig("    insecure-skip-tls-verify: true\n", "    token: t\n")) ==
        "kubeconfig " + path + ": clusters[0].cluster.server: missing");
  CHECK(load(kubeconfig(server + "    insecure-skip-tls-verify: maybe\n", "    token: t\n")) ==
        "kubeconfig " + path + ": clusters[0].cluster.insecure-skip-tls-verify: expected true or false");
  CHECK(load(kubeconfig(server, "    token: [a, b]\n")) ==
        "kubeconfig " + path + ": users[1].user.token: expected string");
  CHECK(load(kubeconfig(server, "    exec: {command: aws}\n")) ==
        "kubeconfig " + path +
          ": users[1].user.exec: not supported (use a token, tokenFile or client certificate)");
  CHECK(load(kubeconfig(server, "    client-certificate-data: " + base64("x") + "\n")) ==
        "kubeconfig " + path +
          ": users[1].user.client-key: missing (client certificate and key go together)");
  CHECK(load("current-context: [unclosed\n").rfind("kubeconfig " + path + ": line ", 0) == 0);
  CHECK(load("- just\n- a list\n") == "kubeconfig " + path + ": document: expected map");
  CHECK(load_kubeconfig(dir.file("absent")).error ==
        "kubeconfig " + dir.file("absent") + ": unreadable");
}

TEST_CASE("kubeconfig: an explicit context overrides current-context") {
  test::temp_dir dir;
  auto path = dir.file("config");
  test::write_file(path, kubeconfig("    server: http://127.0.0.1:8001\n", "    token: t\n",
                                    "other"));
  auto current = load_kubeconfig(path);
  CHECK(current.error == "kubeconfig " + path +
                           ": clusters: no entry named \"nowhere\" (contexts[0].context.cluster)");
  auto chosen = load_kubeconfig(path, "ctx");
  REQUIRE_MESSAGE(chosen.ok(), chosen.error);
  CHECK(chosen.config->server == "http://127.0.0.1:8001");
}

TEST_CASE("in-cluster config from a service-account directory") {
  test::temp_dir dir;
  test::write_file(dir.file("token"), "sa-token\n");
  test::write_file(dir.file("ca.crt"), test::slurp(test::tls_file("ca.crt")));
  test::write_file(dir.file("namespace"), "kube-system\n");
  {
    scoped_env host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    scoped_env port("KUBERNETES_SERVICE_PORT", "443");
    auto r = load_in_cluster_config(dir.path() + "/");
    REQUIRE_MESSAGE(r.ok(), r.error);
    CHECK(r.config->server == "https://10.96.0.1:443");
    CHECK(r.config->token_file == dir.file("token"));
    CHECK(r.config->ca_file == dir.file("ca.crt"));
    CHECK(r.config->token.empty()); // read per request, so rotation is seen
    CHECK(r.ns == "kube-system");
    CHECK(service_account_namespace(dir.path()) == "kube-system");

    auto chosen = load_connection_config("", "", dir.path());
    REQUIRE(chosen.ok());
    CHECK(chosen.config->server == "https://10.96.0.1:443");
    CHECK(load_connection_config("http://127.0.0.1:8001", "", dir.path()).config->server ==
          "http://127.0.0.1:8001");

    std::filesystem::remove(dir.file("token"));
    CHECK(load_in_cluster_config(dir.path()).error ==
          "in-cluster: " + dir.file("token") + ": unreadable or empty token file");
  }
  {
    scoped_env host("KUBERNETES_SERVICE_HOST", "fd00::1");
    scoped_env port("KUBERNETES_SERVICE_PORT", "6443");
    test::write_file(dir.file("token"), "sa-token\n");
    CHECK(load_in_cluster_config(dir.path()).config->server == "https://[fd00::1]:6443");
  }
  {
    scoped_env host("KUBERNETES_SERVICE_HOST", nullptr);
    CHECK(load_in_cluster_config(dir.path()).error ==
          "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
}

TEST_CASE("--server and the default kubeconfig path") {
  auto r = server_config("http://127.0.0.1:8001");
  REQUIRE(r.ok());
  CHECK(r.config->server == "http://127.0.0.1:8001");
  CHECK(r.config->token.empty());
  CHECK(!server_config("127.0.0.1:8001").ok());
  {
    scoped_env kc("KUBECONFIG", "/a/config:/b/config");
    CHECK(default_kubeconfig_path() == "/a/config");
  }
  {
    scoped_env kc("KUBECONFIG", nullptr);
    scoped_env home("HOME", "/home/me");
    CHECK(default_kubeconfig_path() == "/home/me/.kube/config");
  }
}

TEST_CASE("a kubeconfig with inline TLS data reaches a TLS server") {
  test::loopback_server<httplib::SSLServer> server(test::tls_file("server.crt").c_str(),
                                                   test::tls_file("server.key").c_str(),
                                                   test::tls_file("ca.crt").c_str());
  server.http().Get(R"(/apis/.*)", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(test::lease_body("agent-1-lock", "9", "a", 0), "application/json");
  });
  server.start();
  test::temp_dir dir;
  auto path = dir.file("config");
  test::write_file(path, kubeconfig("    server: " + server.url("https") + "\n" +
                                    "    certificate-authority-data: " +
                                    base64(test::slurp(test::tls_file("ca.crt"))) + "\n",
                                    "    client-certificate-data: " +
                                    base64(test::slurp(test::tls_file("client.crt"))) + "\n" +
                                    "    client-key-data: " +
                                    base64(test::slurp(test::tls_file("client.key"))) + "\n"));
  auto r = load_kubeconfig(path);
  REQUIRE_MESSAGE(r.ok(), r.error);
  kube_client client(*r.config);
  auto got = client.get_lease({r.ns, "agent-1-lock"});
  CHECK_MESSAGE(got.ok(), got.error.describe());
}
