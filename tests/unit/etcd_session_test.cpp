// The etcd session's reaper against a scripted etcd (each gateway call
// answered by the test): what it does when a keepalive, a range or a txn
// fails, and how it and a renew of the same key can never both win.
// Real time: a key goes stale after its TTL of 1 s unasked.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/etcd/etcd_session.hpp"
#include "transport/etcd/etcd_txn_reads.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const std::string lease_id = "7587";
const std::string key = encode_base64("/lh/ns1/lost");

/// One etcd key bound to `lease_id`, and the calls the session made.
struct scripted_etcd {
  std::int64_t revision = 10;
  std::int64_t mod_revision = 5;
  bool key_exists = true;
  std::string value = json{{"holderIdentity", "A"}, {"leaseDurationSeconds", 2}}.dump();
  /// Paths to fail (each once, in order of the calls).
  std::vector<std::string> fail_next;
  std::vector<std::string> calls;

  etcd_session::call_fn fn() {
    return [this](const std::string& path, const json& body) -> api_result<json> {
      calls.push_back(path);
      if (!fail_next.empty() && fail_next.front() == path) {
        fail_next.erase(fail_next.begin());
        return api_result<json>::failure(
          api_error{error_kind::timeout, 0, "POST", path, "no answer (scripted)", 0});
      }
      json header = {{"revision", std::to_string(revision)}};
      if (path == "/v3/lease/keepalive")
        return api_result<json>::success({{"result", {{"ID", lease_id}, {"TTL", "2"}}}});
      if (path == "/v3/kv/range") {
        json kvs = json::array();
        if (key_exists)
          kvs.push_back({{"key", key}, {"create_revision", "3"},
                         {"mod_revision", std::to_string(mod_revision)}, {"version", "1"},
                         {"value", encode_base64(value)}, {"lease", lease_id}});
        return api_result<json>::success({{"header", header}, {"kvs", kvs}});
      }
      if (path == "/v3/kv/txn") {
        auto& op = body["success"][0];
        mod_revision = ++revision;
        if (op.contains("request_put"))
          value = decode_base64(op["request_put"]["value"].get<std::string>()).value_or("");
        else
          key_exists = false;
        return api_result<json>::success(
          {{"header", {{"revision", std::to_string(revision)}}}, {"succeeded", true}});
      }
      return api_result<json>::failure(api_error{error_kind::other, 0, "POST", path, "unscripted", 0});
    };
  }
  bool released() const {
    auto v = json::parse(value);
    return key_exists && v.value("holderIdentity", "x").empty();
  }
};

/// The key asked about by its create, then left a TTL (1 s) unasked.
void go_stale(etcd_session& s) {
  s.asked(key, lease_id, 1);
  std::this_thread::sleep_for(1100ms);
}

} // namespace

TEST_CASE("etcd session reaper: a failed keepalive forgets no stale key") {
  etcd_session s;
  scripted_etcd etcd;
  go_stale(s);
  etcd.fail_next = {"/v3/lease/keepalive"};
  CHECK_FALSE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK_FALSE(etcd.released());
  // The next keepalive reaps it: the key was kept on the books.
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK(etcd.released());
}

TEST_CASE("etcd session reaper: a failed range or txn forgets no stale key") {
  for (const char* failing : {"/v3/kv/range", "/v3/kv/txn"}) {
    CAPTURE(failing);
    etcd_session s;
    scripted_etcd etcd;
    go_stale(s);
    etcd.fail_next = {failing};
    REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
    CHECK_FALSE(etcd.released());
    REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
    if (std::string(failing) == "/v3/kv/txn") {
      // A txn without an answer may have been written: looked at again a
      // TTL later, not at once.
      CHECK_FALSE(etcd.released());
      std::this_thread::sleep_for(1100ms);
      REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
    }
    CHECK(etcd.released());
  }
}

TEST_CASE("etcd session reaper: the released record is deleted a TTL later, then forgotten") {
  etcd_session s;
  scripted_etcd etcd;
  go_stale(s);
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  REQUIRE(etcd.released());
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK(etcd.key_exists);   // untaken for less than a TTL: kept
  std::this_thread::sleep_for(1100ms);
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK_FALSE(etcd.key_exists);
  etcd.calls.clear();
  std::this_thread::sleep_for(1100ms);
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK(etcd.calls == std::vector<std::string>{"/v3/lease/keepalive"});   // off the books
}

TEST_CASE("etcd session: a renew that read the key before the reaper wrote it is refused") {
  etcd_session s;
  scripted_etcd etcd;
  go_stale(s);
  // A renew's range read the key held (mod_revision 5); before it asks,
  // the reaper's keepalive writes the released record.
  auto read_at = etcd.mod_revision;
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  REQUIRE(etcd.released());
  CHECK_FALSE(s.renewing(key, lease_id, 1, read_at));
  // A renew that read the released record is the elector's to judge (its
  // term is gone from the key): the session does not refuse it.
  CHECK(s.renewing(key, lease_id, 1, etcd.mod_revision));
}

TEST_CASE("etcd session: a renew that asks while the reaper's txn is unanswered is refused") {
  etcd_session s;
  scripted_etcd etcd;
  go_stale(s);
  auto read_at = etcd.mod_revision;
  etcd.fail_next = {"/v3/kv/txn"};   // written or not: nobody knows
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK_FALSE(s.renewing(key, lease_id, 1, read_at));
}

TEST_CASE("etcd session: a key renewed since it went stale is not reaped") {
  etcd_session s;
  scripted_etcd etcd;
  go_stale(s);
  CHECK(s.renewing(key, lease_id, 1, etcd.mod_revision));   // its elector asks again
  REQUIRE(s.keep_alive(lease_id, etcd.fn()).ok());
  CHECK_FALSE(etcd.released());
  CHECK(etcd.calls == std::vector<std::string>{"/v3/lease/keepalive"});
}

