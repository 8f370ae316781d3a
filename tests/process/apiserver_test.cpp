// leasehold-apiserver: Kubernetes semantics, fault injection and stats over
// real HTTP on loopback; the binary as a subprocess; kubectl (when
// installed); kube_client's error classification; TLS.
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
#include "cmd/leasehold-apiserver/object_store.hpp"
#include "transport/kube_client.hpp"

using nlohmann::json;
using namespace std::chrono_literals;
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

/// A temporary directory removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "leasehold-apiserver-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

/// Runs a shell command; returns its exit status and stdout+stderr.
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  std::FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
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
  auto list = store.list(*events, "ns");
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
  CHECK(std::chrono::steady_clock::now() - stop_started < 1s);
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
  std::this_thread::sleep_for(200ms);
  s.control({{"mode", "recover"}});
  waiter.join();

  // stop() ends a hung request at once.
  s.control({{"mode", "hang"}});
  std::thread victim([&] { CHECK(!s.client("victim", 10000ms)->Get(leases + "/l1")); });
  std::this_thread::sleep_for(200ms);
  auto stop_started = std::chrono::steady_clock::now();
  s.server.stop();
  CHECK(std::chrono::steady_clock::now() - stop_started < 3s);
  victim.join();
}

TEST_CASE("fault: latency delays answers") {
  fixture_server s;
  s.control({{"latency_ms", 200}});
  auto t0 = std::chrono::steady_clock::now();
  auto res = s.client()->Get(leases + "/l1");
  REQUIRE(res);
  CHECK(res->status == 404);
  CHECK(std::chrono::steady_clock::now() - t0 >= 190ms);
  s.control({{"latency_ms", 0}});
  t0 = std::chrono::steady_clock::now();
  CHECK(s.client()->Get(leases + "/l1")->status == 404);
  CHECK(std::chrono::steady_clock::now() - t0 < 150ms);
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

TEST_CASE("stats count per verb, client, identity and status code; reset") {
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
  auto resources = parse(c->Get("/apis/coordination.k8s.io/v1"));
  CHECK(resources["kind"] == "APIResourceList");
  CHECK(resources["resources"][0]["name"] == "leases");
  CHECK(resources["resources"][0]["namespaced"] == true);
  CHECK(resources["resources"][0]["kind"] == "Lease");
  CHECK(resources["resources"][0].count("shortNames") == 0);
  auto core = parse(c->Get("/api/v1"));
  CHECK(core["resources"].size() == 2);
}

TEST_CASE("kubectl get leases against the server") {
  if (!have_program("kubectl")) {
    MESSAGE("skipped: kubectl is not installed");
    return;
  }
  fixture_server s;
  REQUIRE(s.client()->Post(leases, lease_body("kubectl-lease", "", "holder-x").dump(), json_type)->status == 201);
  temp_dir home;
  std::string kubectl = "HOME=" + home.path.string() + " timeout 60 kubectl --server http://127.0.0.1:" +
                        std::to_string(s.server.port()) + " --cache-dir " + (home.path / "cache").string();
  auto [rc, table] = run(kubectl + " get leases -n ns1");
  CHECK_MESSAGE(rc == 0, table);
  CHECK(table.find("NAME") != std::string::npos);
  CHECK(table.find("kubectl-lease") != std::string::npos);
  auto [rc2, out] = run(kubectl + " get lease kubectl-lease -n ns1 -o json");
  REQUIRE_MESSAGE(rc2 == 0, out);
  json lease = json::parse(out, nullptr, false);
  REQUIRE_MESSAGE(!lease.is_discarded(), out);
  CHECK(lease["spec"]["holderIdentity"] == "holder-x");
  CHECK(lease["metadata"]["namespace"] == "ns1");
}

TEST_CASE("the leasehold-apiserver binary: startup line, a request, exit 0 on SIGTERM") {
  std::string binary = env_or("LEASEHOLD_BUILD_ROOT", "build") + "/cmd/leasehold-apiserver/leasehold-apiserver";
  REQUIRE_MESSAGE(access(binary.c_str(), X_OK) == 0, binary);
  int out[2];
  REQUIRE(pipe(out) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execl(binary.c_str(), binary.c_str(), "--port", "0", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string line;
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
  json hello = json::parse(line.substr(0, line.find('\n')), nullptr, false);
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
  CHECK_MESSAGE(started, "first stdout line: " << line);
  kill(pid, SIGTERM);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0)
      std::this_thread::sleep_for(50ms);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECK(done == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("snapshot: objects and resourceVersion survive a restart") {
  temp_dir dir;
  leasehold::api_server_options opts;
  opts.snapshot_file = (dir.path / "state.json").string();
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

  std::ofstream(dir.path / "corrupt.json") << "{not json";
  leasehold::api_server_options bad;
  bad.snapshot_file = (dir.path / "corrupt.json").string();
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
    opts.snapshot_file = (dir.path / ("early-" + std::to_string(round) + ".json")).string();
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
  if (!have_program("openssl")) {
    MESSAGE("skipped: the openssl command is not installed");
    return;
  }
  temp_dir dir;
  auto p = [&](const char* f) { return (dir.path / f).string(); };
  std::ofstream(p("san.cnf")) << "subjectAltName=IP:127.0.0.1\n";
  std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string& cmd : {
         "openssl req -x509" + ec + " -keyout " + p("ca.key") + " -out " + p("ca.crt") +
           " -days 1 -subj /CN=leasehold-test-ca",
         "openssl req" + ec + " -keyout " + p("server.key") + " -out " + p("server.csr") +
           " -subj /CN=127.0.0.1",
         "openssl x509 -req -in " + p("server.csr") + " -CA " + p("ca.crt") + " -CAkey " + p("ca.key") +
           " -CAcreateserial -out " + p("server.crt") + " -days 1 -extfile " + p("san.cnf")}) {
    auto [rc, out] = run(cmd);
    REQUIRE_MESSAGE(rc == 0, cmd << "\n" << out);
  }
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
