// The Lease watch stream (transport/lease_watch.hpp) against a loopback
// server that plays one scripted answer per connection: events in order,
// resume from the last version, 410 re-list, a malformed line, an ERROR
// Status, a stream that stalls, a truncated line. Each fault must close the
// stream with a `down` naming the request, and the next stream must resume.
#include <doctest/doctest.h>

#include <deque>
#include <thread>
#include <mutex>
#include <vector>

#include "tests/unit/test_support.hpp"
#include "tests/unit/watch_support.hpp"
#include "leasehold/transports.hpp"
#include "transport/kube/kube_client.hpp"
#include "transport/kube/kube_watch.hpp"
#include "lease/lease_json.hpp"
#include "transport/transport_pool.hpp"
#include "transport/watch_fanout.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using leasehold::test::collect;
using leasehold::test::next_script;
using leasehold::test::play;
using leasehold::test::script;

namespace {

const lease_key key{"default", "agent-1-lock"};

std::string event(const std::string& type, const std::string& rv, const std::string& holder,
                  const std::string& name = key.name) {
  return R"({"type":")" + type + R"(","object":)" + test::lease_body(name, rv, holder, 3) + "}\n";
}


struct watch_server {
  test::loopback_server<> server;
  std::mutex mx;
  std::deque<script> scripts;
  std::vector<std::string> queries;   // resourceVersion asked by each connection ("-" = none)
  std::atomic<int> connections{0};
  std::chrono::milliseconds delay{0};   // before a stream answers (subscribers join meanwhile)
  std::atomic<bool> closing{false};

  watch_server() {
    server.http().Get(leases_path(key.ns), [this](const httplib::Request& req,
                                                 httplib::Response& res) {
      script s;
      {
        std::lock_guard<std::mutex> g(mx);
        queries.push_back(req.has_param("resourceVersion") ? req.get_param_value("resourceVersion")
                                                           : "-");
        // The namespace's whole collection: one stream shared by every lease.
        CHECK_FALSE(req.has_param("fieldSelector"));
        CHECK(req.get_param_value("watch") == "1");
        ++connections;
        s = next_script(scripts, script{{}, true});
      }
      std::this_thread::sleep_for(delay);
      play(res, s, closing);
    });
    // A write (a release) is answered with its lease released.
    server.http().Put(leases_path(key.ns) + "/(.+)", [](const httplib::Request& req,
                                                       httplib::Response& res) {
      res.set_content(test::lease_body(req.matches[1], "90", "", 3), "application/json");
    });
    server.start();
  }
  ~watch_server() { closing = true; }
};

std::string show(const lease_watch_event& e) {
  switch (e.what) {
    case lease_watch_event::kind::up: return "up";
    case lease_watch_event::kind::down: return "down: " + e.reason;
    case lease_watch_event::kind::deleted: return "deleted";
    case lease_watch_event::kind::record:
      return "record " + e.record->resource_version + " " + e.record->spec.holder_identity;
  }
  return "?";
}

/// `self` watches lease `k` through `transport`.
void watch(caf::scoped_actor& self, const lease_transport_actor& transport, const lease_key& k,
           caf::timespan idle) {
  lease_watch_request req;
  req.lease = k;
  req.idle_timeout = idle;
  req.subscriber = caf::actor_cast<lease_watch_subscriber>(self.ptr());   // a scoped_actor: unchecked
  self->send(transport, watch_lease_atom::value, req);
}

/// One HTTP transport to `ws`, and two subscribers of its namespace's
/// stream: `a` watches lease-a, `b` lease-b.
struct two_subscribers {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor a{sys};
  caf::scoped_actor b{sys};
  lease_transport_actor transport;

  explicit two_subscribers(watch_server& ws) {
    connection_config cc;
    cc.server = ws.server.url();
    transport = spawn_http_backend(sys, cc).transport;
    watch(a, transport, {"default", "lease-a"}, 5s);
    watch(b, transport, {"default", "lease-b"}, 5s);
  }
};

} // namespace

