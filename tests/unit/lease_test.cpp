#include <doctest/doctest.h>

#include "tests/unit/test_support.hpp"
#include "leasehold/lease.hpp"
#include "lease/lease_json.hpp"

using namespace leasehold;
using json = nlohmann::json;
using std::chrono::microseconds;

namespace {

wall_time at_micros(std::int64_t us) {
  return wall_time{microseconds{us}};
}

} // namespace

TEST_CASE("MicroTime formats UTC with six fraction digits") {
  CHECK(format_micro_time(at_micros(0)) == "1970-01-01T00:00:00.000000Z");
  // 2006-01-02T15:04:05.000007Z
  CHECK(format_micro_time(at_micros(1136214245000007)) == "2006-01-02T15:04:05.000007Z");
  CHECK(format_micro_time(at_micros(-1)) == "1969-12-31T23:59:59.999999Z");
}

TEST_CASE("MicroTime round trips with microseconds") {
  for (std::int64_t us : {std::int64_t{0}, std::int64_t{1136214245000007},
                          std::int64_t{1714557602654321}, std::int64_t{951782400999999},
                          std::int64_t{-86400000001}}) {
    auto text = format_micro_time(at_micros(us));
    auto back = parse_micro_time(text);
    REQUIRE_MESSAGE(back.has_value(), text);
    CHECK(back->time_since_epoch().count() == us);
  }
}

TEST_CASE("MicroTime parses 0 to 9 fraction digits and offsets") {
  const std::int64_t base = 1136214245LL * 1000000; // 2006-01-02T15:04:05Z
  CHECK(parse_micro_time("2006-01-02T15:04:05Z")->time_since_epoch().count() == base);
  CHECK(parse_micro_time("2006-01-02T15:04:05.5Z")->time_since_epoch().count() == base + 500000);
  CHECK(parse_micro_time("2006-01-02T15:04:05.123456Z")->time_since_epoch().count() ==
        base + 123456);
  CHECK(parse_micro_time("2006-01-02T15:04:05.123456789Z")->time_since_epoch().count() ==
        base + 123456);
  CHECK(parse_micro_time("2006-01-02T17:04:05+02:00")->time_since_epoch().count() == base);
  CHECK(parse_micro_time("2006-01-02T10:34:05.000001-04:30")->time_since_epoch().count() ==
        base + 1);
  CHECK(parse_micro_time("2006-01-02T15:04:05+00:00")->time_since_epoch().count() == base);
  CHECK(parse_micro_time("2004-02-29T00:00:00Z").has_value()); // leap day
}

TEST_CASE("MicroTime rejects garbage without throwing") {
  for (const char* bad :
       {"", "garbage", "2006-01-02", "2006-01-02T15:04:05", "2006-01-02 15:04:05Z",
        "2006-01-02T15:04:05.Z", "2006-01-02T15:04:05.1234567890Z", "2006-13-02T15:04:05Z",
        "2006-02-30T15:04:05Z", "2005-02-29T00:00:00Z", "2006-01-02T24:00:00Z",
        "2006-01-02T15:60:05Z", "2006-01-02T15:04:60Z", "2006-01-02T15:04:05Zjunk",
        "2006-01-02T15:04:05+0200", "2006-01-02T15:04:05+24:00", "2006-1-02T15:04:05Z",
        "２００６-01-02T15:04:05Z", "2006-01-02T15:04:05z"}) {
    CHECK_MESSAGE(!parse_micro_time(bad).has_value(), bad);
  }
}

TEST_CASE("lease_spec equality covers every field") {
  lease_spec a;
  a.holder_identity = "a";
  a.lease_duration_seconds = 15;
  a.acquire_time = at_micros(1);
  a.renew_time = at_micros(2);
  a.lease_transitions = 3;
  auto b = a;
  CHECK(a == b);
  b.renew_time = at_micros(3);
  CHECK(a != b);
  b = a;
  b.lease_duration_seconds.reset();
  CHECK(a != b);
  b = a;
  b.lease_transitions = 4;
  CHECK(a != b);
  b = a;
  b.holder_identity.clear();
  CHECK(a != b);
  b = a;
  b.preferred_holder = "b";
  CHECK(a != b);
  b = a;
  b.strategy = "OldestEmulationVersion";
  CHECK(a != b);
}

