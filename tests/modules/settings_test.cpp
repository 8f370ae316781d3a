// Validators of every built-in module type: each error path and its message.
#include <doctest/doctest.h>

#include "modules/exec.hpp"
#include "modules/leader_endpoint.hpp"
#include "modules/ticker.hpp"
#include "modules/webhook.hpp"

using namespace leasehold;
using namespace leasehold::modules;
using json = nlohmann::json;
using errors = std::vector<std::string>;

namespace {

errors check(const module_type& t, const json& settings) { return t.validate(settings); }

} // namespace

TEST_CASE("ticker settings") {
  auto t = ticker_module();
  CHECK(check(t, json::object()).empty());
  CHECK(check(t, json()).empty());
  CHECK(check(t, {{"interval_ms", 5}, {"message", "hi"}}).empty());
  auto p = parse_ticker_settings({{"interval_ms", 5}, {"message", "hi"}});
  CHECK(p.value.interval_ms == 5);
  CHECK(p.value.message == "hi");
  CHECK(parse_ticker_settings(json::object()).value.interval_ms == 1000);
  auto must = errors{"interval_ms: must be an integer > 0"};
  CHECK(check(t, {{"interval_ms", 0}}) == must);
  CHECK(check(t, {{"interval_ms", -5}}) == must);
  CHECK(check(t, {{"interval_ms", "5"}})
        == errors{"interval_ms: invalid duration \"5\": missing unit after \"5\" (ns, us, ms, s, m "
                  "or h), e.g. \"5s\""});
  CHECK(check(t, {{"interval_ms", 1.5}}) == must);
  CHECK(check(t, {{"interval_ms", 100000000000}})
        == errors{"interval_ms: must be at most 86400000"});
  CHECK(check(t, {{"interval_ms", 18446744073709551615ull}})
        == errors{"interval_ms: must be at most 86400000"});
  CHECK(check(t, {{"message", 5}}) == errors{"message: must be a string"});
  CHECK(check(t, {{"colour", "red"}}) == errors{"colour: unknown field"});
  CHECK(check(t, json::array()) == errors{"settings: must be an object"});
  CHECK(check(t, {{"interval_ms", 0}, {"colour", 1}})
        == errors{"interval_ms: must be an integer > 0", "colour: unknown field"});
}

TEST_CASE("exec settings") {
  auto t = exec_module();
  CHECK(check(t, {{"command", {"true"}}}).empty());
  auto full = json{{"command", {"sh", "-c", "x"}}, {"env", {{"A", "1"}}}, {"grace_ms", 0},
                   {"workdir", "/tmp"}};
  CHECK(check(t, full).empty());
  auto p = parse_exec_settings(full);
  CHECK(p.value.command == std::vector<std::string>{"sh", "-c", "x"});
  CHECK(p.value.env == std::map<std::string, std::string>{{"A", "1"}});
  CHECK(p.value.grace_ms == 0);
  CHECK(p.value.workdir == "/tmp");
  CHECK(parse_exec_settings({{"command", {"true"}}}).value.grace_ms == 2000);
  auto command = errors{"command: must be a non-empty array of strings"};
  CHECK(check(t, json::object()) == command);
  CHECK(check(t, {{"command", json::array()}}) == command);
  CHECK(check(t, {{"command", "ls -l"}}) == command);
  CHECK(check(t, {{"command", {"ls", 1}}}) == command);
  auto with = [](json extra) {
    extra["command"] = {"true"};
    return extra;
  };
  CHECK(check(t, with({{"grace_ms", -1}})) == errors{"grace_ms: must be an integer >= 0"});
  CHECK(parse_exec_settings(with({{"grace_ms", "1s"}})).value.grace_ms == 1000);
  CHECK(check(t, with({{"env", "A=1"}})) == errors{"env: must be an object of strings"});
  CHECK(check(t, with({{"env", {{"A", 1}}}})) == errors{"env.A: must be a string"});
  CHECK(check(t, with({{"workdir", 3}})) == errors{"workdir: must be a string"});
  CHECK(check(t, with({{"cmd", "x"}})) == errors{"cmd: unknown field"});
}

