// leasehold-apiserver: Kubernetes semantics, fault injection and stats over
// real HTTP on loopback; watch streams, PATCH, Table, selectors; the binary
// as a subprocess; kube_client's error classification; TLS. kubectl and the
// Python client: tests/clients/.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "cmd/leasehold-apiserver/listener.hpp"
#include "cmd/leasehold-apiserver/object_store.hpp"
#include "transport/kube/kube_client.hpp"
#include "tests/support/certificates.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

using nlohmann::json;
using namespace std::chrono_literals;
using leasehold::test::command_exists;
using leasehold::test::temp_dir;
namespace fs = std::filesystem;

namespace {

const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases";
const std::string json_type = "application/json";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

json fixture(const std::string& file) {
  std::ifstream in(env_or("LEASEHOLD_FIXTURES", "tests/fixtures/kubernetes") + "/" + file);
  REQUIRE(in.good());
  return json::parse(in);
}

json lease_body(const std::string& name, const std::string& rv = "", const std::string& holder = "a") {
  json j = {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}}},
            {"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15},
                      {"renewTime", "2024-01-01T00:00:00.000000Z"}, {"leaseTransitions", 0}}}};
  if (!rv.empty())
    j["metadata"]["resourceVersion"] = rv;
  return j;
}

std::string rv_of(const json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

unsigned long long rv_number(const json& object) {
  return std::stoull(rv_of(object));
}

/// A server on 127.0.0.1 with ephemeral ports, and clients for it.
struct fixture_server {
  leasehold::local_api_server server;

  explicit fixture_server(leasehold::api_server_options opts = {}) : server(std::move(opts)) {
    auto started = server.start();
    REQUIRE_MESSAGE(started.ok(), started.error);
    REQUIRE(started.port == server.port());
  }

  std::unique_ptr<httplib::Client> client(const std::string& user_agent = "apiserver-test",
                                          std::chrono::milliseconds read_timeout = 5000ms) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server.port());
    c->set_default_headers({{"User-Agent", user_agent}});
    c->set_connection_timeout(2s);
    c->set_read_timeout(read_timeout);
    c->set_tcp_nodelay(true);   // else Nagle + delayed ACK add 40 ms to each PUT
    return c;
  }

  json control(const json& body) {
    httplib::Client c("127.0.0.1", server.control_port());
    auto res = c.Post("/_leasehold/faults", body.dump(), json_type);
    REQUIRE(res);
    REQUIRE_MESSAGE(res->status == 200, res->body);
    return json::parse(res->body);
  }

  json stats() {
    httplib::Client c("127.0.0.1", server.control_port());
    auto res = c.Get("/_leasehold/stats");
    REQUIRE(res);
    return json::parse(res->body);
  }

  /// Waits (at most 5 s) until a request of `user_agent` is held by a hang fault.
  void wait_held(const std::string& user_agent) {
    auto until = std::chrono::steady_clock::now() + 5s;
    while (!stats()["held"].contains(user_agent) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
    REQUIRE(stats()["held"].contains(user_agent));
  }
};

json parse(const httplib::Result& res) {
  REQUIRE(res);
  return json::parse(res->body);
}

/// The Status body of a failed request, after checking code and reason.
json expect_status(const httplib::Result& res, int code, const std::string& reason) {
  REQUIRE(res);
  CHECK_MESSAGE(res->status == code, res->body);
  json s = json::parse(res->body);
  CHECK(s["kind"] == "Status");
  CHECK(s["apiVersion"] == "v1");
  CHECK(s["metadata"] == json::object());
  CHECK(s["status"] == "Failure");
  CHECK(s["reason"] == reason);
  CHECK(s["code"] == code);
  return s;
}

} // namespace

TEST_CASE("leases: create, get, list, update, delete with Kubernetes status codes") {
  fixture_server s;
  auto c = s.client();

  auto created = c->Post(leases, lease_body("l1").dump(), json_type);
  REQUIRE(created);
  CHECK(created->status == 201);
  json l1 = json::parse(created->body);
  CHECK(l1["kind"] == "Lease");
  CHECK(l1["metadata"]["namespace"] == "ns1");
  CHECK(l1["metadata"]["uid"].get<std::string>().size() == 36);
  CHECK(!l1["metadata"]["creationTimestamp"].get<std::string>().empty());
  CHECK(!rv_of(l1).empty());

  SUBCASE("GET returns what POST returned") {
    auto got = c->Get(leases + "/l1");
    REQUIRE(got);
    CHECK(got->status == 200);
    CHECK(json::parse(got->body) == l1);
  }
  SUBCASE("404, 409 AlreadyExists and 409 Conflict bodies are the real ones") {
    CHECK(c->Post(leases, lease_body("agent-1-lock").dump(), json_type)->status == 201);
    auto exists = c->Post(leases, lease_body("agent-1-lock").dump(), json_type);
    CHECK(parse(exists) == fixture("status-alreadyexists.json"));
    expect_status(exists, 409, "AlreadyExists");
    auto conflict = c->Put(leases + "/agent-1-lock", lease_body("agent-1-lock", "999999").dump(), json_type);
    CHECK(parse(conflict) == fixture("status-conflict.json"));
    expect_status(conflict, 409, "Conflict");
    CHECK(c->Delete(leases + "/agent-1-lock")->status == 200);
    auto missing = c->Get(leases + "/agent-1-lock");
    CHECK(parse(missing) == fixture("status-notfound.json"));
    expect_status(missing, 404, "NotFound");
    expect_status(c->Put(leases + "/agent-1-lock", lease_body("agent-1-lock", "1").dump(), json_type),
                  404, "NotFound");
    expect_status(c->Delete(leases + "/agent-1-lock"), 404, "NotFound");
  }
  SUBCASE("PUT with the current resourceVersion wins and bumps it") {
    auto put = c->Put(leases + "/l1", lease_body("l1", rv_of(l1), "b").dump(), json_type);
    REQUIRE(put);
    CHECK(put->status == 200);
    json updated = json::parse(put->body);
    CHECK(updated["spec"]["holderIdentity"] == "b");
    CHECK(updated["metadata"]["uid"] == l1["metadata"]["uid"]);
    CHECK(updated["metadata"]["creationTimestamp"] == l1["metadata"]["creationTimestamp"]);
    CHECK(rv_number(updated) > rv_number(l1));
    // The old version is now stale.
    expect_status(c->Put(leases + "/l1", lease_body("l1", rv_of(l1)).dump(), json_type), 409, "Conflict");
  }
  SUBCASE("PUT without resourceVersion is 422 Invalid") {
    auto s422 = expect_status(c->Put(leases + "/l1", lease_body("l1").dump(), json_type), 422, "Invalid");
    CHECK(s422["details"]["causes"][0]["field"] == "metadata.resourceVersion");
    CHECK(s422["message"].get<std::string>().find("must be specified for an update") != std::string::npos);
  }
  SUBCASE("name in the body differs from the URL: 400") {
    auto s400 = expect_status(c->Put(leases + "/l1", lease_body("other", rv_of(l1)).dump(), json_type),
                              400, "BadRequest");
    CHECK(s400["message"] == "the name of the object (other) does not match the name on the URL (l1)");
  }
  SUBCASE("malformed JSON: 400") {
    expect_status(c->Post(leases, "{\"metadata\":", json_type), 400, "BadRequest");
    expect_status(c->Put(leases + "/l1", "not json", json_type), 400, "BadRequest");
  }
  SUBCASE("invalid spec: 422 naming the field, with and without resourceVersion") {
    struct bad { const char* field; json value; };
    for (const bad& b : {bad{"leaseDurationSeconds", 0}, bad{"leaseDurationSeconds", -5},
                         bad{"leaseDurationSeconds", "15"}, bad{"leaseTransitions", -1},
                         bad{"leaseTransitions", 1.5}, bad{"holderIdentity", 7},
                         bad{"renewTime", "yesterday"}, bad{"acquireTime", "2024-13-01T00:00:00Z"}}) {
      CAPTURE(b.field);
      CAPTURE(b.value.dump());
      json body = lease_body("l1", rv_of(l1));
      body["spec"][b.field] = b.value;
      auto on_put = expect_status(c->Put(leases + "/l1", body.dump(), json_type), 422, "Invalid");
      CHECK(on_put["details"]["causes"][0]["field"] == std::string("spec.") + b.field);
      body["metadata"]["name"] = "new-one";
      body["metadata"].erase("resourceVersion");
      auto on_post = expect_status(c->Post(leases, body.dump(), json_type), 422, "Invalid");
      CHECK(on_post["message"].get<std::string>().find(std::string("spec.") + b.field) != std::string::npos);
    }
    CHECK(c->Get(leases + "/new-one")->status == 404);
    CHECK(json::parse(c->Get(leases + "/l1")->body) == l1);   // nothing changed
  }
  SUBCASE("unknown fields are kept at every level") {
    json body = lease_body("l2");
    body["futureField"] = {{"x", 1}};
    body["metadata"]["labels"] = {{"app", "demo"}};
    body["metadata"]["annotations"] = {{"note", "kept"}};
    body["spec"]["preferredHolder"] = "b";
    body["spec"]["someNewSpecField"] = {1, 2, 3};
    auto post = parse(c->Post(leases, body.dump(), json_type));
    auto got = parse(c->Get(leases + "/l2"));
    for (const json& j : {post, got}) {
      CHECK(j["futureField"] == body["futureField"]);
      CHECK(j["metadata"]["labels"] == body["metadata"]["labels"]);
      CHECK(j["metadata"]["annotations"] == body["metadata"]["annotations"]);
      CHECK(j["spec"]["someNewSpecField"] == body["spec"]["someNewSpecField"]);
      CHECK(j["spec"]["preferredHolder"] == "b");
    }
    json next = got;
    next["spec"]["another"] = "x";
    auto put = parse(c->Put(leases + "/l2", next.dump(), json_type));
    CHECK(put["spec"]["another"] == "x");
    CHECK(put["futureField"] == body["futureField"]);
  }
  SUBCASE("one monotonic resourceVersion across objects; lists carry it") {
    unsigned long long last = rv_number(l1);
    json current = l1;
    for (int i = 0; i < 5; ++i) {
      auto other = parse(c->Post(leases, lease_body("m" + std::to_string(i)).dump(), json_type));
      CHECK(rv_number(other) > last);
      last = rv_number(other);
      current = parse(c->Put(leases + "/l1", lease_body("l1", rv_of(current)).dump(), json_type));
      CHECK(rv_number(current) > last);
      last = rv_number(current);
    }
    auto list = parse(c->Get(leases));
    CHECK(list["kind"] == "LeaseList");
    CHECK(list["apiVersion"] == "coordination.k8s.io/v1");
    CHECK(std::stoull(list["metadata"]["resourceVersion"].get<std::string>()) == last);
    CHECK(list["items"].size() == 6);
    CHECK(list["items"][0]["metadata"]["name"] == "l1");
    CHECK(parse(c->Post("/apis/coordination.k8s.io/v1/namespaces/ns2/leases",
                        lease_body("other-ns").dump(), json_type))["metadata"]["namespace"] == "ns2");
    CHECK(parse(c->Get(leases))["items"].size() == 6);
    CHECK(parse(c->Get("/apis/coordination.k8s.io/v1/leases"))["items"].size() == 7);
  }
  SUBCASE("DELETE with a stale precondition is a conflict; then deletes") {
    json options = {{"preconditions", {{"resourceVersion", "1234567"}}}};
    expect_status(c->Delete(leases + "/l1", options.dump(), json_type), 409, "Conflict");
    auto deleted = parse(c->Delete(leases + "/l1"));
    CHECK(deleted["status"] == "Success");
    CHECK(c->Get(leases + "/l1")->status == 404);
  }
  SUBCASE("unknown paths and methods") {
    expect_status(c->Get("/apis/coordination.k8s.io/v1/namespaces/ns1/widgets"), 404, "NotFound");
    expect_status(c->Post(leases + "/l1", "{}", json_type), 405, "MethodNotAllowed");
  }
}