TEST_CASE("preferredHolder and strategy parse, write and round trip") {
  auto body = json{{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"},
                   {"metadata", {{"name", "l"}, {"namespace", "ns"}}},
                   {"spec", {{"holderIdentity", "a"}, {"leaseTransitions", 1},
                             {"preferredHolder", "b"}, {"strategy", "OldestEmulationVersion"}}}};
  auto parsed = parse_lease(body);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(parsed.value->spec.preferred_holder == "b");
  CHECK(parsed.value->spec.strategy == "OldestEmulationVersion");
  CHECK(to_json_value(*parsed.value) == body);

  auto cleared = *parsed.value;
  cleared.spec.preferred_holder.clear();
  auto out = to_json_value(cleared);
  CHECK_FALSE(out["spec"].contains("preferredHolder"));
  CHECK(out["spec"]["strategy"] == "OldestEmulationVersion");

  auto bad = body;
  bad["spec"]["preferredHolder"] = 3;
  auto r = parse_lease(bad);
  CHECK_FALSE(r.ok());
  CHECK(r.error == "spec.preferredHolder: expected string");
}

TEST_CASE("the all-fields Lease fixture parses and round trips unknown fields") {
  auto body = test::fixture("lease-all-fields.json");
  auto parsed = parse_lease(body);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const auto& l = *parsed.value;
  CHECK(l.name == "nameValue");
  CHECK(l.ns == "namespaceValue");
  CHECK(l.resource_version == "resourceVersionValue");
  CHECK(l.uid == "uidValue");
  CHECK(l.creation_timestamp == "2008-01-01T01:01:01Z");
  CHECK(l.spec.holder_identity == "holderIdentityValue");
  CHECK(l.spec.lease_duration_seconds == 2);
  CHECK(l.spec.lease_transitions == 5);
  REQUIRE(l.spec.acquire_time);
  CHECK(format_micro_time(*l.spec.acquire_time) == "2003-01-01T01:01:01.000003Z");
  CHECK(format_micro_time(*l.spec.renew_time) == "2004-01-01T01:01:01.000004Z");
  CHECK(l.key() == lease_key{"namespaceValue", "nameValue"});

  // Unchanged lease: byte-for-byte the same JSON document.
  CHECK(to_json_value(l) == json::parse(body));

  // raw keeps only what the fields do not hold: copying a lease (per renew,
  // per message) copies no JSON of its own fields.
  CHECK_FALSE(l.raw.contains("kind"));
  CHECK_FALSE(l.raw.at("metadata").contains("resourceVersion"));
  CHECK(l.raw.at("metadata").contains("managedFields"));
  CHECK(l.raw.at("metadata").contains("labels"));
  CHECK_FALSE(l.raw.contains("spec"));   // the fixture's spec has only fields lease holds

  // Changing our fields keeps everything else.
  auto changed = l;
  changed.spec.holder_identity = "me";
  changed.spec.lease_transitions = 6;
  changed.resource_version = "42";
  auto out = to_json_value(changed);
  auto expected = json::parse(body);
  expected["spec"]["holderIdentity"] = "me";
  expected["spec"]["leaseTransitions"] = 6;
  expected["metadata"]["resourceVersion"] = "42";
  CHECK(out == expected);
  CHECK(out["metadata"]["managedFields"][0]["manager"] == "managerValue");
  CHECK(out["metadata"]["labels"]["labelsKey"] == "labelsValue");

  auto again = parse_lease(out);
  REQUIRE(again.ok());
  CHECK(again.value->spec == changed.spec);
}

TEST_CASE("to_json of a new lease omits unset fields and parses back") {
  lease l;
  l.name = "agent-1-lock";
  l.ns = "default";
  l.spec.holder_identity = "pod-a";
  l.spec.lease_duration_seconds = 15;
  l.spec.acquire_time = at_micros(1714557600123456);
  auto j = to_json_value(l);
  CHECK(j["apiVersion"] == "coordination.k8s.io/v1");
  CHECK(j["kind"] == "Lease");
  CHECK(!j["metadata"].contains("resourceVersion"));
  CHECK(!j["metadata"].contains("uid"));
  CHECK(!j["spec"].contains("renewTime"));
  CHECK(j["spec"]["acquireTime"] == "2024-05-01T10:00:00.123456Z");
  CHECK(j["spec"]["leaseTransitions"] == 0);
  auto back = parse_lease(j);
  REQUIRE(back.ok());
  CHECK(back.value->spec == l.spec);

  // Released: empty holder is omitted and parses back as empty.
  l.spec.holder_identity.clear();
  l.spec.lease_duration_seconds = 1;
  j = to_json_value(l);
  CHECK(!j["spec"].contains("holderIdentity"));
  CHECK(parse_lease(j).value->spec == l.spec);
}

TEST_CASE("a Lease with nothing beyond the modelled fields keeps no raw JSON") {
  auto parsed = parse_lease(std::string(
    R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
    R"("metadata":{"name":"n","namespace":"d","resourceVersion":"7","uid":"u",)"
    R"("creationTimestamp":"2026-12-04T08:00:00Z"},)"
    R"("spec":{"holderIdentity":"a","leaseDurationSeconds":15,"leaseTransitions":3,)"
    R"("renewTime":"2026-12-04T08:00:01.000000Z"}})"));
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  CHECK(parsed.value->raw.is_null());
  auto j = to_json_value(*parsed.value);
  CHECK(j["metadata"]["resourceVersion"] == "7");
  CHECK(j["spec"]["renewTime"] == "2026-12-04T08:00:01.000000Z");
  CHECK(j["kind"] == "Lease");
}

TEST_CASE("parse_lease names the offending field and never throws") {
  struct bad_case {
    const char* body;
    const char* error;
  };
  const bad_case cases[] = {
    {R"({"kind":"Lease","metadata":{"name":"x"}})", "spec: missing"},
    {R"({"kind":"Lease","spec":{}})", "metadata: missing"},
    {R"({"kind":"Lease","metadata":[],"spec":{}})", "metadata: expected object"},
    {R"({"kind":"Lease","metadata":{},"spec":{}})", "metadata.name: missing"},
    {R"({"metadata":{"name":"x"},"spec":{"leaseTransitions":"x"}})",
     "spec.leaseTransitions: expected integer"},
    {R"({"metadata":{"name":"x"},"spec":{"leaseDurationSeconds":1.5}})",
     "spec.leaseDurationSeconds: expected integer"},
    {R"({"metadata":{"name":"x"},"spec":{"leaseTransitions":99999999999}})",
     "spec.leaseTransitions: integer out of range"},
    {R"({"metadata":{"name":"x"},"spec":{"holderIdentity":7}})",
     "spec.holderIdentity: expected string"},
    {R"({"metadata":{"name":"x"},"spec":{"renewTime":"yesterday"}})",
     "spec.renewTime: invalid time \"yesterday\""},
    {R"({"metadata":{"name":"x","resourceVersion":12},"spec":{}})",
     "metadata.resourceVersion: expected string"},
    {R"({"kind":"Status","metadata":{"name":"x"},"spec":{}})", "kind: expected Lease, got Status"},
    {R"([1,2])", "body: expected object"},
    {R"({"kind":"Lease","metadata":{"name":"x"},"spe)", "body: truncated or invalid JSON at byte 45"},
    {"", "body: empty"},
  };
  for (const auto& c : cases) {
    auto r = parse_lease(std::string(c.body));
    CHECK_MESSAGE(!r.ok(), c.body);
    CHECK(r.error == c.error);
  }
}

TEST_CASE("parse_lease accepts nulls and missing optional fields") {
  auto r = parse_lease(std::string(
    R"({"metadata":{"name":"x","namespace":"ns"},"spec":{"holderIdentity":null,"renewTime":null}})"));
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.value->spec.holder_identity.empty());
  CHECK(!r.value->spec.renew_time);
  CHECK(!r.value->spec.lease_duration_seconds);
  CHECK(r.value->spec.lease_transitions == 0);
}

