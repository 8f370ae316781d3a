// The etcd watch (transport/etcd/etcd_watch.hpp) against a fake etcd JSON
// gateway on loopback that plays one scripted answer per POST /v3/watch and
// per range of the namespace: one stream per namespace shared by every
// lease in it (the gateway sees one watch however many leases), PUT and
// DELETE events demultiplexed by key, resume after the last revision, a
// compacted start revision (read every key again: every subscriber whose
// key changed hears it), malformed messages, a gateway error, a truncated
// line, a quiet stream (read again, no down), a cut connection (down and up
// to every subscriber), a dead first endpoint, and a subscriber joining a
// running stream (told its key's state at once).
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/test_support.hpp"
#include "tests/unit/watch_support.hpp"
#include "transport/base64.hpp"
#include "transport/etcd/etcd_transport.hpp"
#include "transport/etcd/etcd_txn_reads.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using leasehold::test::collect;
using leasehold::test::next_script;
using leasehold::test::play;
using leasehold::test::script;
using json = nlohmann::json;

namespace {

const etcd_scope scope{"/lh", "ns1"};

std::string value_of(const std::string& holder) {
  return encode_base64(json{{"holderIdentity", holder}, {"leaseDurationSeconds", 3}}.dump());
}

std::string kv(int create, int mod, const std::string& holder, const std::string& name = "lock") {
  return json{{"key", encode_base64("/lh/ns1/" + name)},
              {"create_revision", std::to_string(create)},
              {"mod_revision", std::to_string(mod)},
              {"version", "1"},
              {"value", value_of(holder)}}
    .dump();
}

const std::string created = R"({"result":{"header":{"revision":"4"},"created":true}})"
                            "\n";

/// A PUT event as the gateway writes it: no "type" (PUT is the default enum 0).
std::string put(int create, int mod, const std::string& holder, const std::string& name = "lock") {
  return R"({"result":{"header":{"revision":")" + std::to_string(mod) + R"("},"events":[{"kv":)"
         + kv(create, mod, holder, name) + "}]}}\n";
}

std::string del(int mod, const std::string& name = "lock") {
  return R"({"result":{"header":{"revision":")" + std::to_string(mod)
         + R"("},"events":[{"type":"DELETE","kv":{"key":")" + encode_base64("/lh/ns1/" + name)
         + R"(","mod_revision":")" + std::to_string(mod) + "\"}}]}}\n";
}

const std::string compacted = R"({"result":{"header":{},"canceled":true,"compact_revision":"9"}})"
                              "\n";

/// A range reply: the store at `revision` holding `kvs`.
std::string range(int revision, const std::vector<std::string>& kvs) {
  std::string out = R"({"header":{"revision":")" + std::to_string(revision) + R"("},"kvs":[)";
  for (std::size_t i = 0; i < kvs.size(); ++i)
    out += (i ? "," : "") + kvs[i];
  return out + "],\"count\":\"" + std::to_string(kvs.size()) + "\"}";
}

struct fake_gateway {
  test::loopback_server<> server;
  std::mutex mx;
  std::deque<script> scripts;
  std::deque<std::string> ranges_left;   // one answer per range; the last one repeats
  std::string last_range = range(12, {kv(10, 10, "B")});
  std::vector<std::string> starts;   // start_revision of each watch ("-": none)
  int ranges = 0;   // reads of the whole namespace
  int checks = 0;   // a quiet stream's checks (etcd_client::changed_since)
  std::chrono::milliseconds range_delay{0};   // before a range answers (subscribers join meanwhile)
  std::atomic<bool> closing{false};

  fake_gateway() {
    server.http().Post("/v3/kv/range", [this](const httplib::Request& req, httplib::Response& res) {
      std::string body;
      {
        std::lock_guard<std::mutex> g(mx);
        auto r = json::parse(req.body, nullptr, false);
        // The whole namespace, in one range.
        CHECK(r["key"] == encode_base64("/lh/ns1/"));
        CHECK(r["range_end"] == encode_base64("/lh/ns10"));
        if (r.contains("min_mod_revision")) {
          // As etcd: the count of every key, then only those written at or
          // after min_mod_revision, keys only, at most `limit`.
          ++checks;
          CHECK(r["keys_only"] == true);
          CHECK(r["limit"] == "1");
          auto st = json::parse(last_range);
          auto min = std::stoll(r["min_mod_revision"].get<std::string>());
          json kvs = json::array();
          for (auto& kv : st["kvs"])
            if (std::stoll(kv["mod_revision"].get<std::string>()) >= min && kvs.empty())
              kvs.push_back({{"key", kv["key"]}, {"mod_revision", kv["mod_revision"]}});
          st["kvs"] = kvs;
          res.set_content(st.dump(), "application/json");
          return;
        }
        ++ranges;
        if (!ranges_left.empty()) {
          last_range = ranges_left.front();
          ranges_left.pop_front();
        }
        body = last_range;
      }
      std::this_thread::sleep_for(range_delay);
      res.set_content(body, "application/json");
    });
    server.http().Post("/v3/watch", [this](const httplib::Request& req, httplib::Response& res) {
      script s;
      {
        std::lock_guard<std::mutex> g(mx);
        auto body = json::parse(req.body, nullptr, false);
        auto& cr = body["create_request"];
        CHECK(cr["key"] == encode_base64("/lh/ns1/"));
        CHECK(cr["range_end"] == encode_base64("/lh/ns10"));
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

  std::size_t watches() {
    std::lock_guard<std::mutex> g(mx);
    return starts.size();
  }
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

std::vector<std::string> shown(caf::scoped_actor& self, std::size_t n, int rounds = 200) {
  std::vector<std::string> out;
  for (auto& e : collect(self, n, rounds))
    out.push_back(show(e));
  return out;
}

etcd_config gateway_config(const fake_gateway& gw) {
  etcd_config ec;
  ec.endpoints = {gw.server.url()};
  ec.prefix = "/lh";
  ec.http.connect_timeout = 200ms;
  return ec;
}

/// `self` follows lease `name` of ns1 through `transport`.
void watch(caf::scoped_actor& self, const lease_transport_actor& transport, const std::string& name,
           caf::timespan idle, const std::string& rv = "") {
  lease_watch_request req;
  req.lease = {"ns1", name};
  req.resource_version = rv;
  req.idle_timeout = idle;
  req.subscriber = caf::actor_cast<lease_watch_subscriber>(self.ptr());   // a scoped_actor: unchecked
  self->send(transport, watch_lease_atom::value, req);
}

/// `n` subscribers, the i-th following lease-i of ns1.
std::vector<std::unique_ptr<caf::scoped_actor>> subscribers(caf::actor_system& sys,
                                                            const lease_transport_actor& transport,
                                                            int n) {
  std::vector<std::unique_ptr<caf::scoped_actor>> subs;
  for (int i = 0; i < n; ++i) {
    subs.push_back(std::make_unique<caf::scoped_actor>(sys));
    watch(*subs.back(), transport, "lease-" + std::to_string(i), 5s);
  }
  return subs;
}

} // namespace

TEST_CASE("etcd watch messages: PUT (type omitted), DELETE, progress, cancel, error; bad ones named") {
  auto p = parse_etcd_watch_line(put(3, 5, "A"), scope);
  REQUIRE_MESSAGE(p.ok(), p.error);
  REQUIRE(p.value->events.size() == 1);
  CHECK(!p.value->events[0].deleted);
  CHECK(p.value->events[0].mod_revision == 5);
  CHECK(p.value->events[0].record->spec.lease_transitions == 3);   // term = create_revision
  CHECK(p.value->events[0].record->resource_version == "5");       // = mod_revision
  CHECK(p.value->events[0].record->spec.holder_identity == "A");
  CHECK(p.value->events[0].record->name == "lock");
  CHECK(p.value->events[0].name == "lock");
  CHECK(p.value->events[0].error.empty());

  auto d = parse_etcd_watch_line(del(6), scope);
  REQUIRE_MESSAGE(d.ok(), d.error);
  CHECK(d.value->events[0].deleted);
  CHECK(d.value->events[0].mod_revision == 6);
  CHECK(d.value->events[0].name == "lock");

  auto c = parse_etcd_watch_line(created, scope);
  REQUIRE(c.ok());
  CHECK(c.value->created);
  CHECK(c.value->events.empty());

  auto progress = parse_etcd_watch_line(R"({"result":{"header":{"revision":"40"}}})", scope);
  REQUIRE(progress.ok());
  CHECK(progress.value->events.empty());

  auto compacted = parse_etcd_watch_line(
    R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"6"}})", scope);
  REQUIRE(compacted.ok());
  CHECK(compacted.value->canceled);
  CHECK(compacted.value->compact_revision == 6);

  auto err = parse_etcd_watch_line(
    R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})",
    scope);
  REQUIRE(err.ok());
  CHECK(err.value->error);
  CHECK(err.value->grpc_code == 14);
  CHECK(err.value->message == "etcdserver: no leader");

  CHECK(parse_etcd_watch_line("{oops", scope).error == "not a JSON object");
  CHECK(parse_etcd_watch_line("[1]", scope).error == "not a JSON object");
  CHECK(parse_etcd_watch_line(R"({"header":{}})", scope).error == "result: expected an object");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":{}}})", scope).error
        == "result.events: expected an array");
  CHECK(parse_etcd_watch_line(R"({"result":{"created":"yes"}})", scope).error
        == "result.created: expected a boolean");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"RENAMED","kv":{}}]}})", scope).error
        == "result.events[0].type: expected PUT or DELETE (is \"RENAMED\")");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"PUT"}]}})", scope).error
        == "result.events[0].kv: expected an object");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"kv":{"mod_revision":"3"}}]}})", scope).error
        == "result.events[0].kv.create_revision: expected a positive int64");
  CHECK(parse_etcd_watch_line(R"({"result":{"events":[{"type":"DELETE","kv":{}}]}})", scope).error
        == "result.events[0].kv.mod_revision: expected a positive int64");
  CHECK(parse_etcd_watch_line(
          R"({"result":{"events":[{"kv":{"create_revision":"2","mod_revision":"3","value":"!!"}}]}})",
          scope)
          .error
        == "result.events[0].kv.value: invalid base64");
  // A value that is no lease record is the event's fault, not the line's:
  // the watcher decides whether anybody follows that key.
  auto foreign = parse_etcd_watch_line(
    R"({"result":{"events":[{"kv":{"key":")" + encode_base64("/lh/ns1/notes")
      + R"(","create_revision":"2","mod_revision":"3","value":")" + encode_base64("not json")
      + "\"}}]}}",
    scope);
  REQUIRE_MESSAGE(foreign.ok(), foreign.error);
  CHECK(foreign.value->events[0].name == "notes");
  CHECK(!foreign.value->events[0].record);
  CHECK(foreign.value->events[0].error == "result.events[0].kv.value: not a JSON object");
  CHECK(parse_etcd_watch_line(
          R"({"result":{"events":[{"kv":{"key":")" + encode_base64("/lh/ns2/lock")
            + R"(","create_revision":"2","mod_revision":"3"}}]}})",
          scope)
          .error
        == "result.events[0].kv.key: expected a key under /lh/ns1/ (is \"/lh/ns2/lock\")");
}