TEST_CASE("configmaps and events share the object store semantics") {
  fixture_server s;
  auto c = s.client();
  const std::string cms = "/api/v1/namespaces/ns1/configmaps";
  json cm = {{"metadata", {{"name", "lock"}}}, {"data", {{"k", "v"}}}};
  auto created = c->Post(cms, cm.dump(), json_type);
  REQUIRE(created);
  CHECK(created->status == 201);
  json stored = json::parse(created->body);
  CHECK(stored["kind"] == "ConfigMap");
  CHECK(stored["apiVersion"] == "v1");
  expect_status(c->Post(cms, cm.dump(), json_type), 409, "AlreadyExists");
  auto conflict = expect_status(c->Put(cms + "/lock", json{{"metadata", {{"name", "lock"}, {"resourceVersion", "77777"}}}}.dump(), json_type), 409, "Conflict");
  CHECK(conflict["message"] == "Operation cannot be fulfilled on configmaps \"lock\": the object has "
                               "been modified; please apply your changes to the latest version and try again");
  CHECK(conflict["details"] == json{{"name", "lock"}, {"kind", "configmaps"}});
  stored["data"]["k"] = "w";
  CHECK(c->Put(cms + "/lock", stored.dump(), json_type)->status == 200);
  expect_status(c->Get(cms + "/nope"), 404, "NotFound");
  expect_status(c->Post(cms, json{{"metadata", {{"name", "bad"}}}, {"data", {{"k", 1}}}}.dump(), json_type),
                422, "Invalid");

  const std::string events = "/api/v1/namespaces/ns1/events";
  json event = {{"metadata", {{"generateName", "l1."}}}, {"reason", "LeaderElection"},
                {"message", "a became leader"}, {"involvedObject", {{"kind", "Lease"}, {"name", "l1"}}}};
  auto e1 = parse(c->Post(events, event.dump(), json_type));
  auto e2 = parse(c->Post(events, event.dump(), json_type));
  std::string n1 = e1["metadata"]["name"], n2 = e2["metadata"]["name"];
  CHECK(n1.rfind("l1.", 0) == 0);
  CHECK(n1.size() == 3 + 5);
  CHECK(n1 != n2);
  auto list = parse(c->Get(events));
  CHECK(list["kind"] == "EventList");
  CHECK(list["items"].size() == 2);
  expect_status(c->Post(events, json{{"reason", "x"}}.dump(), json_type), 422, "Invalid");
}

TEST_CASE("events store keeps only the last 10,000") {
  leasehold::apiserver::object_store store;
  const auto* events = leasehold::apiserver::find_resource("", "v1", "events");
  REQUIRE(events != nullptr);
  for (int i = 0; i < 10'005; ++i)
    REQUIRE(store.create(*events, "ns", {{"metadata", {{"name", "e" + std::to_string(i)}}}}).code == 201);
  leasehold::apiserver::object_filter ns;
  ns.parse("ns", "", "");
  auto list = store.list(*events, ns, 0, "");
  CHECK(list.body["items"].size() == 10'000);
  CHECK(store.get(*events, "ns", "e4").code == 404);
  CHECK(store.get(*events, "ns", "e5").code == 200);
  CHECK(store.get(*events, "ns", "e10004").code == 200);
}

TEST_CASE("concurrent PUTs on one resourceVersion: exactly one wins, 1000 races") {
  fixture_server s;
  constexpr int racers = 3;
  constexpr int rounds = 1000;
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int i = 0; i < racers; ++i) {
    clients.push_back(s.client("racer-" + std::to_string(i)));
    clients.back()->set_keep_alive(true);
  }
  auto first = s.client()->Post(leases, lease_body("race").dump(), json_type);
  REQUIRE(first);
  std::string rv = rv_of(json::parse(first->body));
  int bad_rounds = 0;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> ready{0}, wins{0}, conflicts{0};
    std::string winner_rv;
    std::mutex winner_mutex;
    std::vector<std::thread> threads;
    for (int i = 0; i < racers; ++i)
      threads.emplace_back([&, i] {
        std::string body = lease_body("race", rv, "racer-" + std::to_string(i)).dump();
        ++ready;
        while (ready < racers)
          std::this_thread::yield();
        auto res = clients[static_cast<std::size_t>(i)]->Put(leases + "/race", body, json_type);
        if (res && res->status == 200) {
          ++wins;
          std::lock_guard<std::mutex> lock(winner_mutex);
          winner_rv = rv_of(json::parse(res->body));
        } else if (res && res->status == 409) {
          ++conflicts;
        }
      });
    for (auto& t : threads)
      t.join();
    if (wins != 1 || conflicts != racers - 1) {
      ++bad_rounds;
      auto now = s.client()->Get(leases + "/race");
      REQUIRE(now);
      winner_rv = rv_of(json::parse(now->body));
    }
    rv = winner_rv;
  }
  CHECK(bad_rounds == 0);
  auto stats = s.stats();
  CHECK(stats["total"]["by_code"]["200"] == rounds);
  CHECK(stats["total"]["by_code"]["409"] == rounds * (racers - 1));
}