TEST_CASE("watch lines: every type parses; a bad line names what is wrong") {
  auto added = parse_watch_line(event("ADDED", "5", "pod-a"));
  REQUIRE(added.ok());
  CHECK(added.value->what == watch_line::type::added);
  CHECK(added.value->resource_version == "5");
  CHECK(added.value->record->spec.holder_identity == "pod-a");
  // Read in place (lease/lease_json.hpp) or as a document, the same line.
  auto deleted = parse_watch_line(R"( {"object" : )" + test::lease_body("x", "6", "pod-b", 2) +
                                  R"( , "type":"DELETED" } )");
  REQUIRE(deleted.ok());
  CHECK(deleted.value->what == watch_line::type::deleted);
  CHECK(deleted.value->resource_version == "6");
  CHECK(deleted.value->record->name == "x");
  auto escaped = parse_watch_line(event("MODIFIED", "7", "p\u00f6d"));
  REQUIRE(escaped.ok());
  CHECK(escaped.value->record->spec.holder_identity == "p\xc3\xb6" "d");
  auto extra = parse_watch_line(R"({"type":"MODIFIED","extra":1,"object":)" +
                                test::lease_body("x", "8", "pod-b", 2) + "}");
  REQUIRE(extra.ok());
  CHECK(extra.value->resource_version == "8");
  auto bookmark = parse_watch_line(
    R"({"type":"BOOKMARK","object":{"kind":"Lease","metadata":{"resourceVersion":"12"}}})");
  REQUIRE(bookmark.ok());
  CHECK(bookmark.value->what == watch_line::type::bookmark);
  CHECK(bookmark.value->resource_version == "12");
  auto gone = parse_watch_line(
    R"J({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1 (9)","reason":"Expired","code":410}})J");
  REQUIRE(gone.ok());
  CHECK(gone.value->status_code == 410);
  CHECK(parse_watch_line("{not json").error == "not a JSON object");
  CHECK(parse_watch_line(R"({"type":"ADDED"})").error == "object: expected an object");
  CHECK(parse_watch_line(R"({"type":"RENAMED","object":{}})").error
        == "type: unknown event type \"RENAMED\"");
  auto bad_spec = parse_watch_line(
    R"({"type":"MODIFIED","object":{"metadata":{"name":"x","resourceVersion":"3"},"spec":{"leaseTransitions":"two"}}})");
  REQUIRE(!bad_spec.ok());
  CHECK(bad_spec.error.find("object.spec.leaseTransitions") == 0);
  CHECK(lease_watch_path(key, "", 300).find("resourceVersion") == std::string::npos);
  CHECK(lease_watch_path(key, "17", 300).find("&resourceVersion=17") != std::string::npos);
}

TEST_CASE("a watch line read in place is what the document reads, on every truncation and "
          "one-byte change") {
  // What read_plain_event takes, nlohmann's document reads the same: the
  // type and, through parse_lease, the same lease, raw included.
  const std::string swaps = "\"{}[],:\\0x -.e\x80";
  std::size_t taken = 0;
  auto same = [&](const std::string& line) {
    std::string type;
    auto fast = read_plain_event(line, type);
    if (!fast)
      return;
    ++taken;
    INFO("line: " << line);
    auto j = nlohmann::json::parse(line, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.size() == 2);
    CHECK(j["type"] == type);
    auto doc = parse_lease(j["object"]);
    REQUIRE(doc.ok());
    CHECK(fast->name == doc.value->name);
    CHECK(fast->resource_version == doc.value->resource_version);
    CHECK(fast->spec == doc.value->spec);
    CHECK(fast->raw == doc.value->raw);
  };
  for (const auto& line : {event("MODIFIED", "7", "pod-a"),
                           R"( {"object" : )" + test::lease_body("x", "6", "pod-b", 2) +
                             R"( , "type":"DELETED" } )"}) {
    same(line);
    for (std::size_t n = 0; n < line.size(); ++n) {
      same(line.substr(0, n));
      for (char c : swaps) {
        auto changed = line;
        changed[n] = c;
        same(changed);
      }
    }
  }
  CHECK(taken > 100);
}