TEST_CASE("an etcd watch's kept record gives back every field to_lease read, preferredHolder and strategy too, in 80 bytes of spec") {
  // Bytes per key: the watch keeps one record per key of the namespace; it kept
  // a whole lease_spec (144 bytes, with a renewTime an etcd value never has).
  etcd_kv k{"/lh/ns1/lock", 7, 9, "694d9a0e1c2b3d4f", ""};
  k.value = R"({"holderIdentity":"A","leaseDurationSeconds":15,"acquireTime":"2026-12-05T08:00:00.000000Z","preferredHolder":"B","strategy":"OldestEmulationVersion"})";
  auto full = to_lease({"ns1", "lock"}, k);
  REQUIRE_MESSAGE(full.ok(), full.error);
  auto rec = etcd_record::of(*full.value);
  auto back = rec.to_lease({"ns1", "lock"});
  CHECK(back.spec == full.value->spec);
  CHECK(back.spec.preferred_holder == "B");
  CHECK(back.spec.strategy == "OldestEmulationVersion");
  CHECK(back.spec.lease_transitions == 7);
  CHECK(back.resource_version == "9");
  CHECK(back.etcd_lease_id == "694d9a0e1c2b3d4f");
  k.value = R"({"holderIdentity":"A","leaseDurationSeconds":15})";
  auto plain = etcd_record::of(*to_lease({"ns1", "lock"}, k).value);
  CHECK(!plain.rare);   // nothing out of line for the usual record
  CHECK(plain.to_lease({"ns1", "lock"}).spec == to_lease({"ns1", "lock"}, k).value->spec);
  CHECK(sizeof(etcd_record) - 2 * sizeof(std::string) <= 96);
}