TEST_CASE("fault: down refuses connections, recover serves again on the same port") {
  fixture_server s;
  auto c = s.client();
  REQUIRE(c->Post(leases, lease_body("l1").dump(), json_type)->status == 201);
  int port = s.server.port();

  auto kept_alive = s.client();
  kept_alive->set_keep_alive(true);
  REQUIRE(kept_alive->Get(leases + "/l1"));

  CHECK(s.control({{"mode", "down"}})["mode"] == "down");
  CHECK(!kept_alive->Get(leases + "/l1"));   // open connections are dropped too
  auto refused = s.client()->Get(leases + "/l1");
  CHECK(!refused);
  CHECK(refused.error() == httplib::Error::Connection);
  // The control port stays up and reports the state.
  httplib::Client control("127.0.0.1", s.server.control_port());
  CHECK(parse(control.Get("/_leasehold/faults"))["mode"] == "down");

  CHECK(s.control({{"mode", "recover"}})["mode"] == "none");
  CHECK(s.server.port() == port);
  auto served = s.client()->Get(leases + "/l1");
  REQUIRE(served);
  CHECK(served->status == 200);
  // Down and up again a few times: the port is reused every time.
  for (int i = 0; i < 3; ++i) {
    s.control({{"mode", "down"}});
    CHECK(!s.client()->Get(leases + "/l1"));
    s.control({{"mode", "recover"}});
    CHECK(s.client()->Get(leases + "/l1")->status == 200);
  }
  // An idle kept-alive connection does not hold up stop().
  REQUIRE(kept_alive->Get(leases + "/l1"));
  auto stop_started = std::chrono::steady_clock::now();
  s.server.stop();
  CHECK(std::chrono::steady_clock::now() - stop_started < leasehold::test::load_slack);   // not its keep-alive (5 s)
}

TEST_CASE("fault: hang times the client out, recover answers, stop() is not blocked") {
  fixture_server s;
  s.control({{"mode", "hang"}});
  auto started = std::chrono::steady_clock::now();
  auto hung = s.client("hung", 300ms)->Get(leases + "/l1");
  CHECK(!hung);
  CHECK(hung.error() == httplib::Error::Read);
  CHECK(std::chrono::steady_clock::now() - started >= 250ms);

  // A request hung while the fault is lifted gets its answer then.
  std::thread waiter([&] {
    auto res = s.client("waiter", 5000ms)->Get(leases + "/l1");
    CHECK(res);
    if (res)
      CHECK(res->status == 404);
  });
  s.wait_held("waiter");
  s.control({{"mode", "recover"}});
  waiter.join();
  CHECK(!s.stats()["held"].contains("waiter"));

  // stop() ends a hung request at once.
  s.control({{"mode", "hang"}});
  std::thread victim([&] { CHECK(!s.client("victim", 10000ms)->Get(leases + "/l1")); });
  s.wait_held("victim");
  auto stop_started = std::chrono::steady_clock::now();
  s.server.stop();
  CHECK(std::chrono::steady_clock::now() - stop_started < 3s);
  victim.join();
}

TEST_CASE("fault: latency delays answers") {
  // A latency longer than load_slack, so that a loaded machine cannot make
  // the answer without it look delayed.
  auto latency = leasehold::test::load_slack + 500ms;
  fixture_server s;
  s.control({{"latency_ms", latency.count()}});
  auto t0 = std::chrono::steady_clock::now();
  auto res = s.client("slow", latency + 5s)->Get(leases + "/l1");
  REQUIRE(res);
  CHECK(res->status == 404);
  CHECK(std::chrono::steady_clock::now() - t0 >= latency - 10ms);
  s.control({{"latency_ms", 0}});
  t0 = std::chrono::steady_clock::now();
  CHECK(s.client()->Get(leases + "/l1")->status == 404);
  CHECK(std::chrono::steady_clock::now() - t0 < latency);
}

TEST_CASE("fault: error statuses with Status bodies and Retry-After") {
  fixture_server s;
  auto c = s.client();
  for (int code : {500, 503, 429}) {
    CAPTURE(code);
    json fault = {{"mode", "error"}, {"status", code}};
    if (code == 429)
      fault["retry_after"] = 7;
    s.control(fault);
    auto res = c->Get(leases + "/l1");
    expect_status(res, code, code == 500 ? "InternalError" : code == 503 ? "ServiceUnavailable" : "TooManyRequests");
    CHECK(res->get_header_value("Retry-After") == (code == 429 ? "7" : ""));
  }
  // Faults never apply to the control endpoints, even on the main port.
  auto faults = c->Get("/_leasehold/faults");
  REQUIRE(faults);
  CHECK(faults->status == 200);
  CHECK(json::parse(faults->body)["status"] == 429);
  s.control({{"mode", "recover"}});
  CHECK(c->Get(leases + "/l1")->status == 404);
}

TEST_CASE("fault: partition drops only the matching client") {
  fixture_server s;
  auto victim = s.client("leasehold/0.1 agent-b");
  auto bystander = s.client("leasehold/0.1 agent-a");
  REQUIRE(bystander->Post(leases, lease_body("l1").dump(), json_type)->status == 201);

  s.control({{"partition", {{"user_agent", "agent-b"}}}});
  auto dropped = victim->Get(leases + "/l1");
  CHECK(!dropped);
  CHECK(dropped.error() == httplib::Error::Read);
  CHECK(bystander->Get(leases + "/l1")->status == 200);

  s.control({{"partition", {{"identity", "agent-a"}}}});
  httplib::Headers as_a = {{"X-Leasehold-Identity", "agent-a"}};
  CHECK(!bystander->Get(leases + "/l1", as_a));
  CHECK(victim->Get(leases + "/l1")->status == 200);

  s.control({{"partition", {{"user_agent", "agent-b"}, {"action", "hang"}}}});
  CHECK(!s.client("agent-b", 300ms)->Get(leases + "/l1"));
  CHECK(bystander->Get(leases + "/l1")->status == 200);

  s.control({{"partition", nullptr}});
  CHECK(victim->Get(leases + "/l1")->status == 200);
  auto stats = s.stats();
  CHECK(stats["by_user_agent"]["leasehold/0.1 agent-b"]["by_code"]["none"] == 1);
  CHECK(stats["by_identity"]["agent-a"]["by_code"]["none"] == 1);

  // Bad control requests are rejected and change nothing.
  httplib::Client control("127.0.0.1", s.server.control_port());
  CHECK(control.Post("/_leasehold/faults", R"({"mode":"sideways"})", json_type)->status == 400);
  CHECK(control.Post("/_leasehold/faults", R"({"partition":{}})", json_type)->status == 400);
  CHECK(control.Post("/_leasehold/faults", "{", json_type)->status == 400);
  CHECK(parse(control.Get("/_leasehold/faults"))["mode"] == "none");
}

TEST_CASE("fault: wipe forgets every object, resourceVersion stays monotonic") {
  fixture_server s;
  auto c = s.client();
  auto before = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  s.control({{"wipe", true}});
  expect_status(c->Get(leases + "/l1"), 404, "NotFound");
  CHECK(parse(c->Get(leases))["items"].empty());
  auto after = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  CHECK(rv_number(after) > rv_number(before));
}

TEST_CASE("stats count per verb, client, identity and status code, the request rate and latency; reset") {
  fixture_server s;
  auto a = s.client("client-a");
  auto b = s.client("client-b");
  httplib::Headers id = {{"X-Leasehold-Identity", "replica-1"}};
  a->Post(leases, lease_body("l1").dump(), json_type);
  a->Get(leases + "/l1", id);
  a->Get(leases + "/l1", id);
  b->Get(leases + "/missing");
  b->Get(leases);
  auto stats = s.stats();
  CHECK(stats["total"]["requests"] == 5);
  CHECK(stats["total"]["by_verb"] == json{{"create", 1}, {"get", 3}, {"list", 1}});
  CHECK(stats["total"]["by_code"] == json{{"200", 3}, {"201", 1}, {"404", 1}});
  CHECK(stats["by_user_agent"]["client-a"]["by_verb"] == json{{"create", 1}, {"get", 2}});
  CHECK(stats["by_user_agent"]["client-b"]["by_code"] == json{{"200", 1}, {"404", 1}});
  CHECK(stats["by_identity"]["replica-1"]["requests"] == 2);
  CHECK(stats["requests_per_s"].get<double>() > 0);
  CHECK(stats["latency"]["requests"] == 5);
  CHECK(stats["latency"]["max_ms"].get<double>() >= stats["latency"]["mean_ms"].get<double>());
  CHECK(stats["latency"]["mean_ms"].get<double>() > 0);

  httplib::Client control("127.0.0.1", s.server.control_port());
  CHECK(control.Post("/_leasehold/stats/reset", "", json_type)->status == 200);
  CHECK(s.stats()["total"]["requests"] == 0);
}