TEST_CASE("the watch stream delivers in order, resumes, re-lists on 410 and survives every stream fault") {
  watch_server ws;
  {
    std::lock_guard<std::mutex> g(ws.mx);
    // 1: two changes, then a malformed line.
    ws.scripts.push_back({{event("ADDED", "5", "pod-a"), event("MODIFIED", "6", ""), "{oops\n"}});
    // 2: resumes after 6; the server no longer has it.
    ws.scripts.push_back({{R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}})"
                           "\n"}});
    // 3: re-list from the current state, a delete, a clean end of stream.
    ws.scripts.push_back({{event("ADDED", "9", "pod-b"), event("DELETED", "10", "pod-b")}});
    // 4: resumes after 10, then stalls past the idle timeout.
    ws.scripts.push_back({{R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"11"}}})"
                           "\n"},
                          true});
    // 5: an ERROR event that is not 410.
    ws.scripts.push_back({{R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcdserver: leader changed"}})"
                           "\n"}});
    // 6: a line cut off by the end of the stream.
    ws.scripts.push_back({{event("MODIFIED", "12", "pod-c"), R"({"type":"MODIF)"}});
    // 7: the connection drops mid-stream, long before the idle timeout.
    ws.scripts.push_back({{event("MODIFIED", "13", "pod-c")}, false, true});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  connection_config cc;
  cc.server = ws.server.url();
  cc.connect_timeout = 200ms;
  auto transport = spawn_http_backend(sys, cc).transport;
  watch(self, transport, key, 300ms);

  std::vector<std::string> seen;
  for (auto& e : collect(self, 17))
    seen.push_back(show(e));
  for (auto& s : seen)
    MESSAGE(s);
  REQUIRE(seen.size() >= 17);
  CHECK(seen[0] == "up");
  CHECK(seen[1] == "record 5 pod-a");
  CHECK(seen[2] == "record 6 ");
  CHECK(seen[3].find("down: watch GET /apis/coordination.k8s.io/v1/namespaces/default/leases?watch=1") == 0);
  CHECK(seen[3].find("malformed watch event: not a JSON object") != std::string::npos);
  CHECK(seen[4] == "up");                     // 2: 410, quietly re-listed
  CHECK(seen[5] == "record 9 pod-b");         // 3
  CHECK(seen[6] == "deleted");
  CHECK(seen[7].find("delivered nothing for 300ms") != std::string::npos);   // 4 stalled
  CHECK(seen[8] == "up");                     // 5
  CHECK(seen[9].find("ERROR event: 500 etcdserver: leader changed") != std::string::npos);
  CHECK(seen[10] == "up");                    // 6
  CHECK(seen[11] == "record 12 pod-c");
  // Cut under a half-written line: the server went away, and says so.
  CHECK(seen[12].find("disconnected: the server closed the watch stream inside an event line")
        != std::string::npos);
  CHECK(seen[12].find("malformed") == std::string::npos);
  CHECK(seen[13] == "up");                    // 7
  CHECK(seen[14] == "record 13 pod-c");
  CHECK(seen[15].find("watch stream broken after") != std::string::npos);   // not "delivered nothing"
  CHECK(seen[15].find("connection_refused") != std::string::npos);
  CHECK(seen[16] == "up");                    // 8: the quiet stream
  {
    std::lock_guard<std::mutex> g(ws.mx);
    REQUIRE(ws.queries.size() >= 8);
    CHECK(ws.queries[0] == "-");
    CHECK(ws.queries[1] == "6");    // resumes after the last delivered version
    CHECK(ws.queries[2] == "-");    // 410: from the current state
    CHECK(ws.queries[3] == "10");
    CHECK(ws.queries[4] == "11");   // a bookmark moves the version too
    CHECK(ws.queries[5] == "11");
    CHECK(ws.queries[6] == "12");
    CHECK(ws.queries[7] == "13");
  }
  // The subscriber ends: so does its stream (the transport joins it).
  ws.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("stopping a watch that reopens its stream in a tight loop takes well under its idle timeout") {
  // Every stream delivers a bookmark and ends, so the watcher reopens in a
  // tight loop; streams opened after `stall` is set stay silent. A stop that
  // lands between two streams (before the thread sees it) would leave the
  // next, silent stream blocking until its idle timeout (3 s here); halt()
  // aborts again until the thread is done. (The window is microseconds: this
  // bounds the stop, it did not catch the race on the code before.)
  test::loopback_server<> server;
  std::atomic<bool> stall{false};
  std::atomic<bool> closing{false};
  server.http().Get(leases_path(key.ns), [&](const httplib::Request&, httplib::Response& res) {
    bool quiet = stall.load();
    res.set_chunked_content_provider("application/json", [&, quiet](std::size_t,
                                                                    httplib::DataSink& sink) {
      if (quiet) {
        for (int i = 0; i < 400 && !closing; ++i)   // at most 4 s
          std::this_thread::sleep_for(10ms);
      } else {
        std::string line = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})"
                           "\n";
        sink.write(line.data(), line.size());
      }
      sink.done();
      return true;
    });
  });
  server.start();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  connection_config cc;
  cc.server = server.url();
  auto slowest = 0ms;
  for (int i = 0; i < 30; ++i) {
    stall = false;
    lease_watch_request req;
    req.lease = key;
    req.idle_timeout = 3s;
    req.subscriber = caf::actor_cast<lease_watch_subscriber>(self.ptr());   // a scoped_actor: unchecked
    auto w = std::make_unique<lease_watcher>(cc, req);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + i % 7));
    stall = true;
    auto t0 = std::chrono::steady_clock::now();
    w.reset();
    slowest = std::max(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - t0));
  }
  MESSAGE("slowest stop: " << slowest.count() << " ms");
  CHECK(slowest < 3s);   // before the idle timeout could have ended the stream
  closing = true;
}