namespace {

/// to_lease's reading of a record's value by nlohmann's document alone (as
/// it read before its fast path): the reference the fast path must match.
leasehold::parse_result<leasehold::lease_spec> document_spec(const std::string& value, int transitions) {
  leasehold::parse_result<leasehold::lease_spec> out;
  auto v = nlohmann::json::parse(value, nullptr, false);
  if (!v.is_object()) {
    out.error = "kv.value: not a JSON object";
    return out;
  }
  leasehold::lease_spec spec;
  spec.lease_transitions = transitions;
  if (auto h = v.find("holderIdentity"); h != v.end() && h->is_string())
    spec.holder_identity = h->get<std::string>();
  if (auto d = v.find("leaseDurationSeconds"); d != v.end() && d->is_number_integer())
    spec.lease_duration_seconds = d->get<int>();
  if (auto a = v.find("acquireTime"); a != v.end() && a->is_string())
    spec.acquire_time = leasehold::parse_micro_time(a->get<std::string>());
  if (auto f = v.find("preferredHolder"); f != v.end() && f->is_string())
    spec.preferred_holder = f->get<std::string>();
  if (auto f = v.find("strategy"); f != v.end() && f->is_string())
    spec.strategy = f->get<std::string>();
  out.value = spec;
  return out;
}

} // namespace

TEST_CASE("an etcd record's value read in place is what nlohmann's document reads, value or error, over 40 values") {
  // CPU per key: to_lease reads a plain value with simdjson in place; anything it
  // does not handle (an escape, a byte >= 0x80, a mistyped or repeated
  // member, invalid JSON) goes to the document, whose answer stands.
  const std::vector<std::string> values = {
    R"({"holderIdentity":"A","leaseDurationSeconds":15,"acquireTime":"2026-12-05T08:00:00.000000Z"})",
    R"({"holderIdentity":"","leaseDurationSeconds":15})",
    R"({})",
    R"( { "holderIdentity" : "A" , "leaseDurationSeconds" : 15 } )",
    R"({"holderIdentity":"A","preferredHolder":"B","strategy":"OldestEmulationVersion"})",
    R"({"holderIdentity":"A","other":{"x":[1,2,{"y":null}]},"n":1.5e3,"t":true})",
    R"({"holderIdentity":"A\u0042"})",
    R"({"holderIdentity":"A\"B"})",
    "{\"holderIdentity\":\"\xc3\xa9\"}",
    "{\"holderIdentity\":\"A\",\"x\":\"\xff\"}",
    R"({"holderIdentity":5})",
    R"({"holderIdentity":null,"leaseDurationSeconds":15})",
    R"({"holderIdentity":["A"]})",
    R"({"leaseDurationSeconds":"15"})",
    R"({"leaseDurationSeconds":15.0})",
    R"({"leaseDurationSeconds":1e1})",
    R"({"leaseDurationSeconds":-3})",
    R"({"leaseDurationSeconds":-0})",
    R"({"leaseDurationSeconds":2147483647})",
    R"({"leaseDurationSeconds":2147483648})",
    R"({"leaseDurationSeconds":99999999999999999999999})",
    R"({"leaseDurationSeconds":015})",
    R"({"acquireTime":"not a time"})",
    R"({"acquireTime":"2026-12-05T08:00:00Z"})",
    R"({"acquireTime":"2026-12-05T08:00:00.123+02:00"})",
    R"({"acquireTime":7})",
    R"({"holderIdentity":"A","holderIdentity":"B"})",
    R"({"holderIdentity":"A","holderIdentity":7})",
    R"({"holder\u0049dentity":"A"})",
    R"({"holderIdentity":"A"} x)",
    R"({"holderIdentity":"A",})",
    R"({"holderIdentity":"A")",
    R"({"holderIdentity":"A"}})",
    R"(["holderIdentity","A"])",
    R"("A")",
    R"(null)",
    "",
    "   ",
    R"({"holderIdentity":"A","deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})",
    "{\"holderIdentity\":\"A\tB\"}",   // a raw tab: invalid JSON
  };
  for (auto& value : values) {
    CAPTURE(value);
    leasehold::etcd_kv k{"/lh/ns1/lock", 7, 9, "694d9a0e1c2b3d4f", value};
    auto got = leasehold::to_lease({"ns1", "lock"}, k, "kv");
    auto want = document_spec(value, 7);
    REQUIRE(got.ok() == want.ok());
    if (!want.ok()) {
      CHECK(got.error == want.error);
      continue;
    }
    CHECK(got.value->spec == *want.value);
    CHECK(got.value->spec.holder_identity == want.value->holder_identity);
    CHECK(got.value->spec.lease_duration_seconds == want.value->lease_duration_seconds);
    CHECK(got.value->spec.acquire_time == want.value->acquire_time);
    CHECK(got.value->resource_version == "9");
    CHECK(got.value->name == "lock");
  }
}

