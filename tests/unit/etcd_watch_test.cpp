// The etcd watch (transport/etcd_transport.hpp) against a fake etcd JSON
// gateway on loopback that plays one scripted answer per POST /v3/watch:
// PUT and DELETE events, resume after the last revision, a compacted start
// revision (re-read the key), malformed messages, a gateway error, a
// truncated line, a quiet stream (re-read the key), a cut connection, and a dead first
// endpoint. Every fault closes the stream with a `down` naming the request
// (never a crash), and the next stream resumes.
#include <doctest/doctest.h>

#include <deque>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/test_support.hpp"
#include "tests/unit/watch_support.hpp"
#include "transport/etcd_transport.hpp"
#include "transport/kube_config.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using leasehold::test::collect;
using leasehold::test::next_script;
using leasehold::test::play;
using leasehold::test::script;
using json = nlohmann::json;

namespace {

const lease_key key{"ns1", "lock"};

std::string value_of(const std::string& holder) {
  return encode_base64(json{{"holderIdentity", holder}, {"leaseDurationSeconds", 3}}.dump());
}

std::string kv(int create, int mod, const std::string& holder) {
  return json{{"key", encode_base64("/lh/ns1/lock")},
              {"create_revision", std::to_string(create)},
              {"mod_revision", std::to_string(mod)},
              {"version", "1"},
              {"value", value_of(holder)}}
    .dump();
}

const std::string created = R"({"result":{"header":{"revision":"4"},"created":true}})"
                            "\n";

/// A PUT event as the gateway writes it: no "type" (PUT is the default enum 0).
std::string put(int create, int mod, const std::string& holder) {
  return R"({"result":{"header":{"revision":")" + std::to_string(mod) + R"("},"events":[{"kv":)"
         + kv(create, mod, holder) + "}]}}\n";
}

std::string del(int mod) {
  return R"({"result":{"header":{"revision":")" + std::to_string(mod)
         + R"("},"events":[{"type":"DELETE","kv":{"key":"L2xoL25zMS9sb2Nr","mod_revision":")"
         + std::to_string(mod) + "\"}}]}}\n";
}


struct fake_gateway {
  test::loopback_server<> server;
  std::mutex mx;
  std::deque<script> scripts;
  std::vector<std::string> starts;   // start_revision of each watch ("-": none)
  int ranges = 0;
  std::atomic<bool> closing{false};

  fake_gateway() {
    server.http().Post("/v3/kv/range", [this](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> g(mx);
        ++ranges;
      }
      res.set_content(R"({"header":{"revision":"12"},"kvs":[)" + kv(10, 10, "B") + "],\"count\":\"1\"}",
                      "application/json");
    });
    server.http().Post("/v3/watch", [this](const httplib::Request& req, httplib::Response& res) {
      script s;
      {
        std::lock_guard<std::mutex> g(mx);
        auto body = json::parse(req.body, nullptr, false);
        auto& cr = body["create_request"];
        CHECK(cr["key"] == encode_base64("/lh/ns1/lock"));
        CHECK(cr["progress_notify"] == true);
        starts.push_back(cr.contains("start_revision") ? cr["start_revision"].get<std::string>()
                                                       : "-");
        s = next_script(scripts, script{{created}, true});
      }
      play(res, s, closing);
    });
    server.start();
  }
  ~fake_gateway() { closing = true; }
};

std::string show(const lease_watch_event& e) {
  switch (e.what) {
    case lease_watch_event::kind::up: return "up";
    case lease_watch_event::kind::down: return "down: " + e.reason;
    case lease_watch_event::kind::deleted: return "deleted";
    case lease_watch_event::kind::record:
      return "record " + e.record->resource_version + " term "
             + std::to_string(e.record->spec.lease_transitions) + " "
             + e.record->spec.holder_identity;
  }
  return "?";
}

} // namespace

TEST_CASE("etcd watch messages: PUT (type omitted), DELETE, progress, cancel, error; bad ones named") {
  auto p = parse_etcd_watch_line(put(3, 5, "A"), key);
  REQUIRE_MESSAGE(p.ok(), p.error);
  REQUIRE(p.value->events.size() == 1);
  CHECK(!p.value->events[0].deleted);
  CHECK(p.value->events[0].mod_revision == 5);
  CHECK(p.value->events[0].record->spec.lease_transitions == 3);   // term = create_revision
  CHECK(p.value->events[0].record->resource_version == "5");       // = mod_revision
  CHECK(p.value->events[0].record->spec.holder_identity == "A");
  CHECK(p.value->events[0].record->name == "lock");

  auto d = parse_etcd_watch_line(del(6), key);
  REQUIRE_MESSAGE(d.ok(), d.error);
  CHECK(d.value->events[0].deleted);
  CHECK(d.value->events[0].mod_revision == 6);

  auto c = parse_etcd_watch_line(created, key);
  REQUIRE(c.ok());
  CHECK(c.value->created);
  CHECK(c.value->events.empty());

  auto progress = parse_etcd_watch_line(R"({"result":{"header":{"revision":"40"}}})", key);
  REQUIRE(progress.ok());
  CHECK(progress.value->events.empty());

  auto compacted = parse_etcd_watch_line(
    R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"6"}})", key);
  REQUIRE(compacted.ok());
  CHECK(compacted.value->canceled);
  CHECK(compacted.value->compact_revision == 6);

  auto err = parse_etcd_watch_line(
    R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})",
    key);
  REQUIRE(err.ok());
  CHECK(err.value->error);
  CHECK(err.value->grpc_code == 14);
  CHECK(err.value->message == "etcdserver: no leader");

  CHECK(parse_etcd_watch_line("{oops", key).error == "not a JSON object");
  CHECK(parse_etcd_watch_line("[1]", key).error == "not a JSON object");
  CHECK(parse_etcd_watch_line(R"({"header":{}})", key).error == "result: expected an object");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":{}}})", key).error
        == "result.events: expected an array");
  CHECK(parse_etcd_watch_line(R"({"result":{"created":"yes"}})", key).error
        == "result.created: expected a boolean");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"RENAMED","kv":{}}]}})", key).error
        == "result.events[0].type: expected PUT or DELETE (is \"RENAMED\")");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"PUT"}]}})", key).error
        == "result.events[0].kv: expected an object");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"kv":{"mod_revision":"3"}}]}})", key).error
        == "result.events[0].kv.create_revision: expected a positive int64");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"DELETE","kv":{}}]}})", key).error
        == "result.events[0].kv.mod_revision: expected a positive int64");
  CHECK(parse_etcd_watch_line(
          R"({"result":{"events":[{"kv":{"create_revision":"2","mod_revision":"3","value":"!!"}}]}})",
          key)
          .error
        == "result.events[0].kv.value: invalid base64");
  CHECK(parse_etcd_watch_line(
          R"({"result":{"events":[{"kv":{"create_revision":"2","mod_revision":"3","value":")"
            + encode_base64("not json") + "\"}}]}}",
          key)
          .error
        == "result.events[0].kv.value: not a JSON object");
}