TEST_CASE("module settings take durations like the timings (grace: 2s), integer milliseconds "
          "still; an unknown field names the closest known one") {
  auto with = [](json extra) {
    extra["command"] = {"true"};
    return extra;
  };
  auto e = exec_module();
  CHECK(parse_exec_settings(with({{"grace", "2s"}})).value.grace_ms == 2000);
  CHECK(parse_exec_settings(with({{"grace", "1m30s"}})).value.grace_ms == 90000);
  CHECK(parse_exec_settings(with({{"grace", "250ms"}})).value.grace_ms == 250);
  CHECK(parse_exec_settings(with({{"grace", "0"}})).value.grace_ms == 0);
  CHECK(parse_exec_settings(with({{"grace", 1500}})).value.grace_ms == 1500);
  CHECK(parse_exec_settings(with({{"grace_ms", 1500}})).value.grace_ms == 1500);
  CHECK(check(e, with({{"grace", "2s"}})).empty());
  CHECK(check(e, with({{"grace", "2x"}}))
        == errors{"grace: invalid duration \"2x\": unknown unit \"x\" (ns, us, ms, s, m or h)"});
  CHECK(check(e, with({{"grace", "-1s"}}))
        == errors{"grace: invalid duration \"-1s\": negative; durations are 0 or more"});
  CHECK(check(e, with({{"grace", "25h"}}))
        == errors{"grace: invalid duration \"25h\": above the maximum of 24h"});
  CHECK(check(e, with({{"grace", "2s"}, {"grace_ms", 2000}}))
        == errors{"grace: give grace or grace_ms, not both"});
  auto t = ticker_module();
  CHECK(parse_ticker_settings({{"interval", "1.5s"}}).value.interval_ms == 1500);
  CHECK(check(t, {{"interval", "0s"}}) == errors{"interval: must be at least 1ms"});
  auto w = webhook_module();
  CHECK(check(w, {{"url", "http://127.0.0.1:1/x"}, {"timeout", "3s"}}).empty());
  CHECK(parse_webhook_settings({{"url", "http://127.0.0.1:1/x"}, {"timeout", "3s"}}).value.timeout_ms
        == 3000);
  // Typos.
  CHECK(check(e, with({{"grac", "2s"}})) == errors{"grac: unknown field (did you mean \"grace\"?)"});
  CHECK(check(e, with({{"workdr", "/"}}))
        == errors{"workdr: unknown field (did you mean \"workdir\"?)"});
  CHECK(check(t, {{"mesage", "x"}}) == errors{"mesage: unknown field (did you mean \"message\"?)"});
}

TEST_CASE("webhook url parsing") {
  auto u = parse_http_url("http://127.0.0.1:8080/hook/x?a=b");
  REQUIRE(u);
  CHECK(u->scheme == "http");
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 8080);
  CHECK(u->path == "/hook/x?a=b");
  CHECK(u->origin() == "http://127.0.0.1:8080");
  auto s = parse_http_url("https://example.com");
  REQUIRE(s);
  CHECK(s->port == 443);
  CHECK(s->path == "/");
  auto v6 = parse_http_url("http://[::1]:9000/h");
  REQUIRE(v6);
  CHECK(v6->host == "[::1]");
  CHECK(v6->port == 9000);
  CHECK(parse_http_url("http://h")->port == 80);
  for (auto bad : {"", "ftp://h/x", "http://", "http:///x", "http://h:", "http://h:0",
                   "http://h:65536", "http://h:8a", "http://[::1/x", "http://[]:80", "h:80/x"})
    CHECK_MESSAGE(!parse_http_url(bad), bad);
}

TEST_CASE("webhook settings") {
  auto t = webhook_module();
  CHECK(check(t, {{"url", "http://h/x"}}).empty());
  auto p = parse_webhook_settings({{"url", "http://h/x"}});
  CHECK(p.value.timeout_ms == 2000);
  CHECK(p.value.max_retries == 3);
  CHECK(check(t, {{"url", "http://h/x"}, {"timeout_ms", 10}, {"max_retries", 0}}).empty());
  CHECK(check(t, json::object()) == errors{"url: must be a non-empty string"});
  CHECK(check(t, {{"url", ""}}) == errors{"url: must be a non-empty string"});
  CHECK(check(t, {{"url", "ftp://h"}})
        == errors{"url: must be an http:// or https:// URL with a host (http://host:port/path)"});
  auto with = [](json extra) {
    extra["url"] = "http://h/x";
    return extra;
  };
  CHECK(check(t, with({{"timeout_ms", 0}})) == errors{"timeout_ms: must be an integer > 0"});
  CHECK(check(t, with({{"max_retries", -1}})) == errors{"max_retries: must be an integer >= 0"});
  CHECK(check(t, with({{"max_retries", 1000}})) == errors{"max_retries: must be at most 100"});
  CHECK(check(t, with({{"retries", 1}})) == errors{"retries: unknown field"});
}

TEST_CASE("leader_endpoint settings") {
  auto t = leader_endpoint_module(std::make_shared<leader_view>());
  CHECK(check(t, json::object()).empty());
  CHECK(parse_leader_endpoint_settings(json::object()).value.path == "/leader");
  CHECK(parse_leader_endpoint_settings({{"path", "/who"}}).value.path == "/who");
  CHECK(check(t, {{"path", "leader"}}) == errors{"path: must start with /"});
  CHECK(check(t, {{"path", ""}}) == errors{"path: must start with /"});
  CHECK(check(t, {{"path", 1}}) == errors{"path: must be a string"});
  CHECK(check(t, {{"port", 1}}) == errors{"port: unknown field"});
}