TEST_CASE("each Status fixture parses with its reason and code") {
  struct expected_status {
    const char* file;
    const char* reason;
    int code;
    const char* message_part;
  };
  const expected_status cases[] = {
    {"status-notfound.json", "NotFound", 404, "not found"},
    {"status-alreadyexists.json", "AlreadyExists", 409, "already exists"},
    {"status-conflict.json", "Conflict", 409, "the object has been modified"},
    {"status-forbidden.json", "Forbidden", 403, "cannot update resource"},
  };
  for (const auto& c : cases) {
    auto r = parse_status(test::fixture(c.file));
    REQUIRE_MESSAGE(r.ok(), c.file, ": ", r.error);
    CHECK(r.value->status == "Failure");
    CHECK(r.value->reason == c.reason);
    CHECK(r.value->code == c.code);
    CHECK(r.value->message.find(c.message_part) != std::string::npos);
  }
  CHECK(parse_status("<html>bad gateway</html>").error ==
        "body: truncated or invalid JSON at byte 1");
  CHECK(parse_status(R"({"kind":"Lease"})").error == "kind: expected Status, got Lease");
  CHECK(parse_status(R"({"kind":"Status","code":"x"})").error == "code: expected integer");
}

TEST_CASE("a LeaderElection event is a core/v1 Event about the Lease") {
  kube_event e;
  e.involved = {"default", "agent-1-lock"};
  e.involved_uid = "uid-1";
  e.message = "pod-a became leader";
  e.reporting_instance = "pod-a";
  e.time = at_micros(1714557600123456);
  auto j = to_json_value(e);
  CHECK(j["apiVersion"] == "v1");
  CHECK(j["kind"] == "Event");
  CHECK(j["metadata"] == json{{"generateName", "agent-1-lock."}, {"namespace", "default"}});
  CHECK(j["involvedObject"] == json{{"kind", "Lease"},
                                    {"apiVersion", "coordination.k8s.io/v1"},
                                    {"namespace", "default"},
                                    {"name", "agent-1-lock"},
                                    {"uid", "uid-1"}});
  CHECK(j["reason"] == "LeaderElection");
  CHECK(j["message"] == "pod-a became leader");
  CHECK(j["type"] == "Normal");
  CHECK(j["source"]["component"] == "leasehold");
  CHECK(j["reportingComponent"] == "leasehold");
  CHECK(j["reportingInstance"] == "pod-a");
  CHECK(j["firstTimestamp"] == "2024-05-01T10:00:00Z");
  CHECK(j["lastTimestamp"] == "2024-05-01T10:00:00Z");
  CHECK(j["eventTime"] == "2024-05-01T10:00:00.123456Z");
  CHECK(j["count"] == 1);
}