TEST_CASE("the etcd watch resumes, re-reads after compaction, fails over and survives every stream fault") {
  fake_gateway gw;
  {
    std::lock_guard<std::mutex> g(gw.mx);
    // 1: a PUT, a DELETE, then a malformed line.
    gw.scripts.push_back({{created, put(5, 5, "A"), del(6), "{oops\n"}});
    // 2: resumes at 7, which was compacted away: the key is read again.
    gw.scripts.push_back({{created, R"({"result":{"header":{},"canceled":true,"compact_revision":"9"}})"
                                    "\n"}});
    // 3: resumes after the read (revision 12); a PUT whose value is no record.
    gw.scripts.push_back({{created, R"({"result":{"events":[{"kv":{"create_revision":"13","mod_revision":"13","value":")"
                                      + encode_base64("[]") + "\"}}]}}\n"}});
    // 4: the gateway reports a failed stream.
    gw.scripts.push_back({{created, R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})"
                                    "\n"}});
    // 5: a message cut off by the end of the stream.
    gw.scripts.push_back({{created, R"({"result":{"events":[{"kv)"}});
    // 6: quiet past the idle timeout (a healthy leader's key is silent on
    // etcd): the key is read again, without going down.
    gw.scripts.push_back({{created}, true});
    // 7: the connection drops mid-stream.
    gw.scripts.push_back({{created}, false, true});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  etcd_config ec;
  ec.endpoints = {"http://127.0.0.1:1", gw.server.url()};   // the first is dead
  ec.prefix = "/lh";
  ec.http.connect_timeout = 200ms;
  auto transport = spawn_etcd_transport(sys, ec);
  lease_watch_request req;
  req.lease = key;
  req.resource_version = "4";
  req.idle_timeout = 300ms;
  req.subscriber = caf::actor{self.ptr()};
  self->send(transport, watch_lease_atom::value, req);

  std::vector<std::string> seen;
  for (auto& e : collect(self, 16, 240))
    seen.push_back(show(e));
  for (auto& s : seen)
    MESSAGE(s);
  REQUIRE(seen.size() >= 16);
  // The dead first endpoint: the first state is always said (down, naming
  // it), then the watch failed over.
  CHECK(seen[0].find("down: watch POST /v3/watch") == 0);
  CHECK(seen[0].find("127.0.0.1:1)") != std::string::npos);
  seen.erase(seen.begin());
  CHECK(seen[0] == "up");
  CHECK(seen[1] == "record 5 term 5 A");
  CHECK(seen[2] == "deleted");
  CHECK(seen[3].find("down: watch POST /v3/watch") == 0);
  CHECK(seen[3].find("malformed watch message: not a JSON object") != std::string::npos);
  CHECK(seen[4] == "up");                                  // 2: compacted
  CHECK(seen[5] == "record 10 term 10 B");                 // the key as read again
  CHECK(seen[6].find("down: watch POST /v3/watch") == 0);   // 3
  CHECK(seen[6].find("result.events[0].kv.value: not a JSON object") != std::string::npos);
  CHECK(seen[7] == "up");                                  // 4
  CHECK(seen[8].find("watch error: etcdserver: no leader") != std::string::npos);
  CHECK(seen[9] == "up");                                 // 5
  // A member lost under a half-written line is a disconnected member, named
  // (issue 21, item 12), not a malformed body.
  CHECK(seen[10].find("disconnected: the server closed the watch stream inside an event line "
                      "(endpoint http://127.0.0.1:")
        != std::string::npos);
  CHECK(seen[10].find("malformed") == std::string::npos);
  CHECK(seen[11] == "up");                                 // 6: quiet, no down
  CHECK(seen[12] == "record 10 term 10 B");                // read again
  CHECK(seen[13].find("watch stream broken after") != std::string::npos);   // 7
  CHECK(seen[14] == "up");                                 // 8: the last, quiet stream
  {
    std::lock_guard<std::mutex> g(gw.mx);
    REQUIRE(gw.starts.size() >= 8);
    CHECK(gw.starts[0] == "5");    // after the version the subscriber knows
    CHECK(gw.starts[1] == "7");    // after the last delivered event
    CHECK(gw.starts[2] == "13");   // after the read's header.revision (12)
    for (std::size_t i = 3; i < 8; ++i)
      CHECK(gw.starts[i] == "13");
    CHECK(gw.ranges >= 2);   // after the compaction and after the quiet stream
  }
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}
