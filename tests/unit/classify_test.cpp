#include <doctest/doctest.h>

#include "tests/unit/test_support.hpp"
#include "transport/http/http_errors.hpp"
#include "transport/kube/kube_client.hpp"

using namespace leasehold;

namespace {

const std::string path = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x";

api_error classify(int status, const std::string& body, const std::string& retry_after = {}) {
  return classify_response("PUT", path, status, body, retry_after);
}

} // namespace

TEST_CASE("error kinds have stable snake_case names") {
  CHECK(std::string(to_string(error_kind::none)) == "none");
  CHECK(std::string(to_string(error_kind::not_found)) == "not_found");
  CHECK(std::string(to_string(error_kind::already_exists)) == "already_exists");
  CHECK(std::string(to_string(error_kind::connection_refused)) == "connection_refused");
  CHECK(std::string(to_string(error_kind::malformed_body)) == "malformed_body");
  CHECK(std::string(to_string(error_kind::server_error)) == "server_error");
}

TEST_CASE("describe names verb, path, kind, status and reason") {
  api_error e{error_kind::conflict, 409, "PUT", path, "the object has been modified", 0};
  CHECK(e.describe() ==
        "PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/x: conflict (409): "
        "the object has been modified");
  api_error t{error_kind::timeout, 0, "GET", "/x", "no response within 200ms", 0};
  CHECK(t.describe() == "GET /x: timeout: no response within 200ms");
  api_error r{error_kind::throttled, 429, "GET", "/x", "slow down", 3};
  CHECK(r.describe() == "GET /x: throttled (429): slow down (retry after 3s)");
}

TEST_CASE("classify_response maps API statuses to error kinds") {
  auto e = classify(404, test::fixture("status-notfound.json"));
  CHECK(e.kind == error_kind::not_found);
  CHECK(e.http_status == 404);
  CHECK(e.verb == "PUT");
  CHECK(e.path == path);
  CHECK(e.reason == "leases.coordination.k8s.io \"agent-1-lock\" not found");

  e = classify(409, test::fixture("status-conflict.json"));
  CHECK(e.kind == error_kind::conflict);
  CHECK(e.reason.find("the object has been modified") != std::string::npos);

  CHECK(classify(409, test::fixture("status-alreadyexists.json")).kind ==
        error_kind::already_exists);
  CHECK(classify(409, "not json").kind == error_kind::conflict);
  CHECK(classify(422, R"({"kind":"Status","reason":"Invalid","code":422,"message":"m"})").kind ==
        error_kind::invalid);
  CHECK(classify(400, "").kind == error_kind::invalid);
  CHECK(classify(401, R"({"kind":"Status","reason":"Unauthorized","code":401})").kind ==
        error_kind::unauthorized);
  e = classify(403, test::fixture("status-forbidden.json"));
  CHECK(e.kind == error_kind::forbidden);
  CHECK(e.reason.find("cannot update resource") != std::string::npos);

  e = classify(429, R"({"kind":"Status","reason":"TooManyRequests","code":429,"message":"slow"})",
               "7");
  CHECK(e.kind == error_kind::throttled);
  CHECK(e.retry_after_seconds == 7);
  CHECK(classify(429, "", "Wed, 21 Oct 2015 07:28:00 GMT").retry_after_seconds == 0);

  e = classify(500, "internal error\nstack...");
  CHECK(e.kind == error_kind::server_error);
  CHECK(e.reason == "internal error");
  e = classify(503, "", "2");
  CHECK(e.kind == error_kind::server_error);
  CHECK(e.reason == "HTTP 503");
  CHECK(e.retry_after_seconds == 2);
  CHECK(classify(418, "").kind == error_kind::other);
  CHECK(classify(200, "{}").kind == error_kind::none);
}

TEST_CASE("lease_from_response: 2xx bodies that are not a Lease are malformed_body") {
  auto good = lease_from_response("GET", path, 200, test::lease_body("x", "5", "a", 1), "");
  REQUIRE_MESSAGE(good.ok(), good.error.describe());
  CHECK(good.value->resource_version == "5");

  auto full = test::lease_body("x", "5", "a", 1);
  auto truncated = lease_from_response("GET", path, 200, full.substr(0, full.size() / 2), "");
  CHECK(truncated.kind() == error_kind::malformed_body);
  CHECK(truncated.error.http_status == 200);
  CHECK(truncated.error.reason.rfind("body: truncated or invalid JSON at byte", 0) == 0);

  auto wrong = lease_from_response(
    "PUT", path, 200, R"({"metadata":{"name":"x"},"spec":{"leaseTransitions":"x"}})", "");
  CHECK(wrong.kind() == error_kind::malformed_body);
  CHECK(wrong.error.reason == "spec.leaseTransitions: expected integer");
  CHECK(wrong.error.describe() ==
        "PUT " + path + ": malformed_body (200): spec.leaseTransitions: expected integer");

  auto no_spec = lease_from_response("POST", path, 201, R"({"metadata":{"name":"x"}})", "");
  CHECK(no_spec.kind() == error_kind::malformed_body);
  CHECK(no_spec.error.reason == "spec: missing");

  auto missing = lease_from_response("GET", path, 404, test::fixture("status-notfound.json"), "");
  CHECK(missing.kind() == error_kind::not_found);
}
