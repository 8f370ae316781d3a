#include <doctest/doctest.h>

#include <mutex>
#include <vector>

#include "tests/unit/test_support.hpp"
#include "transport/kube/kube_client.hpp"

using namespace leasehold;
using json = nlohmann::json;
using namespace std::chrono_literals;
using leasehold::test::fast_config;

namespace {

const lease_key key{"default", "agent-1-lock"};

/// What the server saw of each request.
struct seen_request {
  std::string method, path, user_agent, authorization, content_type, body;
};

/// A fake API server: canned Lease/Status bodies, requests recorded.
class fake_api {
public:
  fake_api() {
    auto& s = server_.http();
    s.Get(lease_path(key), [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_content(test::lease_body(key.name, "5", "pod-a", 1), "application/json");
    });
    s.Get(lease_path({"default", "missing"}),
          [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            res.status = 404;
            res.set_content(test::fixture("status-notfound.json"), "application/json");
          });
    s.Post(leases_path("default"), [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      auto name = json::parse(req.body)["metadata"]["name"].get<std::string>();
      if (name == "taken") {
        res.status = 409;
        res.set_content(test::fixture("status-alreadyexists.json"), "application/json");
        return;
      }
      res.status = 201;
      res.set_content(test::lease_body(name, "1", "pod-a", 0), "application/json");
    });
    s.Put(lease_path(key), [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      auto body = json::parse(req.body);
      auto rv = body["metadata"].value("resourceVersion", "");
      if (rv.empty()) {
        res.status = 422;
        res.set_content(
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,)"
          R"("message":"metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"})",
          "application/json");
      } else if (rv != "5") {
        res.status = 409;
        res.set_content(test::fixture("status-conflict.json"), "application/json");
      } else {
        res.set_content(test::lease_body(key.name, "6", body["spec"]["holderIdentity"], 2),
                        "application/json");
      }
    });
    s.Post(events_path("default"), [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 201;
      res.set_content(req.body, "application/json");
    });
    // Reached through a server URL with a path prefix (http://host:port/hang).
    s.Get(R"(/hang/.*)", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(600ms);
      res.set_content("{}", "application/json");
    });
    s.Get(lease_path({"default", "half"}), [](const httplib::Request&, httplib::Response& res) {
      auto body = test::lease_body("half", "1", "a", 0);
      res.set_content(body.substr(0, body.size() - 20), "application/json");
    });
    s.Get(lease_path({"default", "busy"}), [](const httplib::Request&, httplib::Response& res) {
      res.status = 429;
      res.set_header("Retry-After", "3");
      res.set_content(R"({"kind":"Status","reason":"TooManyRequests","code":429,"message":"busy"})",
                      "application/json");
    });
    server_.start();
  }

  std::string url() const { return server_.url(); }

  std::vector<seen_request> seen() {
    std::lock_guard<std::mutex> g(mtx_);
    return seen_;
  }

private:
  void record(const httplib::Request& req) {
    std::lock_guard<std::mutex> g(mtx_);
    seen_.push_back({req.method, req.path, req.get_header_value("User-Agent"),
                     req.get_header_value("Authorization"), req.get_header_value("Content-Type"),
                     req.body});
  }

  std::mutex mtx_;
  std::vector<seen_request> seen_;
  test::loopback_server<> server_; // last: stopped before the members above go
};

lease make_lease(const std::string& name, const std::string& rv) {
  lease l;
  l.ns = "default";
  l.name = name;
  l.resource_version = rv;
  l.spec.holder_identity = "pod-b";
  l.spec.lease_duration_seconds = 15;
  return l;
}

} // namespace