TEST_CASE("one watch stream per namespace, shared by every lease in it, demultiplexed by name") {
  // Before, a watch thread and connection per watching runner made one
  // process unable to hold more than a few hundred leases.
  watch_server ws;
  {
    std::lock_guard<std::mutex> g(ws.mx);
    ws.scripts.push_back({{event("ADDED", "5", "pod-a", "lease-a"), event("ADDED", "6", "pod-b", "lease-b"),
                           event("MODIFIED", "7", "pod-x", "lease-x"),   // nobody follows it
                           event("DELETED", "8", "pod-a", "lease-a")},
                          true});
    ws.delay = 200ms;   // both subscribe before the first event
  }
  two_subscribers t(ws);
  auto &a = t.a, &b = t.b;
  auto& transport = t.transport;
  std::vector<std::string> seen_a, seen_b;
  for (auto& e : collect(a, 3))
    seen_a.push_back(show(e));
  for (auto& e : collect(b, 2))
    seen_b.push_back(show(e));
  CHECK(seen_a == std::vector<std::string>{"up", "record 5 pod-a", "deleted"});
  CHECK(seen_b == std::vector<std::string>{"up", "record 6 pod-b"});
  CHECK(ws.connections == 1);
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("a subscriber that sends its release leaves the shared stream; the stream ends when the last one did") {
  // SIGTERM of 10,000 leases: a process releasing all its
  // leases kept its stream open until its last elector ended, and so was
  // streamed every release and every take of its successor, which cost it,
  // and the server, more CPU than the releases themselves.
  watch_server ws;
  {
    std::lock_guard<std::mutex> g(ws.mx);
    ws.scripts.push_back({{}, true});   // quiet (a stall), then the next script
    ws.scripts.push_back({{event("MODIFIED", "10", "pod-z", "lease-a"),
                           event("MODIFIED", "11", "pod-z", "lease-b")},
                          true});
  }
  auto before = current_transport_census().watch_streams;
  two_subscribers t(ws);
  auto &a = t.a, &b = t.b;
  auto& transport = t.transport;
  REQUIRE(collect(a, 1).size() == 1);   // up
  REQUIRE(collect(b, 1).size() == 1);
  CHECK(current_transport_census().watch_streams == before + 1);
  auto write = [&](caf::scoped_actor& self, const std::string& name, const std::string& holder) {
    lease l;
    l.ns = "default";
    l.name = name;
    l.resource_version = "9";
    l.spec.holder_identity = holder;
    bool answered = false;
    self->request(transport, 5s, update_lease_atom::value, l)
      .receive([&](lease_reply& r) { answered = r.ok(); }, [&](caf::error&) {});
    return answered;
  };
  // A write that is no release (a take) leaves nothing.
  REQUIRE(write(a, "lease-a", "pod-a"));
  REQUIRE(write(a, "lease-a", ""));   // a's release: a leaves
  // b is still streamed (the next stream's events), a no more.
  auto seen_b = collect(b, 1, 120);
  REQUIRE(seen_b.size() == 1);
  CHECK(show(seen_b[0]) == "record 11 pod-z");
  CHECK(collect(a, 1, 8).empty());
  CHECK(current_transport_census().watch_streams == before + 1);
  REQUIRE(write(b, "lease-b", ""));   // the last subscriber's release ends the stream
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = current_transport_census().watch_streams == before;
    if (!ended)
      std::this_thread::sleep_for(25ms);
  }
  CHECK(ended);
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("a watch the API forbids is reported down once, naming the refusal") {
  // Regression: with RBAC as once shipped (no "watch" verb) every watch
  // was refused 403; a stream that never opened was never reported, so the
  // agents polled and logged nothing.
  test::loopback_server<> server;
  std::atomic<int> refused{0};
  server.http().Get(leases_path(key.ns), [&](const httplib::Request&, httplib::Response& res) {
    ++refused;
    res.status = 403;
    res.set_content(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:leasehold:leasehold\" cannot watch resource \"leases\"","reason":"Forbidden","code":403})",
                    "application/json");
  });
  server.start();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  connection_config cc;
  cc.server = server.url();
  auto transport = spawn_http_backend(sys, cc).transport;
  watch(self, transport, key, 5s);
  auto events = collect(self, 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].what == lease_watch_event::kind::down);
  CHECK_MESSAGE(events[0].reason.find("forbidden (403)") != std::string::npos, events[0].reason);
  // Retried with backoff, but said once: no second event while it stays refused.
  auto more = collect(self, 1, 24);   // 600 ms
  CHECK(more.empty());
  CHECK(refused >= 2);
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("watch_fanout: a subscriber's removal looks at its own subscriptions, not at every lease's") {
  // Regression: remove() scanned every lease's
  // subscribers, so 10,000 electors ending at once (a SIGTERM of 10,000
  // leases) cost the transport's dispatcher 10^8 comparisons while their
  // releases waited in its queue (3,147 of 10,000 released in time).
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto idle = [](lease_watch_subscriber::pointer) -> lease_watch_subscriber::behavior_type {
    return {[](const lease_watch_event&) {}};
  };
  constexpr int n = 1000;
  watch_fanout f;
  std::vector<lease_watch_subscriber> subs;
  for (int i = 0; i < n; ++i) {
    subs.push_back(sys.spawn(idle));
    f.add("lease-" + std::to_string(i), subs.back());
  }
  f.add("lease-0", subs[1]);   // one subscriber of two leases
  f.add("lease-1", subs[1]);   // and of one lease twice
  REQUIRE(f.size() == n + 2);
  CHECK(f.remove(subs[1].address()) == n - 1);
  CHECK_FALSE(f.follows("lease-1"));
  CHECK(f.follows("lease-0"));   // subs[0] still follows it
  for (int i = 0; i < n; ++i)
    if (i != 1)
      f.remove(subs[i].address());
  CHECK(f.size() == 0);
  CHECK(f.names().empty());
  CHECK(f.examined() <= 2 * n);   // each removal looks at its own lease's few (before: ~n^2 / 2)
  for (auto& a : subs)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("watch_echoes: the object of a MODIFIED line in either key order; other lines none") {
  auto obj = test::lease_body("a", "9", "me", 3);
  CHECK(watch_echoes::modified_object(R"({"type":"MODIFIED","object":)" + obj + "}\n") == obj);
  CHECK(watch_echoes::modified_object(R"({"object":)" + obj + R"(,"type":"MODIFIED"})") == obj);
  CHECK(watch_echoes::modified_object(R"({"type":"ADDED","object":)" + obj + "}").empty());
  watch_echoes e{2};
  e.note(obj + "\n", "a", "9");
  CHECK_FALSE(e.take(R"({"type":"MODIFIED","object":)" + test::lease_body("a", "9", "you", 3) + "}"));
  CHECK_FALSE(e.take(R"({"type":"MODIFIED","object":)" + obj));   // truncated: never the answer
  auto hit = e.take(R"({"object":)" + obj + R"(,"type":"MODIFIED"})");
  REQUIRE(hit);
  CHECK(hit->name == "a");
  CHECK(hit->resource_version == "9");
  CHECK_FALSE(e.take(R"({"object":)" + obj + R"(,"type":"MODIFIED"})"));   // used up
  // Only the last `capacity` answers are kept.
  for (auto rv : {"10", "11", "12"})
    e.note(test::lease_body("a", rv, "me", 3), "a", rv);
  CHECK_FALSE(e.take(R"({"type":"MODIFIED","object":)" + test::lease_body("a", "10", "me", 3) + "}"));
  CHECK(e.take(R"({"type":"MODIFIED","object":)" + test::lease_body("a", "12", "me", 3) + "}"));
  CHECK(e.taken() == 2);
}

TEST_CASE("watch_echoes::object_name reads metadata.name alone, whatever comes before it") {
  CHECK(watch_echoes::object_name(test::lease_body("a-1", "9", "me", 3)) == "a-1");
  // A "name" elsewhere (a label, an owner, the spec) is not the Lease's.
  CHECK(watch_echoes::object_name(
          R"({"apiVersion":"v1","spec":{"name":"x"},"metadata":{"labels":{"name":"y"},)"
          R"("ownerReferences":[{"name":"z","uid":"u"}],"annotations":{"a":"{\"name\":\"w\"}"},)"
          R"("generation":3,"deleted":null,"name":"real"}})") == "real");
  CHECK(watch_echoes::object_name(R"( { "metadata" : { "name" : "spaced" } } )") == "spaced");
  // Nothing to go on: empty, not a guess.
  CHECK(watch_echoes::object_name(R"({"metadata":{"name":"esc\"aped"}})").empty());
  CHECK(watch_echoes::object_name(R"({"metadata":{"namespace":"default"}})").empty());
  CHECK(watch_echoes::object_name(R"({"metadata":{"name":7}})").empty());
  CHECK(watch_echoes::object_name(R"({"metadata":{"labels":{"a":"b")").empty());   // truncated
  CHECK(watch_echoes::object_name(R"({"spec":{"x":[1,2,{"y":"}"}]}})").empty());
  CHECK(watch_echoes::object_name("").empty());
  CHECK(watch_echoes::object_name("[]").empty());
}