TEST_CASE("discovery documents for kubectl") {
  fixture_server s;
  auto c = s.client();
  CHECK(parse(c->Get("/version"))["major"] == "1");
  CHECK(parse(c->Get("/api"))["versions"] == json{"v1"});
  auto groups = parse(c->Get("/apis"));
  CHECK(groups["kind"] == "APIGroupList");
  CHECK(groups["groups"].size() == 1);
  CHECK(groups["groups"][0]["preferredVersion"]["groupVersion"] == "coordination.k8s.io/v1");
  CHECK(groups["groups"][0]["versions"].size() == 2);
  CHECK(groups["groups"][0]["versions"][1]["groupVersion"] == "coordination.k8s.io/v1beta1");
  auto beta = parse(c->Get("/apis/coordination.k8s.io/v1beta1"));
  REQUIRE(beta["resources"].size() == 1);
  CHECK(beta["resources"][0]["name"] == "leasecandidates");
  CHECK(beta["resources"][0]["kind"] == "LeaseCandidate");
  auto resources = parse(c->Get("/apis/coordination.k8s.io/v1"));
  CHECK(resources["kind"] == "APIResourceList");
  CHECK(resources["resources"][0]["name"] == "leases");
  CHECK(resources["resources"][0]["namespaced"] == true);
  CHECK(resources["resources"][0]["kind"] == "Lease");
  CHECK(resources["resources"][0].count("shortNames") == 0);
  auto core = parse(c->Get("/api/v1"));
  CHECK(core["resources"].size() == 2);
}

/// leasehold-apiserver as a child: stdout read up to its first line (the
/// JSON hello), stderr to `err_fd` (or /dev/null when -1).
struct apiserver_child {
  pid_t pid = -1;
  std::string first_line;
  json hello;
};

apiserver_child spawn_apiserver(const std::vector<std::string>& args, int err_fd) {
  std::string binary = env_or("LEASEHOLD_BUILD_ROOT", "build") + "/cmd/leasehold-apiserver/leasehold-apiserver";
  REQUIRE_MESSAGE(access(binary.c_str(), X_OK) == 0, binary);
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  REQUIRE(pipe(out) == 0);
  apiserver_child child;
  child.pid = fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    dup2(err_fd >= 0 ? err_fd : ::open("/dev/null", O_WRONLY), 2);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string& line = child.first_line;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline;) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0)
      continue;
    char buf[256];
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0)
      break;
    line.append(buf, static_cast<std::size_t>(n));
  }
  close(out[0]);
  child.hello = json::parse(line.substr(0, line.find('\n')), nullptr, false);
  return child;
}

/// SIGTERM, then up to 5 s for the exit (SIGKILL after); the wait status, or
/// nullopt when it had to be killed.
std::optional<int> stop_apiserver(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0)
      std::this_thread::sleep_for(50ms);
  }
  if (done == pid)
    return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

TEST_CASE("the leasehold-apiserver binary: startup line, a request, exit 0 on SIGTERM") {
  auto child = spawn_apiserver({"--port", "0"}, -1);
  pid_t pid = child.pid;
  const json& hello = child.hello;
  bool started = !hello.is_discarded() && hello.contains("port");
  if (started) {
    CHECK(hello["pid"] == pid);
    CHECK(hello["tls"] == false);
    CHECK(hello["control_port"].get<int>() > 0);
    httplib::Client c("127.0.0.1", hello["port"].get<int>());
    auto res = c.Post(leases, lease_body("from-test").dump(), json_type);
    CHECK(res);
    if (res)
      CHECK(res->status == 201);
    httplib::Client control("127.0.0.1", hello["control_port"].get<int>());
    auto stats = control.Get("/_leasehold/stats");
    CHECK(stats);
  }
  CHECK_MESSAGE(started, "first stdout line: " << child.first_line);
  auto status = stop_apiserver(pid);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("snapshot: objects and resourceVersion survive a restart") {
  temp_dir dir;
  leasehold::api_server_options opts;
  opts.snapshot_file = (dir / "state.json").string();
  json saved;
  {
    fixture_server s(opts);
    saved = parse(s.client()->Post(leases, lease_body("kept").dump(), json_type));
  }
  CHECK(fs::exists(opts.snapshot_file));
  CHECK(!fs::exists(opts.snapshot_file + ".tmp"));
  fixture_server s(opts);
  auto c = s.client();
  CHECK(parse(c->Get(leases + "/kept")) == saved);
  auto next = parse(c->Post(leases, lease_body("next").dump(), json_type));
  CHECK(rv_number(next) > rv_number(saved));

  std::ofstream(dir / "corrupt.json") << "{not json";
  leasehold::api_server_options bad;
  bad.snapshot_file = (dir / "corrupt.json").string();
  leasehold::local_api_server broken(bad);
  CHECK(!broken.start().ok());
}

/// A port that was free a moment ago (bound to 0, then closed).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Regression: the snapshot writer took its baseline when its thread started,
// after the listeners, so a write that landed in between was never saved.
// A client hammers the port while start() runs, so its POST lands as early
// as the listener allows; the server stops at once; the restart must see it.
TEST_CASE("snapshot: a write right after start is saved by an immediate stop") {
  temp_dir dir;
  constexpr int rounds = 60;
  int lost = 0;
  for (int round = 0; round < rounds; ++round) {
    leasehold::api_server_options opts;
    opts.snapshot_file = (dir / ("early-" + std::to_string(round) + ".json")).string();
    opts.snapshot_interval = 10000ms;   // only the final write at stop() can save it
    opts.port = free_port();
    opts.control_listener = false;
    std::atomic<int> status{0};
    std::thread writer([&] {
      httplib::Client c("127.0.0.1", opts.port);
      c.set_connection_timeout(200ms);
      c.set_read_timeout(2s);
      auto give_up = std::chrono::steady_clock::now() + 3s;
      while (std::chrono::steady_clock::now() < give_up) {
        if (auto res = c.Post(leases, lease_body("early").dump(), json_type)) {
          status = res->status;
          return;
        }
        std::this_thread::sleep_for(50us);
      }
    });
    {
      leasehold::local_api_server server(opts);
      auto started = server.start();
      writer.join();
      REQUIRE_MESSAGE(started.ok(), started.error);
      REQUIRE(status.load() == 201);
      server.stop();
    }
    leasehold::local_api_server again(opts);
    REQUIRE(again.start().ok());
    httplib::Client c("127.0.0.1", again.port());
    auto res = c.Get(leases + "/early");
    REQUIRE(res);
    if (res->status != 200)
      ++lost;
  }
  CHECK_MESSAGE(lost == 0, lost << " of " << rounds << " early writes lost");
}

TEST_CASE("kube_client classifies every fault") {
  using leasehold::error_kind;
  fixture_server s;
  auto client = [&](std::chrono::milliseconds read_timeout = 2000ms) {
    leasehold::connection_config cfg;
    cfg.server = "http://127.0.0.1:" + std::to_string(s.server.port());
    cfg.connect_timeout = 1000ms;
    cfg.read_timeout = read_timeout;
    return std::make_unique<leasehold::kube_client>(cfg);
  };
  leasehold::lease l;
  l.ns = "ns1";
  l.name = "kc";
  l.spec.holder_identity = "a";
  l.spec.lease_duration_seconds = 15;
  auto created = client()->create_lease(l);
  REQUIRE_MESSAGE(created.ok(), created.error.describe());
  CHECK(client()->create_lease(l).kind() == error_kind::already_exists);
  CHECK(client()->get_lease({"ns1", "missing"}).kind() == error_kind::not_found);
  leasehold::lease stale = *created.value;
  stale.resource_version = "1234567";
  CHECK(client()->update_lease(stale).kind() == error_kind::conflict);

  s.control({{"mode", "error"}, {"status", 503}});
  CHECK(client()->get_lease(l.key()).kind() == error_kind::server_error);
  s.control({{"mode", "error"}, {"status", 429}, {"retry_after", 3}});
  auto throttled = client()->get_lease(l.key());
  CHECK(throttled.kind() == error_kind::throttled);
  CHECK(throttled.error.retry_after_seconds == 3);
  s.control({{"mode", "hang"}});
  CHECK(client(300ms)->get_lease(l.key()).kind() == error_kind::timeout);
  s.control({{"mode", "down"}});
  CHECK(client()->get_lease(l.key()).kind() == error_kind::connection_refused);
  s.control({{"mode", "recover"}});
  CHECK(client()->get_lease(l.key()).ok());
}

TEST_CASE("TLS: kube_client trusts the server with the CA, fails without it") {
  // openssl is a dependency scripts/setup installs: missing, the test fails
  // (a silent skip would count as a pass).
  REQUIRE_MESSAGE(command_exists("openssl"), "the openssl command is not installed (scripts/setup installs it)");
  temp_dir dir;
  auto p = [&](const char* f) { return (dir / f).string(); };
  auto certificates = leasehold::test::make_test_certificates(dir);
  REQUIRE_MESSAGE(certificates.empty(), certificates);
  leasehold::api_server_options opts;
  opts.tls_cert_file = p("server.crt");
  opts.tls_key_file = p("server.key");
  fixture_server s(opts);
  CHECK(s.server.tls());

  leasehold::connection_config cfg;
  cfg.server = "https://127.0.0.1:" + std::to_string(s.server.port());
  cfg.connect_timeout = 2000ms;
  cfg.read_timeout = 2000ms;
  cfg.ca_file = p("ca.crt");
  CHECK(leasehold::kube_client(cfg).get_lease({"ns1", "missing"}).kind() == leasehold::error_kind::not_found);
  cfg.ca_file.clear();
  auto untrusted = leasehold::kube_client(cfg).get_lease({"ns1", "missing"});
  CHECK_MESSAGE(untrusted.kind() == leasehold::error_kind::tls_error, untrusted.error.describe());
  // The control port stays plain HTTP.
  CHECK(s.control({{"mode", "recover"}})["mode"] == "none");
}

// ---- watch, PATCH, Table, selectors: what kubectl and client libraries use ----

namespace {

/// A watch stream read on its own thread, line by line.
struct watch_reader {
  httplib::Client client;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  bool opened = false;   // the response's headers arrived: the stream is served
  bool ended = false;
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  std::thread thread;

  watch_reader(int port, const std::string& path, std::chrono::milliseconds read_timeout = 5000ms)
      : client("127.0.0.1", port) {
    client.set_read_timeout(read_timeout);
    thread = std::thread([this, path] {
      std::string buffer;
      auto res = client.Get(
        path.c_str(),
        [&](const httplib::Response&) {
          std::lock_guard<std::mutex> lock(mu);
          opened = true;
          cv.notify_all();
          return true;
        },
        [&](const char* data, std::size_t n) {
        buffer.append(data, n);
        std::lock_guard<std::mutex> lock(mu);
        for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
          lines.push_back(buffer.substr(0, nl));
          buffer.erase(0, nl + 1);
        }
        cv.notify_all();
        return true;
      });
      std::lock_guard<std::mutex> lock(mu);
      ended = true;
      error = res.error();
      status = res ? res->status : 0;
      cv.notify_all();
    });
  }
  ~watch_reader() {
    client.stop();
    thread.join();
  }

  /// The first `n` lines as JSON (a line that is not JSON becomes a string),
  /// waiting up to `timeout`; fewer if the stream ended or time ran out.
  std::vector<json> events(std::size_t n, std::chrono::milliseconds timeout = 3000ms) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] { return lines.size() >= n || ended; });
    std::vector<json> out;
    for (std::size_t i = 0; i < std::min(n, lines.size()); ++i) {
      json j = json::parse(lines[i], nullptr, false);
      out.push_back(j.is_discarded() ? json(lines[i]) : j);
    }
    return out;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return lines.size();
  }
  bool wait_end(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return ended; });
  }
  /// Waits until the server answered with the stream's headers (or it ended).
  bool wait_open(std::chrono::milliseconds timeout = 1000ms + leasehold::test::load_slack) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return opened || ended; }) && opened;
  }
};