TEST_CASE("request paths") {
  CHECK(lease_path(key) == "/apis/coordination.k8s.io/v1/namespaces/default/leases/agent-1-lock");
  CHECK(leases_path("ns") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
  CHECK(events_path("ns") == "/api/v1/namespaces/ns/events");
  connection_config cfg;
  CHECK(max_request_time(cfg) == cfg.connect_timeout + cfg.write_timeout + cfg.read_timeout);
}

TEST_CASE("kube_client GET/POST/PUT against canned API responses") {
  fake_api api;
  auto cfg = fast_config(api.url());
  cfg.token = "static-token";
  kube_client client(cfg);
  CHECK(client.config().user_agent == std::string("leasehold/") + LEASEHOLD_VERSION);

  auto got = client.get_lease(key);
  REQUIRE_MESSAGE(got.ok(), got.error.describe());
  CHECK(got.value->resource_version == "5");
  CHECK(got.value->spec.holder_identity == "pod-a");
  CHECK(got.value->raw["metadata"].contains("managedFields"));

  auto missing = client.get_lease({"default", "missing"});
  CHECK(missing.kind() == error_kind::not_found);
  CHECK(missing.error.verb == "GET");
  CHECK(missing.error.path == lease_path({"default", "missing"}));

  auto created = client.create_lease(make_lease("fresh", "stale-rv"));
  REQUIRE_MESSAGE(created.ok(), created.error.describe());
  CHECK(created.value->resource_version == "1");
  CHECK(client.create_lease(make_lease("taken", "")).kind() == error_kind::already_exists);

  auto updated = client.update_lease(make_lease(key.name, "5"));
  REQUIRE_MESSAGE(updated.ok(), updated.error.describe());
  CHECK(updated.value->resource_version == "6");
  CHECK(updated.value->spec.holder_identity == "pod-b");
  auto stale = client.update_lease(make_lease(key.name, "4"));
  CHECK(stale.kind() == error_kind::conflict);
  CHECK(stale.error.http_status == 409);
  CHECK(client.update_lease(make_lease(key.name, "")).kind() == error_kind::invalid);

  kube_event ev;
  ev.involved = key;
  ev.message = "pod-b became leader";
  ev.reporting_instance = "pod-b";
  auto posted = client.create_event(ev);
  CHECK_MESSAGE(posted.ok(), posted.error.describe());

  auto busy = client.get_lease({"default", "busy"});
  CHECK(busy.kind() == error_kind::throttled);
  CHECK(busy.error.retry_after_seconds == 3);

  auto seen = api.seen();
  REQUIRE(seen.size() == 8);
  for (const auto& r : seen) {
    CHECK(r.user_agent == std::string("leasehold/") + LEASEHOLD_VERSION);
    CHECK(r.authorization == "Bearer static-token");
  }
  // create never sends a resourceVersion; update always sends the caller's.
  auto create_body = json::parse(seen[2].body);
  CHECK(seen[2].method == "POST");
  CHECK(seen[2].content_type == "application/json");
  CHECK(!create_body["metadata"].contains("resourceVersion"));
  CHECK(create_body["spec"]["holderIdentity"] == "pod-b");
  CHECK(json::parse(seen[4].body)["metadata"]["resourceVersion"] == "5");
  CHECK(json::parse(seen[7].body)["kind"] == "Event");
}

TEST_CASE("kube_client: a server slower than the read timeout is a timeout") {
  fake_api api;
  kube_client client(fast_config(api.url() + "/hang"));
  // The server answers after 600 ms: a timeout (not the answer) is the proof
  // that the 200 ms read timeout ended the request, whatever the load.
  auto r = client.get_lease(key);
  CHECK(r.kind() == error_kind::timeout);
  CHECK(r.error.http_status == 0);
  CHECK(r.error.verb == "GET");
  CHECK(r.error.path == lease_path(key));
  INFO(r.error.describe());
}

TEST_CASE("kube_client: nobody listening is connection_refused") {
  kube_client client(fast_config("http://127.0.0.1:" + std::to_string(test::closed_port())));
  auto r = client.get_lease(key);
  CHECK(r.kind() == error_kind::connection_refused);
  CHECK(r.error.describe().rfind("GET " + lease_path(key) + ": connection_refused: ", 0) == 0);
  CHECK(client.create_event(kube_event{}).kind() == error_kind::connection_refused);
}

TEST_CASE("kube_client: a connection closed before any response is connection_refused") {
  test::raw_server server("");
  kube_client client(fast_config(server.url()));
  CHECK(client.get_lease(key).kind() == error_kind::connection_refused);
}

TEST_CASE("kube_client: truncated bodies are malformed_body") {
  SUBCASE("Content-Length larger than what was sent") {
    auto body = test::lease_body(key.name, "5", "pod-a", 1);
    test::raw_server server("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                            body.substr(0, 40));
    kube_client client(fast_config(server.url()));
    auto r = client.get_lease(key);
    CHECK(r.kind() == error_kind::malformed_body);
    CHECK(r.error.reason.find("body: truncated") == 0);
  }
  SUBCASE("complete response with partial JSON") {
    fake_api api;
    kube_client client(fast_config(api.url()));
    auto r = client.get_lease({"default", "half"});
    CHECK(r.kind() == error_kind::malformed_body);
    CHECK(r.error.http_status == 200);
    CHECK(r.error.reason.find("body: truncated or invalid JSON at byte") == 0);
  }
}

TEST_CASE("kube_client reconnects after the server closed an idle keep-alive connection") {
  test::loopback_server<> server;
  server.http().set_keep_alive_timeout(1);
  server.http().Get(lease_path(key), [](const httplib::Request&, httplib::Response& res) {
    res.set_content(test::lease_body(key.name, "5", "pod-a", 1), "application/json");
  });
  server.start();
  kube_client client(fast_config(server.url()));
  REQUIRE(client.get_lease(key).ok());
  std::this_thread::sleep_for(1300ms); // the server drops the idle connection
  auto r = client.get_lease(key);
  CHECK_MESSAGE(r.ok(), r.error.describe());
}

TEST_CASE("kube_client re-reads a rotated token file") {
  fake_api api;
  test::temp_dir dir;
  auto token_file = dir.file("token");
  test::write_file(token_file, "first-token\n");
  auto cfg = fast_config(api.url());
  cfg.token_file = token_file;
  kube_client client(cfg);
  REQUIRE(client.get_lease(key).ok());
  test::write_file(token_file, "second-token\n");
  REQUIRE(client.get_lease(key).ok());
  std::filesystem::remove(token_file); // mid-rotation: the last good token is kept
  REQUIRE(client.get_lease(key).ok());
  auto seen = api.seen();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].authorization == "Bearer first-token");
  CHECK(seen[1].authorization == "Bearer second-token");
  CHECK(seen[2].authorization == "Bearer second-token");
}