TEST_CASE("watch_echoes: an echo that comes before its answer is still dropped; a line of a "
          "Lease with no renew in flight never waits; a flight that does not land is waited "
          "out at most max_wait") {
  // Before, more than half of a 10,000-Lease holder's echoes reached the
  // stream before the pipelined batch's answers were noted, and were parsed
  // and delivered.
  auto line = [](const std::string& name, const std::string& rv, const std::string& holder) {
    return R"({"type":"MODIFIED","object":)" + test::lease_body(name, rv, holder, 3) + "}";
  };
  SUBCASE("the answer is noted after the line was read") {
    watch_echoes e{16, 10s};
    std::optional<watch_echoes::echo> hit;
    {
      auto flight = e.depart({"a", "b"});
      std::thread stream([&] { hit = e.take(line("a", "9", "me")); });
      for (int i = 0; i < 500 && e.waited() == 0; ++i)   // the stream waits (bounded: 5 s)
        std::this_thread::sleep_for(10ms);
      CHECK(e.waited() == 1);
      e.note(test::lease_body("a", "9", "me", 3), "a", "9");
      stream.join();
    }
    REQUIRE(hit);
    CHECK(hit->name == "a");
    CHECK(hit->resource_version == "9");
    CHECK(e.taken() == 1);
  }
  SUBCASE("another writer's event of a Lease in flight waits for the landing, then is not taken") {
    watch_echoes e{16, 10s};
    std::optional<watch_echoes::echo> hit{watch_echoes::echo{}};
    std::thread stream;
    {
      auto flight = e.depart({"a"});
      stream = std::thread([&] { hit = e.take(line("a", "10", "other")); });
      for (int i = 0; i < 500 && e.waited() == 0; ++i)
        std::this_thread::sleep_for(10ms);
      e.note(test::lease_body("a", "9", "me", 3), "a", "9");   // this renew's own answer
    }   // landed
    stream.join();
    CHECK_FALSE(hit);
    CHECK(e.waited() == 1);
    CHECK(e.taken() == 0);
  }
  SUBCASE("a Lease no flight carries: no wait, even while another flight never lands") {
    watch_echoes e{16, 60s};
    auto flight = e.depart({"a"});
    auto began = std::chrono::steady_clock::now();
    CHECK_FALSE(e.take(line("b", "9", "me")));
    CHECK_FALSE(e.take(R"({"type":"MODIFIED","object":{"metadata":{"labels":{"name":"a"}}}})"));
    CHECK(e.waited() == 0);
    CHECK(std::chrono::steady_clock::now() - began < 30s);   // would be 60 s per line
  }
  SUBCASE("a flight that never lands holds its Lease's lines max_wait after it left, no longer") {
    watch_echoes e{16, 50ms};
    auto flight = e.depart({"a"});
    CHECK_FALSE(e.take(line("a", "9", "me")));
    CHECK_FALSE(e.take(line("a", "10", "me")));   // the same deadline: past already
    CHECK(e.waited() == 2);
    e.note(test::lease_body("a", "10", "me", 3), "a", "10");   // late: still taken
    CHECK(e.take(line("a", "10", "me")));
  }
}