TEST_CASE("a txn answer of ranges read in place is what nlohmann's document reads, per key, "
          "value or error, over 48 answers") {
  // CPU per renewal: a batch of renews reads its txn answer in place (simdjson);
  // what it does not take (a repeated member, an escape, another
  // type, a count that is not the batch's, invalid JSON) goes to the
  // document, whose answer stands. The first answer is etcd 3.4's own.
  const std::string real =
    R"({"header":{"cluster_id":"3844590255946877806","member_id":"8010254395935415089",)"
    R"("revision":"2","raft_term":"2"},"succeeded":true,"responses":[{"response_range":)"
    R"({"header":{"revision":"2"},"kvs":[{"key":"L2xoL25zMS9h","create_revision":"2",)"
    R"("mod_revision":"2","version":"1","value":)"
    R"("eyJob2xkZXJJZGVudGl0eSI6IkEiLCJsZWFzZUR1cmF0aW9uU2Vjb25kcyI6MTV9",)"
    R"("lease":"6571211760595898886"}],"count":"1"}},{"response_range":{"header":{"revision":"2"}}}]})";
  auto with = [&](const std::string& from, const std::string& to) {
    auto at = real.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    return real.substr(0, at) + to + real.substr(at + from.size());
  };
  const std::string kv_a = R"("kvs":[{"key":"L2xoL25zMS9h",)";
  const std::string rr_b = R"({"response_range":{"header":{"revision":"2"}}})";
  const std::vector<std::pair<std::string, bool>> answers = {   // answer, read in place
    {real, true},
    {json::parse(real).dump(2), true},
    {with(R"("revision":"2","raft)", R"("revision":2,"raft)"), true},
    {with(R"("create_revision":"2")", R"("create_revision":2)"), true},
    {with(R"("lease":"6571211760595898886")", R"("lease":6571211760595898886)"), true},
    {with(R"(,"lease":"6571211760595898886")", ""), true},
    {with(R"("lease":"6571211760595898886")", R"("lease":"0")"), true},
    {with(R"("lease":"6571211760595898886")", R"("lease":true)"), false},
    {with(R"("lease":"6571211760595898886")", R"("lease":9223372036854775808)"), false},
    {with(R"("mod_revision":"2")", R"("mod_revision":"9223372036854775807")"), true},
    {with(R"("mod_revision":"2")", R"("mod_revision":"9223372036854775808")"), false},
    {with(kv_a, R"("kvs":[],"x":[{"key":"L2xoL25zMS9h",)"), true},
    {with(R"("header":{"revision":"2"},"kvs")", R"("kvs")"), true},
    {with(R"(,"succeeded":true)", R"(,"succeeded":true,"more":{"a":[1,2.5e3,null,"\u00e9"]})"), true},
    {with(R"("count":"1")", R"("count":"2"},{"key":"L2xoL25zMS9i","create_revision":"3")"
                            R"(,"mod_revision":"3","value":"e30="}],"more":true)"),
     false},   // a broken shape: the document says so
    {with(R"("lease":"6571211760595898886"}])", R"("lease":"6571211760595898886"},)"
                                                R"({"key":"L2xoL25zMS9i","create_revision":"3","mod_revision":"3"}])"),
     true},
    {with(R"({"header":{"cluster_id")", R"({"x":{"cluster_id")"), true},   // no header at all
    {with(R"("revision":"2","raft)", R"("revision":"x","raft)"), false},
    {with(R"("revision":"2","raft)", R"("revision":"-2","raft)"), false},
    {with(R"("revision":"2","raft)", R"("revision":"99999999999999999999","raft)"), false},
    {with(R"("revision":"2","raft)", R"("revision":2.0,"raft)"), false},
    {with(R"("revision":"2","raft)", R"("revision":"0","raft)"), true},
    {with(R"("create_revision":"2")", R"("create_revision":"0")"), false},
    {with(R"("mod_revision":"2",)", ""), false},
    {with(R"("mod_revision":"2")", R"("mod_revision":" 2")"), false},
    {with(R"("key":"L2xoL25zMS9h")", R"("key":"!!")"), false},
    {with(R"("value":"eyJ)", R"("value":"#eyJ)"), false},
    {with(R"("value":"eyJob2xkZXJJZGVudGl0eSI6IkEiLCJsZWFzZUR1cmF0aW9uU2Vjb25kcyI6MTV9")",
          R"("value":"bm90IGpzb24=")"),
     true},   // the value's own error: to_lease judges it on either path
    {with(R"("key":"L2xoL25zMS9h")", R"("key":"\u004c2xoL25zMS9h")"), false},
    {with(R"("key":"L2xoL25zMS9h")", R"("key":7)"), false},
    {with(kv_a, R"("kvs":[],)" + kv_a), false},
    {with(R"({"header":{"revision":"2"},"kvs")", R"({"header":{"revision":"1"},"header":{"revision":"2"},"kvs")"), false},
    {with(R"("create_revision":"2")", R"("create_revision":"2","create_revision":"3")"), false},
    {with(rr_b, R"({"response_range":{},"response_range":{}})"), false},
    {with(rr_b, R"({"other":{}})"), false},
    {with(rr_b, R"({"response_range":null})"), false},
    {with(rr_b, R"(7)"), false},
    {with("," + rr_b, ""), false},   // one range answer for two keys
    {with(rr_b, rr_b + "," + rr_b), false},
    {with(R"("kvs":[)", R"("kvs":null,"k":[)"), false},
    {with(R"("kvs":[{"key")", R"("kvs":{"a":[{"key")") + "", false},
    {with(R"("responses":[)", R"("responses":{"a":[)"), false},
    {with(R"("raft_term":"2")", "\"raft_term\":\"\xc3\xa9\""), false},
    {real.substr(0, real.size() - 1), false},
    {real + "x", false},
    {"[]", false},
    {"", false},
    {R"({"header":{"revision":"2"}})", false},
  };
  const lease_key ks[2] = {{"ns1", "a"}, {"ns1", "b"}};
  auto where = [](std::size_t i) { return "range " + std::to_string(i + 1); };
  for (auto& [body, plain] : answers) {
    CAPTURE(body);
    etcd_ranges_read read;
    CHECK(read_ranges_in_place(body, 2, read) == plain);
    auto got = etcd_range_answers(body, ks, 2, where);
    auto want = etcd_range_answers(body, ks, 2, where, "", false);
    REQUIRE(got.size() == 2);
    REQUIRE(want.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      CAPTURE(i);
      REQUIRE(got[i].ok() == want[i].ok());
      if (!want[i].ok()) {
        CHECK(got[i].error.kind == want[i].error.kind);
        CHECK(got[i].error.path == want[i].error.path);
        CHECK(got[i].error.reason == want[i].error.reason);
        continue;
      }
      auto& g = *got[i].value;
      auto& w = *want[i].value;
      CHECK(g.revision == w.revision);
      REQUIRE(g.kv.has_value() == w.kv.has_value());
      REQUIRE(g.record.has_value() == w.record.has_value());
      if (g.kv) {
        CHECK(g.kv->key == w.kv->key);
        CHECK(g.kv->create_revision == w.kv->create_revision);
        CHECK(g.kv->mod_revision == w.kv->mod_revision);
        CHECK(g.kv->lease_id == w.kv->lease_id);
        CHECK(g.kv->value == w.kv->value);
      }
      if (g.record) {
        CHECK(g.record->spec == w.record->spec);
        CHECK(g.record->resource_version == w.record->resource_version);
        CHECK(g.record->etcd_lease_id == w.record->etcd_lease_id);
      }
    }
  }
  // What etcd's own answer says: a held by A in term 2, b absent, both at
  // revision 2.
  auto r = etcd_range_answers(real, ks, 2, where);
  REQUIRE(r[0].ok());
  REQUIRE(r[1].ok());
  REQUIRE(r[0].value->record);
  CHECK(r[0].value->record->spec.holder_identity == "A");
  CHECK(r[0].value->record->spec.lease_transitions == 2);
  CHECK(r[0].value->record->etcd_lease_id == "6571211760595898886");
  CHECK(r[0].value->revision == 2);
  CHECK(!r[1].value->kv);
  CHECK(r[1].value->revision == 2);
  // An answer that is no answer of two ranges names the endpoint that gave
  // it, as a lone range's does, and each key's range.
  const std::string endpoint = "http://127.0.0.1:1";
  for (auto& [body, reason] : std::vector<std::pair<std::string, std::string>>{
         {"[]", "body: not a JSON object (endpoint " + endpoint + ")"},
         {R"({"header":{"revision":"2"}})",
          "responses: expected 2 range answers (endpoint " + endpoint + ")"}}) {
    CAPTURE(body);
    auto bad = etcd_range_answers(body, ks, 2, where, endpoint);
    REQUIRE(bad.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(bad[i].kind() == error_kind::malformed_body);
      CHECK(bad[i].error.path == where(i));
      CHECK(bad[i].error.reason == reason);
    }
  }
}