// --- the Lease's JSON text read and written in place (lease/lease_json.hpp)
// CPU per renewal: each renew built, printed and parsed
// nlohmann documents. The in-place reader and writer must give exactly what
// the document path gives: the same lease or the same error, the same bytes.

namespace {

/// The document path alone, as parse_lease(const std::string&) took it
/// before the in-place reader.
parse_result<lease> parse_as_document(const std::string& body) {
  parse_result<lease> r;
  if (body.empty()) {
    r.error = "body: empty";
    return r;
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    r.error = "body: truncated or invalid JSON at byte " + std::to_string(e.byte);
    return r;
  } catch (const std::exception& e) {
    r.error = std::string("body: ") + e.what();
    return r;
  }
  return parse_lease(j);
}

/// Both paths agree on `body`: the same lease (every field, raw included)
/// or the same error.
void same_as_document(const std::string& body) {
  auto fast = parse_lease(body);
  auto doc = parse_as_document(body);
  INFO("body: " << body);
  REQUIRE(fast.ok() == doc.ok());
  if (!fast.ok()) {
    CHECK(fast.error == doc.error);
    return;
  }
  const auto& a = *fast.value;
  const auto& b = *doc.value;
  CHECK(a.name == b.name);
  CHECK(a.ns == b.ns);
  CHECK(a.resource_version == b.resource_version);
  CHECK(a.uid == b.uid);
  CHECK(a.creation_timestamp == b.creation_timestamp);
  CHECK(a.spec == b.spec);
  CHECK(a.raw == b.raw);
}

std::vector<std::string> lease_bodies() {
  return {
    test::lease_body("l-1", "42", "pod-a", 3),
    test::fixture("lease-all-fields.json"),
    R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x","namespace":"default","resourceVersion":"7"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2026-12-05T11:00:15.123456Z","renewTime":"2026-12-05T11:00:17.654321Z","leaseTransitions":0}})",
    R"({"metadata":{"name":"x"},"spec":{}})",
    R"( { "kind" : "" , "metadata" : { "name" : "x" , "labels" : { "a" : [ 1 , -2.5e3 , true , false , null , { } , [ ] ] } } , "spec" : { "preferredHolder" : "b" , "strategy" : "OldestEmulationVersion" } , "status" : { } } )",
    R"({"metadata":{"name":"x","name":"y"},"spec":{"leaseTransitions":1,"leaseTransitions":2}})",
    R"({"metadata":{"name":"x"},"metadata":{"name":"y"},"spec":{}})",
    R"({"metadata":{"name":"x","annotations":{"note":"caf\u00e9 \"quoted\" \\ slash\/"}},"spec":{}})",
    R"({"metadata":{"name":"x"},"spec":{"holderIdentity":"p\u00f6d"}})",
    "{\"metadata\":{\"name\":\"x\",\"annotations\":{\"a\":\"caf\xc3\xa9\"}},\"spec\":{}}",
    "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"holderIdentity\":\"\xff\"}}",
    R"({"metadata":{"name":"x"},"spec":{"leaseDurationSeconds":15.0}})",
    R"({"metadata":{"name":"x"},"spec":{"leaseDurationSeconds":2147483648}})",
    R"({"metadata":{"name":"x"},"spec":{"leaseTransitions":-2147483648}})",
    R"({"metadata":{"name":"x"},"spec":{"leaseDurationSeconds":1e1}})",
    R"({"metadata":{"name":"x"},"spec":{"holderIdentity":null,"renewTime":null}})",
    R"({"metadata":{"name":"x"},"spec":{"renewTime":"2026-02-30T00:00:00Z"}})",
    R"({"metadata":{"name":"x","n\u0061me":"y"},"spec":{}})",
    R"({"kind":"Lease","kind":"Status","metadata":{"name":"x"},"spec":{}})",
    R"({"metadata":{"name":"x"},"spec":{}} trailing)",
    R"({"metadata":{"name":"x"},"spec":{"a":01}})",
    R"({"metadata":{"name":"x"},"spec":{"a":"tab	inside"}})",
    R"({"metadata":{"name":"x"},"spec":{"a":"\x"}})",
    R"({"metadata":{"name":"x"},"spec":{"a":"\u12"}})",
    R"([{"metadata":{"name":"x"},"spec":{}}])",
    R"("just a string")",
    "",
  };
}

} // namespace