std::vector<std::string> types_of(const std::vector<json>& events) {
  std::vector<std::string> types;
  for (auto& e : events)
    types.push_back(e.is_object() ? e["type"].get<std::string>() : "<" + e.dump() + ">");
  return types;
}

using strings = std::vector<std::string>;

} // namespace

TEST_CASE("watch: ADDED, MODIFIED, DELETED in order with their resourceVersions; resume; timeoutSeconds") {
  fixture_server s;
  auto c = s.client();
  auto l1 = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  // No resourceVersion: the current objects as ADDED first, as the real API.
  watch_reader from_now(s.server.port(), leases + "?watch=true&timeoutSeconds=5");
  auto first = from_now.events(1);
  REQUIRE(first.size() == 1);
  CHECK(first[0] == json{{"type", "ADDED"}, {"object", l1}});
  // From l1's resourceVersion: only what follows.
  watch_reader resumed(s.server.port(), leases + "?watch=1&resourceVersion=" + rv_of(l1) + "&timeoutSeconds=5");
  auto l1b = parse(c->Put(leases + "/l1", lease_body("l1", rv_of(l1), "b").dump(), json_type));
  auto l2 = parse(c->Post(leases, lease_body("l2").dump(), json_type));
  auto deleted = parse(c->Delete(leases + "/l1"));
  CHECK(deleted["status"] == "Success");
  auto events = resumed.events(3);
  REQUIRE(types_of(events) == strings{"MODIFIED", "ADDED", "DELETED"});
  CHECK(events[0]["object"] == l1b);
  CHECK(events[1]["object"] == l2);
  CHECK(events[2]["object"]["metadata"]["name"] == "l1");
  CHECK(rv_number(events[2]["object"]) > rv_number(l2));   // the deletion's own resourceVersion
  CHECK(types_of(from_now.events(4)) == strings{"ADDED", "MODIFIED", "ADDED", "DELETED"});
  // Resuming from the MODIFIED event's version replays the rest, in order.
  watch_reader replay(s.server.port(), leases + "?watch=1&resourceVersion=" + rv_of(l1b) + "&timeoutSeconds=1");
  CHECK(types_of(replay.events(2)) == strings{"ADDED", "DELETED"});
  // timeoutSeconds ends the stream cleanly (a complete chunked response).
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(replay.wait_end(1000ms + 2 * leasehold::test::load_slack));
  CHECK(std::chrono::steady_clock::now() - t0 < 1000ms + leasehold::test::load_slack);   // its timeoutSeconds
  CHECK(replay.error == httplib::Error::Success);
  CHECK(replay.status == 200);
  CHECK(replay.count() == 2);
  // Bad parameters are 400, and watches are counted as their own verb.
  expect_status(c->Get(leases + "?watch=maybe"), 400, "BadRequest");
  expect_status(c->Get(leases + "?watch=1&resourceVersion=abc"), 400, "BadRequest");
  CHECK(s.stats()["total"]["by_verb"]["watch"] == 4);   // 3 streams and the bad resourceVersion
}

TEST_CASE("watch: fieldSelector and labelSelector, with selector transitions") {
  // The watches start from the empty store's list version, before or after
  // the changes: either way they see every change. (A fresh store listed
  // version "0", which a watch reads as "any state": a watch that connected
  // after the changes got the current objects instead; under load the
  // watches here sometimes connected late and failed that way.)
  bool watch_first = true;
  SUBCASE("watches open before the changes") { watch_first = true; }
  SUBCASE("watches open after the changes") { watch_first = false; }
  fixture_server s;
  auto c = s.client();
  std::string from = "&resourceVersion=" + parse(c->Get(leases))["metadata"]["resourceVersion"].get<std::string>();
  std::unique_ptr<watch_reader> by_name, by_label;
  auto open_watches = [&] {
    by_name = std::make_unique<watch_reader>(
      s.server.port(), leases + "?watch=1&fieldSelector=metadata.name%3Dwanted&timeoutSeconds=5" + from);
    by_label = std::make_unique<watch_reader>(
      s.server.port(),
      "/apis/coordination.k8s.io/v1/leases?watch=1&labelSelector=team%3Dx&timeoutSeconds=5" + from);
  };
  if (watch_first)
    open_watches();
  parse(c->Post(leases, lease_body("other").dump(), json_type));
  auto wanted = parse(c->Post(leases, lease_body("wanted").dump(), json_type));
  json labelled = wanted;
  labelled["metadata"]["labels"] = {{"team", "x"}};
  labelled = parse(c->Put(leases + "/wanted", labelled.dump(), json_type));
  json unlabelled = labelled;
  unlabelled["metadata"]["labels"] = {{"team", "y"}};
  parse(c->Put(leases + "/wanted", unlabelled.dump(), json_type));
  if (!watch_first)
    open_watches();
  auto named = by_name->events(3);
  CHECK(types_of(named) == strings{"ADDED", "MODIFIED", "MODIFIED"});
  for (auto& e : named)
    CHECK(e["object"]["metadata"]["name"] == "wanted");
  // Entering the selector is ADDED, leaving it DELETED, as the real API.
  auto labels = by_label->events(2);
  REQUIRE(types_of(labels) == strings{"ADDED", "DELETED"});
  CHECK(labels[0]["object"] == labelled);
  // Nothing else on either stream: a last change both see comes right after
  // the expected events (a stream is in order).
  json relabelled = parse(c->Get(leases + "/wanted"));
  relabelled["metadata"]["labels"] = {{"team", "x"}};
  relabelled = parse(c->Put(leases + "/wanted", relabelled.dump(), json_type));
  auto named_then = by_name->events(4);
  REQUIRE(named_then.size() == 4);
  CHECK(named_then[3]["object"] == relabelled);
  auto labels_then = by_label->events(3);
  REQUIRE(labels_then.size() == 3);
  CHECK(labels_then[2]["type"] == "ADDED");
  CHECK(labels_then[2]["object"] == relabelled);
}