TEST_CASE("kube_client: an unreadable token file fails the request without sending it") {
  fake_api api;
  auto cfg = fast_config(api.url());
  cfg.token_file = "/nonexistent/leasehold/token";
  kube_client client(cfg);
  auto r = client.get_lease(key);
  CHECK(r.kind() == error_kind::other);
  CHECK(r.error.reason.find("/nonexistent/leasehold/token") != std::string::npos);
  CHECK(api.seen().empty());
}

TEST_CASE("kube_client: a bad server URL is an error value on every call") {
  for (const char* url : {"ftp://x", "127.0.0.1:8080", "http://", "http://host:99999",
                          "https://[::1"}) {
    kube_client client(fast_config(url));
    auto r = client.update_lease(make_lease("x", "1"));
    CHECK_MESSAGE(r.kind() == error_kind::other, url);
    CHECK(r.error.verb == "PUT");
  }
}

TEST_CASE("kube_client over TLS") {
  std::atomic<int> requests{0}; // before the server: it outlives the server's handlers
  test::loopback_server<httplib::SSLServer> server(test::tls_file("server.crt").c_str(),
                                                   test::tls_file("server.key").c_str(),
                                                   test::tls_file("ca.crt").c_str());
  server.http().Get(lease_path(key), [&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    res.set_content(test::lease_body(key.name, "5", "pod-a", 1), "application/json");
  });
  server.start();
  auto cfg = test::tls_client_config(server.url("https"));

  SUBCASE("CA file and client certificate data") {
    cfg.ca_file = test::tls_file("ca.crt");
    auto r = kube_client(cfg).get_lease(key);
    CHECK_MESSAGE(r.ok(), r.error.describe());
  }
  SUBCASE("CA data and client certificate files") {
    test::swap_to_certificate_files(cfg);
    auto r = kube_client(cfg).get_lease(key);
    CHECK_MESSAGE(r.ok(), r.error.describe());
  }
  SUBCASE("an untrusted server certificate is a tls_error") {
    cfg.ca_file = test::tls_file("other-ca.crt");
    CHECK(kube_client(cfg).get_lease(key).kind() == error_kind::tls_error);
    CHECK(requests == 0);
  }
  SUBCASE("insecure-skip-tls-verify accepts it") {
    cfg.ca_file = test::tls_file("other-ca.crt");
    cfg.insecure_skip_tls_verify = true;
    CHECK(kube_client(cfg).get_lease(key).ok());
  }
  SUBCASE("no client certificate: the server refuses the handshake") {
    cfg.ca_file = test::tls_file("ca.crt");
    cfg.client_cert_data.clear();
    cfg.client_key_data.clear();
    auto r = kube_client(cfg).get_lease(key);
    // TLS 1.3 rejects a missing client certificate after the client's side of
    // the handshake is done, so the client sees the connection close instead.
    CHECK_MESSAGE((r.kind() == error_kind::tls_error ||
                   r.kind() == error_kind::connection_refused), r.error.describe());
    CHECK(requests == 0);
  }
  SUBCASE("an invalid client key is a tls_error before any request") {
    cfg.ca_file = test::tls_file("ca.crt");
    cfg.client_key_data = "not a key";
    auto r = kube_client(cfg).get_lease(key);
    CHECK(r.kind() == error_kind::tls_error);
    CHECK(r.error.reason == "client key: invalid PEM");
  }
}