TEST_CASE("parse_lease reads a plain Lease in place: the same lease or the same error as the "
          "document, on every body, every truncation and every one-byte change") {
  std::size_t bodies = 0;
  const std::string swaps = "\"{}[],:\\0x -.e\x80";
  for (const auto& body : lease_bodies()) {
    same_as_document(body);
    for (std::size_t n = 0; n < body.size(); ++n) {
      same_as_document(body.substr(0, n));
      for (char c : swaps) {
        auto changed = body;
        changed[n] = c;
        same_as_document(changed);
        ++bodies;
      }
    }
  }
  CHECK(bodies > 10000);
}

TEST_CASE("the in-place reader takes the plain Leases a server sends, managedFields and all; "
          "escapes and non-ASCII go to the document") {
  CHECK(read_plain_lease(test::lease_body("l-1", "42", "pod-a", 3)));
  auto all = read_plain_lease(test::fixture("lease-all-fields.json"));
  REQUIRE(all);
  CHECK(all->raw["metadata"]["managedFields"][0]["manager"] == "managerValue");
  CHECK(all->raw["metadata"]["labels"]["labelsKey"] == "labelsValue");
  CHECK_FALSE(read_plain_lease(R"({"metadata":{"name":"x"},"spec":{"holderIdentity":"p\u00f6d"}})"));
  CHECK_FALSE(read_plain_lease("{\"metadata\":{\"name\":\"x\",\"labels\":{\"a\":\"caf\xc3\xa9\"}},\"spec\":{}}"));
}

TEST_CASE("to_json_text writes, byte for byte, what the document's dump() writes") {
  std::vector<lease> leases;
  leases.push_back(lease{});   // nothing set
  for (const auto& body : lease_bodies())
    if (auto r = parse_lease(body); r.ok())
      leases.push_back(*r.value);
  lease full = *parse_lease(test::fixture("lease-all-fields.json")).value;
  full.spec.preferred_holder = "pod-b";
  full.spec.strategy = "OldestEmulationVersion";
  leases.push_back(full);
  lease odd = full;   // raw holding what the members write, and a part that is not an object
  odd.raw["apiVersion"] = "v0";
  odd.raw["kind"] = "NotALease";
  odd.raw["metadata"]["name"] = "shadow";
  odd.raw["metadata"]["resourceVersion"] = "shadow";
  odd.raw["spec"]["renewTime"] = 5;
  odd.raw["zzz"] = {{"b", 1}, {"a", "\u00e9\n"}};
  odd.raw["AAA"] = json::array({1, 2.5, nullptr});
  odd.resource_version.clear();
  odd.spec.renew_time.reset();
  leases.push_back(odd);
  lease flat = full;
  flat.raw["spec"] = 3;
  flat.raw["metadata"] = json::array();
  leases.push_back(flat);
  lease escaped = full;
  escaped.spec.holder_identity = "quote\"d\tand caf\u00e9";
  leases.push_back(escaped);
  for (const auto& l : leases) {
    auto expected = to_json_value(l).dump();
    CHECK(to_json_text(l) == expected);
  }
  std::string out = "kept";
  CHECK_FALSE(write_plain_lease(escaped, out));
  CHECK(out == "kept");
  CHECK(write_plain_lease(full, out));
  CHECK(out == "kept" + to_json_value(full).dump());
  lease bad = full;   // not UTF-8: both paths refuse to write it
  bad.raw["metadata"]["labels"]["x"] = std::string("\xff");
  CHECK_THROWS(to_json_text(bad));
  CHECK_THROWS(to_json_value(bad).dump());
}