TEST_CASE("watch: a resourceVersion older than the kept history is 410 Expired; bookmarks") {
  leasehold::api_server_options opts;
  opts.watch_history = 5;
  fixture_server s(opts);
  auto c = s.client();
  auto lease = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  std::string old_rv = rv_of(lease);
  for (int i = 0; i < 6; ++i)
    lease = parse(c->Put(leases + "/l1", lease_body("l1", rv_of(lease)).dump(), json_type));
  watch_reader expired(s.server.port(), leases + "?watch=1&resourceVersion=" + old_rv);
  auto events = expired.events(1);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "ERROR");
  CHECK(events[0]["object"]["kind"] == "Status");
  CHECK(events[0]["object"]["code"] == 410);
  CHECK(events[0]["object"]["reason"] == "Expired");
  CHECK(events[0]["object"]["message"].get<std::string>().rfind("too old resource version: " + old_rv, 0) == 0);
  REQUIRE(expired.wait_end(2000ms));   // then the stream ends
  CHECK(expired.error == httplib::Error::Success);

  s.control({{"watch", {{"bookmark_ms", 100}}}});
  watch_reader marked(s.server.port(), leases + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv_of(lease) + "&timeoutSeconds=5");
  auto marks = marked.events(2);
  REQUIRE(types_of(marks) == strings{"BOOKMARK", "BOOKMARK"});
  CHECK(marks[0]["object"] == json{{"kind", "Lease"}, {"apiVersion", "coordination.k8s.io/v1"},
                                   {"metadata", {{"resourceVersion", rv_of(lease)}}}});
  parse(c->Post("/api/v1/namespaces/ns1/configmaps", json{{"metadata", {{"name", "cm"}}}}.dump(), json_type));
  // A bookmark after an unrelated change carries the newer version (within
  // 20 bookmarks, 2 s), and versions never go back.
  auto later = marked.events(20);
  bool newer = false;
  for (std::size_t i = 0; i < later.size(); ++i) {
    CHECK(later[i]["type"] == "BOOKMARK");
    CHECK((i == 0 || rv_number(later[i]["object"]) >= rv_number(later[i - 1]["object"])));
    newer = newer || rv_number(later[i]["object"]) == rv_number(lease) + 1;
  }
  CHECK(newer);
  // Without allowWatchBookmarks: none.
  watch_reader plain(s.server.port(), leases + "?watch=1&resourceVersion=" + rv_of(lease) + "&timeoutSeconds=1");
  REQUIRE(plain.wait_end(3000ms));
  CHECK(plain.count() == 0);
}

TEST_CASE("watch faults: close after N ms (end or reset), hang, malformed line, ERROR event") {
  fixture_server s;
  auto c = s.client();
  auto lease = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  const std::string from = leases + "?watch=1&resourceVersion=" + rv_of(lease);
  auto renew = [&] { lease = parse(c->Put(leases + "/l1", lease_body("l1", rv_of(lease)).dump(), json_type)); };

  SUBCASE("close_after_ms ends every stream cleanly") {
    s.control({{"watch", {{"close_after_ms", 300}}}});
    auto t0 = std::chrono::steady_clock::now();
    watch_reader w(s.server.port(), from);
    REQUIRE(w.wait_end(300ms + 2 * leasehold::test::load_slack));
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 250ms);
    CHECK(took < 300ms + leasehold::test::load_slack);
    CHECK(w.error == httplib::Error::Success);
  }
  SUBCASE("close reset drops the connection mid-stream") {
    s.control({{"watch", {{"close_after_ms", 300}, {"close", "reset"}}}});
    watch_reader w(s.server.port(), from);
    REQUIRE(w.wait_end(3000ms));
    CHECK(w.error != httplib::Error::Success);
  }
  SUBCASE("hang holds events back; lifting it delivers them") {
    watch_reader w(s.server.port(), from + "&allowWatchBookmarks=1");
    REQUIRE(w.wait_open());
    s.control({{"watch", {{"hang", true}, {"bookmark_ms", 50}}}});
    renew();
    std::this_thread::sleep_for(300ms);
    CHECK(w.count() == 0);
    CHECK(!w.wait_end(10ms));
    s.control({{"watch", {{"hang", false}}}});
    auto events = w.events(1);
    REQUIRE(events.size() == 1);
    CHECK(events[0]["type"] == "MODIFIED");
    CHECK(events[0]["object"] == lease);
  }
  SUBCASE("malformed_lines puts one bad line before the next event") {
    watch_reader w(s.server.port(), from + "&timeoutSeconds=5");
    REQUIRE(w.wait_open());
    s.control({{"watch", {{"malformed_lines", 1}}}});
    renew();
    renew();
    auto events = w.events(3);
    REQUIRE(events.size() == 3);
    CHECK(events[0].is_string());
    CHECK(events[1]["type"] == "MODIFIED");
    CHECK(events[2]["type"] == "MODIFIED");
    CHECK(s.control(json::object())["watch"]["malformed_lines"] == 0);
  }
  SUBCASE("error_events sends an ERROR Status, then ends that stream only") {
    watch_reader w(s.server.port(), from + "&timeoutSeconds=5");
    REQUIRE(w.wait_open());
    s.control({{"watch", {{"error_events", 1}, {"error_status", 500}}}});
    auto events = w.events(1);
    REQUIRE(events.size() == 1);
    CHECK(events[0]["type"] == "ERROR");
    CHECK(events[0]["object"]["code"] == 500);
    CHECK(events[0]["object"]["reason"] == "InternalError");
    REQUIRE(w.wait_end(2000ms));
    watch_reader next(s.server.port(), from + "&timeoutSeconds=5");
    renew();
    CHECK(types_of(next.events(1)) == strings{"MODIFIED"});
  }
  SUBCASE("bad watch fault fields are rejected; recover clears them") {
    httplib::Client control("127.0.0.1", s.server.control_port());
    CHECK(control.Post("/_leasehold/faults", R"({"watch":{"close":"later"}})", json_type)->status == 400);
    CHECK(control.Post("/_leasehold/faults", R"({"watch":{"nope":1}})", json_type)->status == 400);
    CHECK(control.Post("/_leasehold/faults", R"({"watch":{"close_after_ms":-1}})", json_type)->status == 400);
    s.control({{"watch", {{"hang", true}}}});
    CHECK(s.control({{"mode", "recover"}})["watch"]["hang"] == false);
  }
  // stop() ends open streams at once.
  watch_reader open(s.server.port(), from);
  REQUIRE(open.wait_open());
  auto t0 = std::chrono::steady_clock::now();
  s.server.stop();
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("watch: streams beyond worker_threads - 16 get 429, requests still served") {
  leasehold::api_server_options opts;
  opts.worker_threads = 20;
  fixture_server s(opts);
  std::vector<std::unique_ptr<watch_reader>> open;
  for (int i = 0; i < 4; ++i)
    open.push_back(std::make_unique<watch_reader>(s.server.port(), leases + "?watch=1&timeoutSeconds=5"));
  for (int i = 0; i < 200 && s.stats()["total"]["by_verb"].value("watch", 0) < 4; ++i)
    std::this_thread::sleep_for(10ms);
  auto refused = s.client()->Get(leases + "?watch=1&timeoutSeconds=5");
  expect_status(refused, 429, "TooManyRequests");
  CHECK(refused->get_header_value("Retry-After") == "1");
  CHECK(s.client()->Get(leases)->status == 200);
}