TEST_CASE("a lone range answer read in place is what nlohmann's document reads, value or error, "
          "over 12 answers") {
  // A renew or read alone (/v3/kv/range) is read as a range of a txn is.
  // The first two answers are etcd 3.4's own.
  const std::string real =
    R"({"header":{"cluster_id":"9373608861870100662","member_id":"9524806226319439328",)"
    R"("revision":"2","raft_term":"2"},"kvs":[{"key":"L2xoL25zMS9h","create_revision":"2",)"
    R"("mod_revision":"2","version":"1","value":)"
    R"("eyJob2xkZXJJZGVudGl0eSI6IkEiLCJsZWFzZUR1cmF0aW9uU2Vjb25kcyI6MTV9",)"
    R"("lease":"8493967327529118726"}],"count":"1"})";
  const std::string absent =
    R"({"header":{"cluster_id":"9373608861870100662","member_id":"9524806226319439328",)"
    R"("revision":"2","raft_term":"2"}})";
  auto with = [&](const std::string& from, const std::string& to) {
    auto at = real.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    return real.substr(0, at) + to + real.substr(at + from.size());
  };
  const std::vector<std::pair<std::string, bool>> answers = {   // answer, read in place
    {real, true},
    {absent, true},
    {json::parse(real).dump(2), true},
    {with(R"("kvs":[{)", R"("kvs":[],"x":[{)"), true},
    {with(R"("lease":"8493967327529118726")", R"("lease":8493967327529118726)"), true},
    {with(R"("create_revision":"2")", R"("create_revision":"0")"), false},
    {with(R"("value":"eyJ)", R"("value":"#eyJ)"), false},
    {with(R"("count":"1")", R"("count":"1","kvs":[])"), false},
    {with(R"("raft_term":"2")", "\"raft_term\":\"\xc3\xa9\""), false},
    {real + ",", false},
    {"[]", false},
    {"", false},
  };
  const lease_key k{"ns1", "a"};
  for (auto& [body, plain] : answers) {
    CAPTURE(body);
    auto got = etcd_range_answer(body, k, "/v3/kv/range", "http://127.0.0.1:1");
    auto want = etcd_range_answer(body, k, "/v3/kv/range", "http://127.0.0.1:1", false);
    // The plain ones are those read in place (as the range of a txn).
    etcd_ranges_read read;
    CHECK(read_ranges_in_place(R"({"responses":[{"response_range":)" + body + "}]}", 1, read)
          == plain);
    REQUIRE(got.ok() == want.ok());
    if (!want.ok()) {
      CHECK(got.error.kind == want.error.kind);
      CHECK(got.error.path == want.error.path);
      CHECK(got.error.reason == want.error.reason);
      continue;
    }
    CHECK(got.value->revision == want.value->revision);
    REQUIRE(got.value->record.has_value() == want.value->record.has_value());
    if (got.value->record) {
      CHECK(got.value->record->spec == want.value->record->spec);
      CHECK(got.value->record->resource_version == want.value->record->resource_version);
      CHECK(got.value->record->etcd_lease_id == want.value->record->etcd_lease_id);
    }
  }
  auto a = etcd_range_answer(real, k, "/v3/kv/range");
  REQUIRE(a.ok());
  REQUIRE(a.value->record);
  CHECK(a.value->record->spec.holder_identity == "A");
  CHECK(a.value->record->etcd_lease_id == "8493967327529118726");
  auto none = etcd_range_answer(absent, k, "/v3/kv/range");
  REQUIRE(none.ok());
  CHECK(!none.value->kv);
  CHECK(none.value->revision == 2);
  auto junk = etcd_range_answer("[]", k, "/v3/kv/range", "http://127.0.0.1:1");
  CHECK(junk.kind() == error_kind::malformed_body);
  CHECK(junk.error.reason == "body: not a JSON object (endpoint http://127.0.0.1:1)");
}