// -- a create's history check (etcd_unwritten_between) -------------------------

namespace {

/// Answers count-only ranges of one key at each revision from `present`
/// (revision -> whether the key existed there).
etcd_session::call_fn history(std::map<std::int64_t, bool> present, int& reads) {
  return [present, &reads](const std::string& path, const json& body) -> api_result<json> {
    ++reads;
    if (path != "/v3/kv/txn")
      return api_result<json>::failure(api_error{error_kind::other, 0, "POST", path, "unscripted", 0});
    json responses = json::array();
    for (auto& op : body["success"]) {
      auto rev = std::stoll(op["request_range"]["revision"].get<std::string>());
      auto it = present.find(rev);
      json range = json::object();
      if (it != present.end() && it->second)
        range["count"] = "1";
      responses.push_back({{"response_range", range}});
    }
    return api_result<json>::success({{"responses", responses}});
  };
}

} // namespace

TEST_CASE("etcd history: a key judged ran out must be present, gone once, then absent") {
  // Regression (sim seed 1295, etcd): a follower whose stream was seconds
  // late read the key's TTL of 0 at revision 10, then no key at 14. The
  // check started at 14, so it missed another replica's take at 12 and an
  // operator's delete at 13, and the follower started beside that take.
  etcd_session own;
  int reads = 0;
  // Expired at 11, nothing since: free at once.
  CHECK(etcd_unwritten_between(history({{11, false}, {12, false}, {13, false}, {14, false}}, reads),
                               own, {{key, 10, 15, true}}).front());
  // Expired at 11, taken at 12, deleted at 13: held.
  CHECK_FALSE(etcd_unwritten_between(history({{11, false}, {12, true}, {13, false}, {14, false}}, reads),
                                     own, {{key, 10, 15, true}}).front());
  // Still present just before the create: not a history that can be.
  CHECK_FALSE(etcd_unwritten_between(history({{11, true}, {12, true}}, reads), own,
                                     {{key, 10, 13, true}}).front());
  // The very next revision is the create: the key never showed gone.
  CHECK_FALSE(etcd_unwritten_between(history({}, reads), own, {{key, 10, 11, true}}).front());
  // A read that found the key absent: absent throughout, as before.
  CHECK(etcd_unwritten_between(history({{11, false}}, reads), own, {{key, 10, 12}}).front());
  CHECK_FALSE(etcd_unwritten_between(history({{11, true}}, reads), own, {{key, 10, 12}}).front());
}

TEST_CASE("etcd history: the creates of one batch ask every history in one txn, each judged alone") {
  // A killed process's keys are taken in batches of up to 128 creates; a
  // history txn per create timed the creates out in the workers' queue.
  etcd_session own;
  const std::string other = encode_base64("/lh/ns1/other");
  std::vector<json> bodies;
  auto call = [&](const std::string& path, const json& body) -> api_result<json> {
    bodies.push_back(body);
    json responses = json::array();
    for (auto& op : body["success"]) {
      auto& r = op["request_range"];
      auto rev = std::stoll(r["revision"].get<std::string>());
      // `key` expired at 11 and nothing since; `other` was taken at 12.
      bool there = r["key"] == other && rev == 12;
      responses.push_back({{"response_range", there ? json{{"count", "1"}} : json::object()}});
    }
    CHECK(path == "/v3/kv/txn");
    return api_result<json>::success({{"responses", responses}});
  };
  auto ok = etcd_unwritten_between(call, own, {{key, 10, 14, true}, {other, 10, 14, true},
                                               {key, 13, 14, false}});
  CHECK(ok == std::vector<bool>{true, false, true});
  REQUIRE(bodies.size() == 1);
  CHECK(bodies[0]["success"].size() == 6);   // 11-13 for each seen key; none for the next revision
  // A failed txn fails each check it carried, and only those.
  auto failing = [](const std::string& path, const json&) -> api_result<json> {
    return api_result<json>::failure(api_error{error_kind::timeout, 0, "POST", path, "down", 0});
  };
  CHECK(etcd_unwritten_between(failing, own, {{key, 10, 14, true}, {key, 13, 14, false}})
        == std::vector<bool>{false, true});
}

TEST_CASE("etcd history: a check judged written sends none of its later ranges") {
  // A key found written at one revision is held whatever its later ranges
  // say; asking them cost a txn of up to 128 ranges per batch for nothing.
  etcd_session own;
  const std::string other = encode_base64("/lh/ns1/other");
  std::vector<json> bodies;
  auto call = [&](const std::string&, const json& body) -> api_result<json> {
    bodies.push_back(body);
    json responses = json::array();
    for (auto& op : body["success"]) {
      auto& r = op["request_range"];
      // `key` was taken at 12; `other` was never there.
      bool there = r["key"] == key && r["revision"] == "12";
      responses.push_back({{"response_range", there ? json{{"count", "1"}} : json::object()}});
    }
    return api_result<json>::success({{"responses", responses}});
  };
  // 189 ranges for `key` (11-199), then 69 for `other` (11-79): 3 txns
  // when every range goes, 2 when key's last 61 stay home.
  auto ok = etcd_unwritten_between(call, own, {{key, 10, 200, true}, {other, 10, 80, true}});
  CHECK(ok == std::vector<bool>{false, true});
  REQUIRE(bodies.size() == 2);
  CHECK(bodies[0]["success"].size() == 128);
  CHECK(bodies[1]["success"].size() == 69);
  for (auto& op : bodies[1]["success"])
    CHECK(op["request_range"]["key"] == other);
}