TEST_CASE("watch: 200 open streams, past the old fixed limit of 144, are all served") {
  // Regression: the main listener had a fixed pool of 160 threads and
  // refused watches beyond 144 with 429, so clients fell back to polling.
  fixture_server s;
  std::vector<std::unique_ptr<watch_reader>> open;
  for (int i = 0; i < 200; ++i)
    open.push_back(std::make_unique<watch_reader>(s.server.port(), leases + "?watch=1&timeoutSeconds=40",
                                                  30000ms));
  for (int i = 0; i < 2000 && s.stats()["total"]["by_verb"].value("watch", 0) < 200; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(s.stats()["total"]["by_verb"].value("watch", 0) == 200);
  CHECK(s.client()->Post(leases, lease_body("seen-by-all").dump(), json_type)->status == 201);
  int saw = 0;
  for (auto& w : open) {
    auto ev = w->events(1, 10000ms);
    saw += !ev.empty() && ev[0].is_object() && ev[0].value("type", "") == "ADDED"
           && ev[0]["object"]["metadata"]["name"] == "seen-by-all";
  }
  CHECK(saw == 200);
  CHECK(s.stats()["total"]["by_code"].value("429", 0) == 0);
  CHECK(s.client()->Get(leases)->status == 200);
}

TEST_CASE("elastic_pool: threads start on demand up to the limit, then jobs wait; idle ones end") {
  leasehold::apiserver::elastic_pool pool(3, 1, 100ms);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> started{0}, done{0};
  auto job = [&] {
    ++started;
    std::unique_lock<std::mutex> g(mu);
    cv.wait_for(g, 5s, [&] { return release; });   // bounded
    ++done;
  };
  for (int i = 0; i < 4; ++i)
    pool.enqueue(job);
  for (int i = 0; i < 200 && started < 3; ++i)
    std::this_thread::sleep_for(10ms);
  // Three jobs hold the three threads: the fourth is queued, no thread for it.
  CHECK(started == 3);
  CHECK(pool.queued() == 1);
  CHECK(pool.threads() == 3);
  CHECK(pool.busy() == 3);
  {
    std::lock_guard<std::mutex> g(mu);
    release = true;
  }
  cv.notify_all();
  for (int i = 0; i < 300 && (done < 4 || pool.threads() > 1); ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(done == 4);
  CHECK(pool.threads() == 1);   // two ended after 100 ms idle, one is kept
  pool.enqueue(job);            // runs on the kept one (or a new one)
  for (int i = 0; i < 300 && done < 5; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(done == 5);
  pool.shutdown();
  CHECK(pool.threads() == 0);
}

TEST_CASE("PATCH: merge, JSON and strategic merge patches; conflicts; bad patches") {
  fixture_server s;
  auto c = s.client();
  auto lease = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  auto merge = c->Patch(leases + "/l1", R"({"spec":{"holderIdentity":"m","leaseTransitions":null},"metadata":{"labels":{"a":"1"}}})",
                        "application/merge-patch+json");
  REQUIRE(merge);
  CHECK(merge->status == 200);
  auto merged = json::parse(merge->body);
  CHECK(merged["spec"]["holderIdentity"] == "m");
  CHECK(!merged["spec"].contains("leaseTransitions"));
  CHECK(merged["spec"]["leaseDurationSeconds"] == 15);
  CHECK(merged["metadata"]["labels"] == json{{"a", "1"}});
  CHECK(merged["metadata"]["uid"] == lease["metadata"]["uid"]);
  CHECK(rv_number(merged) > rv_number(lease));

  auto jp = parse(c->Patch(leases + "/l1", R"([{"op":"test","path":"/spec/holderIdentity","value":"m"},
                                               {"op":"replace","path":"/spec/holderIdentity","value":"j"}])",
                           "application/json-patch+json"));
  CHECK(jp["spec"]["holderIdentity"] == "j");
  auto sp = parse(c->Patch(leases + "/l1", R"({"metadata":{"annotations":{"n":"v"}},"spec":{"holderIdentity":"s"}})",
                           "application/strategic-merge-patch+json"));
  CHECK(sp["spec"]["holderIdentity"] == "s");
  CHECK(sp["metadata"]["labels"] == json{{"a", "1"}});
  CHECK(sp["metadata"]["annotations"] == json{{"n", "v"}});
  CHECK(parse(c->Get(leases + "/l1")) == sp);

  // A resourceVersion in the patch is a precondition, as the real API.
  json stale = {{"metadata", {{"resourceVersion", rv_of(lease)}}}, {"spec", {{"holderIdentity", "x"}}}};
  expect_status(c->Patch(leases + "/l1", stale.dump(), "application/merge-patch+json"), 409, "Conflict");
  json current = {{"metadata", {{"resourceVersion", rv_of(sp)}}}, {"spec", {{"holderIdentity", "x"}}}};
  CHECK(c->Patch(leases + "/l1", current.dump(), "application/merge-patch+json")->status == 200);
  // Bad patches change nothing.
  auto before = parse(c->Get(leases + "/l1"));
  expect_status(c->Patch(leases + "/l1", R"([{"op":"test","path":"/spec/holderIdentity","value":"nope"}])",
                         "application/json-patch+json"), 422, "Invalid");
  expect_status(c->Patch(leases + "/l1", R"({"op":"add"})", "application/json-patch+json"), 400, "BadRequest");
  expect_status(c->Patch(leases + "/l1", R"({"spec":{"leaseDurationSeconds":0}})", "application/merge-patch+json"),
                422, "Invalid");
  expect_status(c->Patch(leases + "/l1", "{", "application/merge-patch+json"), 400, "BadRequest");
  expect_status(c->Patch(leases + "/l1", "{}", "text/plain"), 415, "UnsupportedMediaType");
  expect_status(c->Patch(leases + "/missing", "{}", "application/merge-patch+json"), 404, "NotFound");
  CHECK(parse(c->Get(leases + "/l1")) == before);
}

TEST_CASE("DELETE preconditions: resourceVersion and uid") {
  fixture_server s;
  auto c = s.client();
  auto lease = parse(c->Post(leases, lease_body("l1").dump(), json_type));
  auto pre = [](const char* field, const json& value) {
    return json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"preconditions", {{field, value}}}}.dump();
  };
  auto wrong_uid = expect_status(c->Delete(leases + "/l1", pre("uid", "00000000-0000-4000-8000-000000000000"), json_type),
                                 409, "Conflict");
  CHECK(wrong_uid["message"].get<std::string>().find("Precondition failed: uid") != std::string::npos);
  expect_status(c->Delete(leases + "/l1", pre("resourceVersion", "1" + rv_of(lease)), json_type), 409, "Conflict");
  CHECK(c->Get(leases + "/l1")->status == 200);
  auto ok = parse(c->Delete(leases + "/l1", json{{"preconditions", {{"uid", lease["metadata"]["uid"]},
                                                                    {"resourceVersion", rv_of(lease)}}}}.dump(), json_type));
  CHECK(ok["status"] == "Success");
  CHECK(ok["details"]["uid"] == lease["metadata"]["uid"]);
  CHECK(c->Get(leases + "/l1")->status == 404);
}

TEST_CASE("list: limit and continue, label and field selectors, resourceVersion") {
  fixture_server s;
  auto c = s.client();
  const char* teams[] = {"a", "b", "a", "", "c"};
  for (int i = 0; i < 5; ++i) {
    json body = lease_body("l" + std::to_string(i));
    if (*teams[i] != '\0')
      body["metadata"]["labels"] = {{"team", teams[i]}};
    REQUIRE(c->Post(leases, body.dump(), json_type)->status == 201);
  }
  REQUIRE(c->Post("/apis/coordination.k8s.io/v1/namespaces/ns2/leases", lease_body("l0").dump(), json_type)->status == 201);
  // Pages of two, in name order, following continue tokens to the end.
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    auto page = parse(c->Get(leases + "?limit=2" + (token.empty() ? "" : "&continue=" + token)));
    CHECK(page["items"].size() <= 2);
    for (auto& item : page["items"])
      names.push_back(item["metadata"]["name"]);
    token = page["metadata"].value("continue", "");
    ++pages;
  } while (!token.empty() && pages < 10);
  CHECK(pages == 3);
  CHECK(names == strings{"l0", "l1", "l2", "l3", "l4"});
  expect_status(c->Get(leases + "?limit=2&continue=garbage"), 400, "BadRequest");

  auto names_for = [&](const std::string& query) {
    strings out;
    auto list = c->Get("/apis/coordination.k8s.io/v1/" + query);
    REQUIRE(list);
    REQUIRE_MESSAGE(list->status == 200, list->body);
    json body = json::parse(list->body);
    for (auto& item : body["items"])
      out.push_back(item["metadata"]["namespace"].get<std::string>() + "/" + item["metadata"]["name"].get<std::string>());
    return out;
  };
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team%3Da") == strings{"ns1/l0", "ns1/l2"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team!%3Da") == strings{"ns1/l1", "ns1/l3", "ns1/l4"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team%20in%20(b%2Cc)") == strings{"ns1/l1", "ns1/l4"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team%20notin%20(a)") == strings{"ns1/l1", "ns1/l3", "ns1/l4"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team") == strings{"ns1/l0", "ns1/l1", "ns1/l2", "ns1/l4"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=!team") == strings{"ns1/l3"});
  CHECK(names_for("namespaces/ns1/leases?labelSelector=team%3Da%2Cteam!%3Db") == strings{"ns1/l0", "ns1/l2"});
  CHECK(names_for("leases?fieldSelector=metadata.name%3Dl0") == strings{"ns1/l0", "ns2/l0"});
  CHECK(names_for("leases?fieldSelector=metadata.namespace%3Dns2") == strings{"ns2/l0"});
  CHECK(names_for("leases?fieldSelector=metadata.name%3Dl0%2Cmetadata.namespace!%3Dns1") == strings{"ns2/l0"});
  CHECK(names_for("leases?labelSelector=team%3Da&limit=1").size() == 1);
  CHECK(names_for("namespaces/ns1/leases?resourceVersion=0").size() == 5);
  expect_status(c->Get(leases + "?fieldSelector=spec.holderIdentity%3Da"), 400, "BadRequest");
  expect_status(c->Get(leases + "?labelSelector=team%20in%20b"), 400, "BadRequest");
}