TEST_CASE("an etcd scope: the namespace's keys, its range end, a key's lease name") {
  CHECK(scope.dir() == "/lh/ns1/");
  CHECK(scope.key("lock") == "/lh/ns1/lock");
  CHECK(scope.range_end() == "/lh/ns10");
  CHECK(scope.name_of("/lh/ns1/lock") == std::optional<std::string>("lock"));
  CHECK(!scope.name_of("/lh/ns1/"));
  CHECK(!scope.name_of("/lh/ns11/lock"));
  auto st = parse_scope_range(
    json::parse(range(30, {kv(10, 10, "A", "a"), kv(11, 12, "B", "b"),
                           json{{"key", encode_base64("/lh/ns1/junk")}, {"create_revision", "3"},
                                {"mod_revision", "3"}, {"value", encode_base64("[]")}}.dump()})),
    scope);
  REQUIRE_MESSAGE(st.ok(), st.error);
  CHECK(st.value->revision == 30);
  REQUIRE(st.value->records.size() == 2);   // junk is nobody's lease
  CHECK(st.value->records["b"].holder_identity == "B");
  CHECK(st.value->records["b"].resource_version == "12");
  CHECK(parse_scope_range(json::parse(R"({"kvs":[]})"), scope).error == "header.revision: missing");
  CHECK(parse_scope_range(json::parse(R"({"header":{"revision":"3"},"kvs":[{"create_revision":"x"}]})"),
                          scope)
          .error
        == "kvs[0].create_revision: expected a positive int64");

  // A page of a read with a limit: `more` names where the next page starts
  // (the first key after the page's last one, junk or not).
  auto page = json::parse(range(30, {kv(10, 10, "A", "a"), kv(11, 12, "B", "b")}));
  CHECK(parse_scope_range(page, scope).value->next_key.empty());
  page["more"] = true;
  auto first = parse_scope_range(page, scope);
  REQUIRE_MESSAGE(first.ok(), first.error);
  CHECK(first.value->next_key == std::string("/lh/ns1/b") + '\0');
  page["more"] = "yes";
  CHECK(parse_scope_range(page, scope).error == "more: expected a boolean");
  CHECK(parse_scope_range(json::parse(R"({"header":{"revision":"3"},"more":true})"), scope).error
        == "more: true with no kvs to continue after");
  // Regression: a page whose last key is not past where it began was read
  // again and again (read_scope set an error that nothing checked).
  page["more"] = true;
  CHECK(parse_scope_range(page, scope, "/lh/ns1/c").error
        == "more: the next page would not move past key /lh/ns1/c");
  CHECK(parse_scope_range(page, scope, "/lh/ns1/a").ok());
}