TEST_CASE("a renew's own event on the shared stream is not delivered to its writer; "
          "another writer's is, and a Lease two subscribers follow gets both") {
  // CPU per renewal: a holder of 10,000 Leases parsed its own
  // 5,000 renewals a second on its stream, for electors that dropped them.
  // `event_first`: the server streams the renew's event, then answers the
  // PUT (50 ms later), as an API may when its answer is slower than its
  // watch (the stream waits for a renew in flight up to 500 ms after it
  // left); otherwise the answer goes first.
  struct echo_server {
    test::loopback_server<> server;
    std::atomic<bool> put{false};        // the PUT arrived
    std::atomic<bool> answered{false};   // ... and was answered
    std::atomic<bool> streamed{false};   // the renew's event was written
    std::atomic<bool> closing{false};
    explicit echo_server(bool event_first) {
      auto until = [](const std::atomic<bool>& flag) {   // bounded: 2 s
        for (int i = 0; i < 200 && !flag; ++i)
          std::this_thread::sleep_for(10ms);
      };
      server.http().Put(lease_path(key), [this, event_first, until](const httplib::Request&,
                                                                      httplib::Response& res) {
        put = true;
        if (event_first) {
          until(streamed);
          std::this_thread::sleep_for(50ms);
        }
        res.set_content(test::lease_body(key.name, "9", "me", 3) + "\n", "application/json");
        answered = true;
      });
      server.http().Get(leases_path(key.ns), [this, event_first, until](const httplib::Request& req,
                                                                          httplib::Response& res) {
        if (req.has_param("resourceVersion")) {   // a reopened stream: quiet
          play(res, script{{}, true}, closing);
          return;
        }
        until(event_first ? put : answered);
        if (!event_first)
          std::this_thread::sleep_for(100ms);
        res.set_chunked_content_provider("application/json", [this, until](std::size_t,
                                                                           httplib::DataSink& sink) {
          auto own = R"({"object":)" + test::lease_body(key.name, "9", "me", 3) +
                     R"(,"type":"MODIFIED"})" "\n";
          sink.write(own.data(), own.size());
          streamed = true;
          until(answered);
          std::this_thread::sleep_for(50ms);
          auto other = event("MODIFIED", "10", "other");
          sink.write(other.data(), other.size());
          for (int i = 0; i < 100 && !closing; ++i)   // then quiet, bounded
            std::this_thread::sleep_for(10ms);
          sink.done();
          return true;
        });
      });
      server.start();
    }
    ~echo_server() { closing = true; }
  };
  auto run = [](int subscribers, bool skip, bool event_first = false) {
    echo_server es{event_first};
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor a{sys};
    caf::scoped_actor b{sys};
    connection_config cc;
    cc.server = es.server.url();
    auto transport = spawn_http_backend(sys, cc).transport;
    watch(a, transport, key, 5s);
    if (subscribers == 2)
      watch(b, transport, key, 5s);
    lease l;
    l.name = key.name;
    l.ns = key.ns;
    l.resource_version = "8";
    l.spec.holder_identity = "me";
    l.skip_watch_echo = skip;
    lease_reply r;
    a->request(transport, 5s, update_lease_atom::value, l)
      .receive([&](lease_reply& x) { r = std::move(x); }, [](caf::error&) {});
    CHECK(r.ok());
    std::vector<std::vector<std::string>> seen(subscribers);
    for (int i = 0; i < subscribers; ++i)
      for (auto& e : collect(i == 0 ? a : b, skip && subscribers == 1 ? 2 : 3, 120))
        seen[i].push_back(show(e));
    caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
    return seen;
  };
  using v = std::vector<std::string>;
  SUBCASE("the writer alone follows the Lease: its renew's event is dropped, the other writer's delivered") {
    auto seen = run(1, true);
    CHECK(seen[0] == v{"up", "record 10 other"});
  }
  SUBCASE("the event comes before the renew's answer: still dropped (the stream waits for the "
          "renew in flight)") {
    auto seen = run(1, true, true);
    CHECK(seen[0] == v{"up", "record 10 other"});
  }
  SUBCASE("a renew that did not ask gets its event") {
    auto seen = run(1, false);
    CHECK(seen[0] == v{"up", "record 9 me", "record 10 other"});
  }
  SUBCASE("two subscribers follow the Lease: both get every event") {
    auto seen = run(2, true);
    CHECK(seen[0] == v{"up", "record 9 me", "record 10 other"});
    CHECK(seen[1] == v{"up", "record 9 me", "record 10 other"});
  }
}