TEST_CASE("Table responses for kubectl get; OpenAPI v3 documents") {
  fixture_server s;
  auto c = s.client();
  REQUIRE(c->Post(leases, lease_body("l1", "", "holder-x").dump(), json_type)->status == 201);
  httplib::Headers table = {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"}};
  auto list = parse(c->Get(leases, table));
  CHECK(list["kind"] == "Table");
  CHECK(list["apiVersion"] == "meta.k8s.io/v1");
  strings columns;
  for (auto& col : list["columnDefinitions"])
    columns.push_back(col["name"]);
  CHECK(columns == strings{"Name", "Holder", "Age"});
  REQUIRE(list["rows"].size() == 1);
  CHECK(list["rows"][0]["cells"][0] == "l1");
  CHECK(list["rows"][0]["cells"][1] == "holder-x");
  std::string age = list["rows"][0]["cells"][2];
  CHECK((age == "0s" || age == "1s" || age == "2s"));
  CHECK(list["rows"][0]["object"]["kind"] == "PartialObjectMetadata");
  CHECK(list["rows"][0]["object"]["metadata"]["name"] == "l1");
  auto one = parse(c->Get(leases + "/l1", table));
  CHECK(one["kind"] == "Table");
  CHECK(one["rows"].size() == 1);
  auto cms = parse(c->Get("/api/v1/namespaces/ns1/configmaps", table));
  CHECK(cms["columnDefinitions"][1]["name"] == "Data");
  CHECK(parse(c->Get(leases))["kind"] == "LeaseList");   // plain JSON without the Accept

  auto index = parse(c->Get("/openapi/v3"));
  std::string url = index["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"];
  CHECK(url.rfind("/openapi/v3/apis/coordination.k8s.io/v1?hash=", 0) == 0);
  CHECK(index["paths"].contains("api/v1"));
  auto doc = parse(c->Get(url));
  CHECK(doc["components"]["schemas"].contains("io.k8s.api.coordination.v1.Lease"));
  auto patch = doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"];
  CHECK(patch["x-kubernetes-group-version-kind"]["kind"] == "Lease");
  bool field_validation = false;
  for (auto& p : patch["parameters"])
    field_validation = field_validation || p["name"] == "fieldValidation";
  CHECK(field_validation);
  expect_status(c->Get("/openapi/v3/apis/example.com/v1"), 404, "NotFound");
}

TEST_CASE("events: the field selectors kubectl uses (describe lease lists its Events)") {
  fixture_server s;
  auto c = s.client();
  const std::string events = "/api/v1/namespaces/ns1/events";
  auto post = [&](const std::string& lease, const std::string& uid, const std::string& type) {
    json event = {{"metadata", {{"generateName", lease + "."}}},
                  {"reason", "LeaderElection"},
                  {"type", type},
                  {"message", "a became leader"},
                  {"involvedObject",
                   {{"kind", "Lease"}, {"apiVersion", "coordination.k8s.io/v1"},
                    {"namespace", "ns1"}, {"name", lease}, {"uid", uid}}}};
    REQUIRE(c->Post(events, event.dump(), json_type)->status == 201);
  };
  post("l1", "u1", "Normal");
  post("l1", "u1", "Warning");
  post("l2", "u2", "Normal");
  auto count = [&](const std::string& selector) {
    auto r = c->Get(events + "?fieldSelector=" + selector);
    REQUIRE(r);
    REQUIRE_MESSAGE(r->status == 200, r->body);
    return json::parse(r->body)["items"].size();
  };
  // kubectl describe lease l1: name, namespace, kind and uid, comma-joined.
  CHECK(count("involvedObject.name%3Dl1%2CinvolvedObject.namespace%3Dns1%2C"
              "involvedObject.kind%3DLease%2CinvolvedObject.uid%3Du1") == 2);
  CHECK(count("involvedObject.name%3D%3Dl2") == 1);
  CHECK(count("involvedObject.name!%3Dl1") == 1);
  CHECK(count("involvedObject.apiVersion%3Dcoordination.k8s.io%2Fv1%2Ctype%3DWarning") == 1);
  CHECK(count("type!%3DNormal") == 1);
  CHECK(count("involvedObject.resourceVersion%3D") == 3);   // unset: ""
  auto bad = expect_status(c->Get(events + "?fieldSelector=involvedObject.colour%3Dx"), 400,
                           "BadRequest");
  CHECK(bad["message"].get<std::string>().find("involvedObject.name") != std::string::npos);
}

TEST_CASE("every leasehold-apiserver log line carries time and level") {
  char err_path[] = "/tmp/leasehold-apiserver-log-XXXXXX";
  int err_fd = mkstemp(err_path);
  REQUIRE(err_fd >= 0);
  auto child = spawn_apiserver({"--port", "0", "--log-requests"}, err_fd);
  close(err_fd);
  if (!child.hello.is_discarded() && child.hello.contains("port")) {
    httplib::Client c("127.0.0.1", child.hello["port"].get<int>());
    c.Post(leases, lease_body("logged").dump(), json_type);
  }
  stop_apiserver(child.pid);
  std::ifstream in(err_path);
  std::string text;
  int lines = 0;
  bool stopping = false;
  while (std::getline(in, text)) {
    auto j = json::parse(text, nullptr, false);
    CAPTURE(text);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j.contains("time"));
    CHECK(j.contains("level"));
    stopping = stopping || j.value("msg", "") == "stopping";
    ++lines;
  }
  unlink(err_path);
  CHECK(lines >= 2);   // the request and "stopping"
  CHECK(stopping);
}

TEST_CASE("leases keep preferredHolder and strategy; LeaseCandidate v1beta1 create, get, list, watch, update, patch, delete") {
  fixture_server s;
  auto c = s.client();
  json l = {{"metadata", {{"name", "pl"}}},
            {"spec", {{"holderIdentity", "a"}, {"preferredHolder", "b"}, {"strategy", "OldestEmulationVersion"}}}};
  auto stored = parse(c->Post(leases, l.dump(), json_type));
  CHECK(stored["spec"]["preferredHolder"] == "b");
  auto got = parse(c->Get(leases + "/pl"));
  CHECK(got["spec"]["preferredHolder"] == "b");
  CHECK(got["spec"]["strategy"] == "OldestEmulationVersion");
  l["spec"]["preferredHolder"] = 7;
  l["metadata"]["name"] = "pl2";
  expect_status(c->Post(leases, l.dump(), json_type), 422, "Invalid");

  const std::string lcs = "/apis/coordination.k8s.io/v1beta1/namespaces/ns1/leasecandidates";
  watch_reader watch(s.server.port(), lcs + "?watch=true&timeoutSeconds=5");
  REQUIRE(watch.wait_open());   // its starting list is taken before the create (CI load: a late stream saw 3 events)
  json lc = {{"apiVersion", "coordination.k8s.io/v1beta1"}, {"kind", "LeaseCandidate"},
             {"metadata", {{"name", "pl-a"}}},
             {"spec", {{"leaseName", "pl"}, {"renewTime", "2026-12-04T03:00:00.000000Z"},
                       {"binaryVersion", "1.32.0"}, {"strategy", "OldestEmulationVersion"}}}};
  auto created = c->Post(lcs, lc.dump(), json_type);
  REQUIRE(created);
  CHECK(created->status == 201);
  auto cand = json::parse(created->body);
  CHECK(cand["kind"] == "LeaseCandidate");
  CHECK(cand["apiVersion"] == "coordination.k8s.io/v1beta1");
  CHECK(cand["spec"]["leaseName"] == "pl");
  CHECK(parse(c->Get(lcs + "/pl-a"))["spec"]["binaryVersion"] == "1.32.0");
  auto list = parse(c->Get(lcs));
  CHECK(list["kind"] == "LeaseCandidateList");
  CHECK(list["items"].size() == 1);
  cand["spec"]["renewTime"] = "2026-12-04T03:00:05.000000Z";
  auto updated = parse(c->Put(lcs + "/pl-a", cand.dump(), json_type));
  CHECK(updated["spec"]["renewTime"] == "2026-12-04T03:00:05.000000Z");
  auto patched = c->Patch(lcs + "/pl-a", R"({"spec":{"pingTime":"2026-12-04T03:00:06.000000Z"}})",
                          "application/merge-patch+json");
  REQUIRE(patched);
  CHECK(patched->status == 200);
  CHECK(json::parse(patched->body)["spec"]["pingTime"] == "2026-12-04T03:00:06.000000Z");
  expect_status(c->Post(lcs, json{{"metadata", {{"name", "no-lease"}}}, {"spec", json::object()}}.dump(), json_type),
                422, "Invalid");
  expect_status(c->Post(lcs, json{{"metadata", {{"name", "bad-time"}}},
                                  {"spec", {{"leaseName", "pl"}, {"renewTime", "soon"}}}}.dump(), json_type),
                422, "Invalid");
  CHECK(parse(c->Delete(lcs + "/pl-a"))["status"] == "Success");
  expect_status(c->Get(lcs + "/pl-a"), 404, "NotFound");
  CHECK(types_of(watch.events(4)) == strings{"ADDED", "MODIFIED", "MODIFIED", "DELETED"});
  // Leases are not candidates: each resource has its own objects.
  CHECK(parse(c->Get(leases))["items"].size() == 1);
}