TEST_CASE("the etcd watch resumes, re-reads after compaction, fails over and survives every stream fault") {
  fake_gateway gw;
  {
    std::lock_guard<std::mutex> g(gw.mx);
    // 1: a PUT, a PUT and a bad value of keys nobody follows, a DELETE,
    // then a malformed line.
    gw.scripts.push_back({{created, put(13, 13, "A"), put(14, 14, "X", "other"),
                           R"({"result":{"events":[{"kv":{"key":")" + encode_base64("/lh/ns1/notes")
                             + R"(","create_revision":"15","mod_revision":"15","value":")"
                             + encode_base64("[]") + "\"}}]}}\n",
                           del(16), "{oops\n"}});
    // 2: resumes at 17, which was compacted away: the keys are read again.
    gw.scripts.push_back({{created, compacted}});
    // 3: resumes after the read (revision 12); a PUT of the followed key
    // whose value is no record.
    gw.scripts.push_back({{created, R"({"result":{"events":[{"kv":{"key":")"
                                      + encode_base64("/lh/ns1/lock")
                                      + R"(","create_revision":"13","mod_revision":"13","value":")"
                                      + encode_base64("[]") + "\"}}]}}\n"}});
    // 4: the gateway reports a failed stream.
    gw.scripts.push_back({{created, R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})"
                                    "\n"}});
    // 5: a message cut off by the end of the stream.
    gw.scripts.push_back({{created, R"({"result":{"events":[{"kv)"}});
    // 6: quiet past the idle timeout (a healthy leader's key is silent on
    // etcd): the keys are read again, without going down.
    gw.scripts.push_back({{created}, true});
    // 7: the connection drops mid-stream.
    gw.scripts.push_back({{created}, false, true});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto ec = gateway_config(gw);
  ec.endpoints.insert(ec.endpoints.begin(), "http://127.0.0.1:1");   // the first is dead
  auto transport = spawn_etcd_backend(sys, ec).transport;
  watch(self, transport, "lock", 300ms, "4");

  auto seen = shown(self, 15, 240);
  for (auto& s : seen)
    MESSAGE(s);
  REQUIRE(seen.size() >= 15);
  // The first read fails over from the dead endpoint by itself, and tells
  // the key's state; then the stream opens on the live one.
  CHECK(seen[0] == "record 10 term 10 B");
  CHECK(seen[1] == "up");
  CHECK(seen[2] == "record 13 term 13 A");   // "other" and "notes": nobody follows them
  CHECK(seen[3] == "deleted");
  CHECK(seen[4].find("down: watch POST /v3/watch") == 0);
  CHECK(seen[4].find("malformed watch message: not a JSON object") != std::string::npos);
  CHECK(seen[5] == "up");                                  // 2: compacted
  CHECK(seen[6] == "record 10 term 10 B");                 // the key as read again
  CHECK(seen[7].find("down: watch POST /v3/watch") == 0);   // 3
  CHECK(seen[7].find("result.events[0].kv.value: not a JSON object") != std::string::npos);
  CHECK(seen[8] == "up");                                  // 4
  CHECK(seen[9].find("watch error: etcdserver: no leader") != std::string::npos);
  CHECK(seen[10] == "up");                                 // 5
  // A member lost under a half-written line is a disconnected member, named
  // (the operator sees which member), not a malformed body.
  CHECK(seen[11].find("disconnected: the server closed the watch stream inside an event line "
                      "(endpoint http://127.0.0.1:")
        != std::string::npos);
  CHECK(seen[11].find("malformed") == std::string::npos);
  CHECK(seen[12] == "up");   // 6: quiet, no down; its check finds nothing missed
  CHECK(seen[13].find("watch stream broken after") != std::string::npos);   // 7
  CHECK(seen[14] == "up");                                 // 8: the last, quiet stream
  {
    std::lock_guard<std::mutex> g(gw.mx);
    REQUIRE(gw.starts.size() >= 8);
    CHECK(gw.starts[0] == "13");   // after the first read's header.revision (12)
    CHECK(gw.starts[1] == "17");   // after the last delivered event
    CHECK(gw.starts[2] == "13");   // after the read's header.revision (12)
    for (std::size_t i = 3; i < 8; ++i)
      CHECK(gw.starts[i] == "13");
    CHECK(gw.ranges >= 2);   // first, after the compaction
    CHECK(gw.checks >= 1);   // after the quiet stream
  }
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("a quiet etcd watch checks what it missed without reading values; a write or a delete it missed is read again") {
  // Memory at 10,000 keys: a quiet stream (renews on etcd write
  // nothing) read the whole namespace again every idle timeout, 10,000
  // records beside its own each time, which malloc kept (~0.4 KiB a key).
  fake_gateway gw;
  {
    std::lock_guard<std::mutex> g(gw.mx);
    gw.last_range = range(12, {kv(10, 10, "B"), kv(11, 11, "C", "other")});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto transport = spawn_etcd_backend(sys, gateway_config(gw)).transport;
  watch(self, transport, "lock", 200ms);
  CHECK(shown(self, 2) == std::vector<std::string>{"record 10 term 10 B", "up"});
  // Quiet streams: each idle timeout a check, no read, no down, and the
  // stream resumes where it was.
  CHECK(shown(self, 1, 40).empty());   // 1 s: four idle timeouts
  {
    std::lock_guard<std::mutex> g(gw.mx);
    CHECK(gw.ranges == 1);
    CHECK(gw.checks >= 3);
    for (auto& st : gw.starts)
      CHECK(st == "13");
    // A write the stream never delivered (say, a member that fell behind).
    gw.last_range = range(20, {kv(10, 19, "D"), kv(11, 11, "C", "other")});
  }
  CHECK(shown(self, 1, 80) == std::vector<std::string>{"record 19 term 10 D"});
  {
    std::lock_guard<std::mutex> g(gw.mx);
    CHECK(gw.ranges == 2);
    // A delete it never delivered: no key written since, one key fewer.
    gw.last_range = range(22, {kv(11, 11, "C", "other")});
  }
  CHECK(shown(self, 1, 80) == std::vector<std::string>{"deleted"});
  {
    std::lock_guard<std::mutex> g(gw.mx);
    CHECK(gw.ranges == 3);
    // The stream after the second read resumed after that read (20 + 1).
    CHECK(std::find(gw.starts.begin(), gw.starts.end(), "21") != gw.starts.end());
  }
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("one etcd watch stream per namespace serves every lease in it; a late subscriber is told its key's state") {
  // Before, a watch thread and connection per watching runner made one
  // process unable to hold more than a few hundred leases.
  constexpr int n = 12;
  fake_gateway gw;
  {
    std::lock_guard<std::mutex> g(gw.mx);
    std::vector<std::string> kvs;
    for (int i = 0; i < n; ++i)
      kvs.push_back(kv(10 + i, 10 + i, "h" + std::to_string(i), "lease-" + std::to_string(i)));
    gw.last_range = range(30, kvs);
    gw.range_delay = 200ms;   // every subscriber joins before the first read answers
    gw.scripts.push_back({{created, put(31, 31, "x", "lease-2"), del(32, "lease-5")}, true});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto transport = spawn_etcd_backend(sys, gateway_config(gw)).transport;
  auto subs = subscribers(sys, transport, n);
  for (int i = 0; i < n; ++i) {
    auto want = std::vector<std::string>{
      "record " + std::to_string(10 + i) + " term " + std::to_string(10 + i) + " h" + std::to_string(i),
      "up"};
    if (i == 2)
      want.push_back("record 31 term 31 x");
    if (i == 5)
      want.push_back("deleted");
    CHECK_MESSAGE(shown(*subs[i], want.size()) == want, "lease-" << i);
  }
  // Joining the running stream: the key's state at once (a record; a key
  // the subscriber knew and that is gone: deleted), nothing read or opened.
  caf::scoped_actor late{sys};
  watch(late, transport, "lease-2", 5s);
  CHECK(shown(late, 2) == std::vector<std::string>{"up", "record 31 term 31 x"});
  caf::scoped_actor late_gone{sys};
  watch(late_gone, transport, "lease-5", 5s, "15");
  CHECK(shown(late_gone, 2) == std::vector<std::string>{"up", "deleted"});
  CHECK(gw.watches() == 1);
  {
    std::lock_guard<std::mutex> g(gw.mx);
    CHECK(gw.ranges == 1);
  }
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("compaction and a cut stream reach every subscriber of the shared etcd watch") {
  constexpr int n = 8;
  fake_gateway gw;
  {
    std::lock_guard<std::mutex> g(gw.mx);
    std::vector<std::string> before, after;
    for (int i = 0; i < n; ++i) {
      auto name = "lease-" + std::to_string(i);
      before.push_back(kv(10 + i, 10 + i, "old", name));
      after.push_back(kv(40 + i, 40 + i, "new", name));   // every key changed meanwhile
    }
    gw.ranges_left = {range(20, before), range(50, after)};
    gw.range_delay = 200ms;
    gw.scripts.push_back({{created, compacted}});   // 1: compacted: read again
    gw.scripts.push_back({{created}, false, true}); // 2: cut
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto transport = spawn_etcd_backend(sys, gateway_config(gw)).transport;
  auto subs = subscribers(sys, transport, n);
  for (int i = 0; i < n; ++i) {
    auto seen = shown(*subs[i], 5);
    REQUIRE_MESSAGE(seen.size() == 5, "lease-" << i);
    auto r = std::to_string(10 + i), r2 = std::to_string(40 + i);
    CHECK(seen[0] == "record " + r + " term " + r + " old");
    CHECK(seen[1] == "up");
    CHECK(seen[2] == "record " + r2 + " term " + r2 + " new");   // compaction: read again
    CHECK_MESSAGE(seen[3].find("watch stream broken after") != std::string::npos, seen[3]);
    CHECK(seen[4] == "up");
  }
  {
    std::lock_guard<std::mutex> g(gw.mx);
    // One stream, reopened twice: one watch per reopening, not per lease.
    CHECK(gw.starts == std::vector<std::string>{"21", "51", "51"});
    CHECK(gw.ranges == 2);
  }
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("a subscriber joining the running etcd watch gets its key's record as the stream had it, "
          "every field (the watch keeps a compact copy per key)") {
  fake_gateway gw;
  auto value = json{{"holderIdentity", "h"}, {"leaseDurationSeconds", 7},
                    {"acquireTime", "2026-12-04T22:00:00.000000Z"},
                    {"preferredHolder", "p"}, {"strategy", "OldestEmulationVersion"}};
  {
    std::lock_guard<std::mutex> g(gw.mx);
    gw.last_range = range(30, {json{{"key", encode_base64("/lh/ns1/lease-0")},
                                    {"create_revision", "12"}, {"mod_revision", "17"},
                                    {"version", "3"}, {"lease", "7587883512386453508"},
                                    {"value", encode_base64(value.dump())}}.dump()});
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto transport = spawn_etcd_backend(sys, gateway_config(gw)).transport;
  caf::scoped_actor first{sys};
  watch(first, transport, "lease-0", 5s);
  auto read = collect(first, 2);
  caf::scoped_actor late{sys};
  watch(late, transport, "lease-0", 5s);
  auto joined = collect(late, 2);
  auto record_of = [](const std::vector<lease_watch_event>& evs) -> std::optional<lease> {
    for (auto& e : evs)
      if (e.what == lease_watch_event::kind::record)
        return e.record;
    return std::nullopt;
  };
  auto a = record_of(read);
  auto b = record_of(joined);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->etcd_lease_id == "7587883512386453508");
  CHECK(a->spec.preferred_holder == "p");
  CHECK(b->key() == a->key());
  CHECK(b->resource_version == "17");
  CHECK(b->resource_version == a->resource_version);
  CHECK(b->etcd_lease_id == a->etcd_lease_id);
  CHECK(b->spec == a->spec);
  CHECK(b->spec.lease_transitions == 12);
  CHECK_FALSE(b->ttl_seconds);
  gw.closing = true;
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}
