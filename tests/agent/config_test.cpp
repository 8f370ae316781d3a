// In-process tests of the agent's config parsing, logging, journal and metrics.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "cmd/leasehold/agent_config.hpp"
#include "cmd/leasehold/builtin_registry.hpp"
#include "cmd/leasehold/health_server.hpp"
#include "cmd/leasehold/journal.hpp"
#include "cmd/leasehold/json_log.hpp"
#include "cmd/leasehold/metrics.hpp"
#include "cmd/leasehold/probes.hpp"
#include "tests/agent/harness.hpp"

using namespace leasehold;
using namespace leasehold::agent;
using nlohmann::json;

namespace {

config_environment test_env() {
  config_environment env;
  env.hostname = "host-1";
  return env;
}

std::vector<std::string> parse(const json& doc, agent_config& out,
                               const config_overrides& over = {},
                               const config_environment& env = test_env()) {
  auto mods = make_builtin_modules();
  return parse_config(doc.dump(), *mods.registry, over, env, out);
}

bool has(const std::vector<std::string>& errs, const std::string& text) {
  return std::any_of(errs.begin(), errs.end(),
                     [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& errs) {
  std::string s;
  for (auto& e : errs)
    s += e + "\n";
  return s;
}

} // namespace

TEST_CASE("durations parse like Go's") {
  using namespace std::chrono;
  CHECK(parse_duration("15s") == caf::timespan{seconds(15)});
  CHECK(parse_duration("500ms") == caf::timespan{milliseconds(500)});
  CHECK(parse_duration("1m30s") == caf::timespan{seconds(90)});
  CHECK(parse_duration("1.5s") == caf::timespan{milliseconds(1500)});
  CHECK(parse_duration("0") == caf::timespan{0});
  CHECK_FALSE(parse_duration("2x"));
  CHECK_FALSE(parse_duration("15"));
  CHECK_FALSE(parse_duration(""));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("1..5s"));
}

TEST_CASE("a full config parses with defaults filled in") {
  agent_config cfg;
  auto errs = parse(test::short_config(), cfg);
  REQUIRE_MESSAGE(errs.empty(), joined(errs));
  CHECK(cfg.identity == "host-1");
  CHECK(cfg.ns == "default");
  CHECK(cfg.ns_defaulted);
  CHECK(cfg.lease_name == "agent-test");
  CHECK(cfg.health_addr == "127.0.0.1:8080");
  CHECK(cfg.timings.retry_period == caf::timespan{std::chrono::milliseconds(300)});
  REQUIRE(cfg.modules.modules.size() == 2);
  CHECK(cfg.modules.modules[0].name == "tick");
  CHECK(cfg.modules.modules[0].leader_only);
  CHECK_FALSE(cfg.modules.modules[1].leader_only);
}

TEST_CASE("every error names its JSON path") {
  agent_config cfg;
  json doc = test::short_config();
  doc["timings"]["retry_period"] = "2x";
  doc["colour"] = "blue";
  doc["timings"]["lease_time"] = "1s";
  doc["server"] = "ftp://x";
  doc["modules"][0]["type"] = "tickr";
  doc["health_addr"] = 8080;
  doc["watch"] = "yes";
  auto errs = parse(doc, cfg);
  CHECK(has(errs, "watch: must be true or false"));
  CHECK(has(errs, "timings.retry_period: invalid duration \"2x\""));
  CHECK(has(errs, "colour: unknown field"));
  CHECK(has(errs, "timings.lease_time: unknown field"));
  CHECK(has(errs, "server: server \"ftp://x\": expected http:// or https:// URL"));
  CHECK(has(errs, "modules[0].type: unknown module type \"tickr\""));
  CHECK(has(errs, "health_addr: must be a string"));
}

TEST_CASE("backend and etcd settings: defaults, parsing, errors with their JSON paths") {
  agent_config cfg;
  REQUIRE(parse(test::short_config(), cfg).empty());
  CHECK(cfg.backend == "kubernetes");

  json doc = test::short_config();
  doc["backend"] = "etcd";
  doc["etcd"] = {{"endpoints", {"http://127.0.0.1:2379", "https://10.0.0.2:2379"}},
                 {"prefix", "/lh"}, {"ca_file", "/ca.pem"}, {"cert_file", "/c.pem"},
                 {"key_file", "/k.pem"}, {"username", "u"}, {"password", "p"}};
  auto errs = parse(doc, cfg);
  CHECK(has(errs, "etcd.endpoints[0]: ca_file is set but the endpoint is http://"));
  doc["etcd"]["endpoints"] = {"https://127.0.0.1:2379", "https://10.0.0.2:2379"};
  errs = parse(doc, cfg);
  REQUIRE_MESSAGE(errs.empty(), joined(errs));
  CHECK(cfg.backend == "etcd");
  CHECK(cfg.etcd.endpoints.size() == 2);
  CHECK(cfg.etcd.prefix == "/lh");
  CHECK(cfg.etcd.http.client_cert_file == "/c.pem");
  CHECK(cfg.etcd.username == "u");

  config_overrides over;
  over.etcd_endpoints = "http://127.0.0.1:1,http://127.0.0.1:2";
  doc["etcd"].erase("ca_file");
  REQUIRE(parse(doc, cfg, over).empty());
  CHECK(cfg.etcd.endpoints == std::vector<std::string>{"http://127.0.0.1:1", "http://127.0.0.1:2"});

  json bad = test::short_config();
  bad["backend"] = "zookeeper";
  bad["etcd"] = {{"endpoints", {"tcp://x", 5}}, {"prefix", "lh"}, {"cert_file", "/c.pem"},
                 {"username", "u"}, {"colour", "x"}, {"password", 1}};
  errs = parse(bad, cfg);
  CHECK(has(errs, "backend: must be kubernetes or etcd (is \"zookeeper\")"));
  CHECK(has(errs, "etcd.endpoints[1]: must be a string"));
  CHECK(has(errs, "etcd.colour: unknown field"));
  CHECK(has(errs, "etcd.password: must be a string"));
  bad["backend"] = "etcd";
  errs = parse(bad, cfg);
  CHECK(has(errs, "etcd.endpoints[0]: must start with http:// or https://"));
  CHECK(has(errs, "etcd.prefix: must start with /"));
  CHECK(has(errs, "etcd.cert_file, etcd.key_file: must be set together"));
  CHECK(has(errs, "etcd.username, etcd.password: must be set together"));
  bad["etcd"] = {{"endpoints", json::array()}};
  CHECK(has(parse(bad, cfg), "etcd.endpoints: must list at least one endpoint"));
  bad["etcd"] = "http://x";
  CHECK(has(parse(bad, cfg), "etcd: must be an object"));

  agent_config a, b;
  REQUIRE(parse(doc, a, over).empty());
  b = a;
  b.etcd.prefix = "/other";
  CHECK(a.restart_fields_changed(b) == std::vector<std::string>{"etcd"});
}

TEST_CASE("bad timing relations and module settings are errors") {
  agent_config cfg;
  json doc = test::short_config();
  doc["timings"]["renew_deadline"] = "3s";   // > lease_duration 2s
  doc["modules"][0]["settings"]["interval_ms"] = 0;
  auto errs = parse(doc, cfg);
  CHECK(has(errs, "timings.lease_duration: must be > renew_deadline"));
  CHECK(has(errs, "modules[0].settings.interval_ms"));
}

TEST_CASE("invalid JSON and a missing file are one clear error each") {
  agent_config cfg;
  auto mods = make_builtin_modules();
  auto errs = parse_config("{\"modules\": [", *mods.registry, {}, test_env(), cfg);
  REQUIRE(errs.size() == 1);
  CHECK(has(errs, "$: invalid JSON"));
  errs = load_config("/nonexistent/leasehold.json", *mods.registry, {}, test_env(), cfg);
  REQUIRE(errs.size() == 1);
  CHECK(has(errs, "/nonexistent/leasehold.json: cannot read"));
}

TEST_CASE("flags and environment override the file; environment fills defaults") {
  json doc = test::short_config();
  doc["identity"] = "from-file";
  doc["namespace"] = "file-ns";
  config_overrides over;
  over.identity = "from-flag";
  over.retry_period = "250ms";
  agent_config cfg;
  auto errs = parse(doc, cfg, over);
  REQUIRE_MESSAGE(errs.empty(), joined(errs));
  CHECK(cfg.identity == "from-flag");
  CHECK(cfg.ns == "file-ns");
  CHECK(cfg.timings.retry_period == caf::timespan{std::chrono::milliseconds(250)});

  over = {};
  over.lease_duration = "soon";
  CHECK(has(parse(doc, cfg, over), "--lease-duration: invalid duration \"soon\""));

  doc.erase("identity");
  doc.erase("namespace");
  auto env = test_env();
  env.pod_name = "pod-7";
  env.service_account_namespace = "sa-ns";
  errs = parse(doc, cfg, {}, env);
  REQUIRE(errs.empty());
  CHECK(cfg.identity == "pod-7");
  CHECK(cfg.ns == "sa-ns");
  env.pod_namespace = "pod-ns";
  parse(doc, cfg, {}, env);
  CHECK(cfg.ns == "pod-ns");
}

TEST_CASE("restart-only fields are told apart from modules") {
  agent_config a, b;
  REQUIRE(parse(test::short_config(), a).empty());
  REQUIRE(parse(test::short_config(false), b).empty());
  CHECK(a.restart_fields_changed(b).empty());
  json doc = test::short_config();
  doc["lease_name"] = "other";
  doc["timings"]["retry_period"] = "200ms";
  REQUIRE(parse(doc, b).empty());
  auto changed = a.restart_fields_changed(b);
  CHECK(changed == std::vector<std::string>{"lease_name", "timings.retry_period"});
}

namespace {

/// Captures what a json_logger writes.
struct captured_log {
  std::FILE* file = std::tmpfile();
  ~captured_log() { std::fclose(file); }
  std::vector<json> lines() {
    std::fflush(file);
    std::rewind(file);
    std::vector<json> out;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), file))
      out.push_back(json::parse(buf));
    return out;
  }
};

runtime_event event(event_type t) {
  runtime_event e;
  e.type = t;
  e.identity = "a";
  e.lease = "default/x";
  return e;
}

} // namespace

TEST_CASE("the JSON log has level, time, msg and fields, and drops repeats within a state") {
  captured_log cap;
  json_logger log(log_level::info, "a", "default/x", cap.file);
  auto sink = log.sink();
  auto err = event(event_type::api_error);
  err.error.kind = error_kind::connection_refused;
  err.error.verb = "GET";
  err.error.path = "/apis/x";
  sink(err);
  sink(err);                                  // another elector, same failure: dropped
  sink(event(event_type::renewed));           // not logged
  auto failed = err;
  failed.type = event_type::api_request_failed;
  sink(failed);                               // every failed request: a metric, not logged
  auto lost = event(event_type::term_lost);
  lost.term = 4;
  lost.reason = "renew deadline";
  sink(lost);                                 // a state change
  sink(err);                                  // logged again once
  sink(err);
  auto out = event(event_type::module_output);
  out.module = "tick";
  out.detail = "same";
  sink(out);
  sink(out);                                  // module output is content: kept
  log.log(log_level::debug, "hidden");
  auto lines = cap.lines();
  REQUIRE(lines.size() == 6);
  CHECK(lines[0]["level"] == "warn");
  CHECK(lines[0]["msg"] == "API request failed");
  CHECK(lines[0]["error_kind"] == "connection_refused");
  CHECK(lines[0]["identity"] == "a");
  CHECK(lines[0]["lease"] == "default/x");
  auto time = lines[0]["time"].get<std::string>();
  CHECK(time.size() == 24);
  CHECK(time.back() == 'Z');
  // The dropped repeat is counted and summarised when the state changes.
  CHECK(lines[1]["msg"] == "API request failed … repeated 1 times in 0 s");
  CHECK(lines[1]["repeated"] == 1);
  CHECK(lines[1]["error_kind"] == "connection_refused");
  CHECK(lines[2]["msg"] == "stopped leading");
  CHECK(lines[2]["term"] == 4);
  CHECK(lines[3]["msg"] == "API request failed");
  CHECK(lines[4]["line"] == "same");
  CHECK(lines[5]["line"] == "same");
}

TEST_CASE("log format text: time, LEVEL, the same words, then key=value; JSON by default") {
  captured_log cap;
  json_logger log(log_level::info, "a", "default/x", cap.file);
  auto sink = log.sink();
  auto acquired = event(event_type::term_acquired);
  acquired.term = 3;
  sink(acquired);
  log.set_format(log_format::text);
  sink(acquired);
  log.log(log_level::warn, "config file rejected, the running config stays",
          {{"path", "/etc/a b.yaml"}, {"count", 2}});
  std::fflush(cap.file);
  std::rewind(cap.file);
  std::vector<std::string> lines;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), cap.file))
    lines.emplace_back(buf);
  REQUIRE(lines.size() == 3);
  auto first = json::parse(lines[0]);   // JSON until told otherwise
  CHECK(first["msg"] == "became leader");
  auto time = first["time"].get<std::string>();
  CAPTURE(lines[1]);
  CHECK(lines[1].size() > time.size());
  CHECK(lines[1].substr(time.size()) == " INFO  became leader  identity=a lease=default/x term=3\n");
  CHECK(lines[2].substr(time.size())
        == " WARN  config file rejected, the running config stays  identity=a lease=default/x "
           "path=\"/etc/a b.yaml\" count=2\n");
  CHECK(parse_log_format("text") == log_format::text);
  CHECK(parse_log_format("json") == log_format::json);
  CHECK_FALSE(parse_log_format("xml"));
}

TEST_CASE("one line per fact: the config and the shared watch stream said once for every lease") {
  captured_log cap;
  json_logger log(log_level::info, "a", "default/x", cap.file);
  auto sink = log.sink();
  for (auto lease : {"default/x", "default/work-1", "default/work-2"}) {
    auto applied = event(event_type::config_applied);
    applied.lease = lease;
    sink(applied);
    auto up = event(event_type::watch_changed);
    up.lease = lease;
    up.detail = "up";
    sink(up);
  }
  auto started = event(event_type::module_started);   // a module's lease's own fact: kept
  started.lease = "default/work-1";
  started.module = "work-1";
  sink(started);
  auto lines = cap.lines();
  std::map<std::string, int> count;
  for (auto& l : lines)
    ++count[l["msg"].get<std::string>()];
  CHECK(count["config applied"] == 1);
  CHECK(count["lease watch open"] == 1);
  CHECK(count["module started"] == 1);
  CHECK(lines.size() == 3);
}

TEST_CASE("log shape: reasons in words with the raw code apart, child streams, 409 at debug") {
  captured_log cap;
  json_logger log(log_level::info, "a", "default/x", cap.file);
  auto sink = log.sink();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto crashed = event(event_type::module_crashed);
  crashed.module = "job";
  auto how = describe_exit(
    caf::make_error(caf::sec::runtime_error, "exec: command exited with status 1"), sys);
  crashed.reason = how.words;
  crashed.code = how.code;
  sink(crashed);
  auto stopped = event(event_type::module_stopped);
  stopped.module = "job";
  how = describe_exit(caf::exit_reason::user_shutdown, sys);
  stopped.reason = how.words;
  stopped.code = how.code;
  sink(stopped);
  auto conflict = event(event_type::api_error);
  conflict.error.kind = error_kind::conflict;
  sink(conflict);                                       // a lost race: debug, hidden at info
  auto out = event(event_type::module_output);
  out.module = "job";
  out.detail = "hello";
  out.reason = "stdout";
  sink(out);
  out.detail = "oops";
  out.reason = "stderr";
  sink(out);
  out.detail = "exited with status 1";                  // the module about its child
  out.reason.clear();
  sink(out);
  auto lines = cap.lines();
  REQUIRE(lines.size() == 5);
  CHECK(lines[0]["reason"] == "exec: command exited with status 1");
  CHECK(lines[1]["reason"] == "stopped on request");
  for (int i : {0, 1}) {
    auto reason = lines[i]["reason"].get<std::string>();
    CHECK(reason.find("caf") == std::string::npos);
    CHECK(reason.find("error(") == std::string::npos);
  }
  // The crash keeps CAF's code apart; a stop that was asked for has none
  // (no "exit_reason(user_shutdown)" for a person to decode).
  CHECK_FALSE(lines[0]["code"].get<std::string>().empty());
  CHECK_FALSE(lines[1].contains("code"));
  CHECK(lines[2]["msg"] == "child output");
  CHECK(lines[2]["stream"] == "stdout");
  CHECK(lines[2]["module"] == "job");
  CHECK(lines[2]["line"] == "hello");
  CHECK(lines[3]["stream"] == "stderr");
  CHECK(lines[4]["msg"] == "module output");
  CHECK_FALSE(lines[4].contains("stream"));
  for (auto& l : lines) {   // one timestamp key: RFC 3339, UTC, milliseconds
    auto t = l["time"].get<std::string>();
    CHECK(t.size() == 24);
    CHECK(t[10] == 'T');
    CHECK(t[19] == '.');
    CHECK(t.back() == 'Z');
  }

  captured_log dbg;
  json_logger debug_log(log_level::debug, "a", "default/x", dbg.file);
  debug_log.sink()(conflict);
  auto debug_lines = dbg.lines();
  REQUIRE(debug_lines.size() == 1);
  CHECK(debug_lines[0]["level"] == "debug");
}

TEST_CASE("log repeats are summarised at least every summary period, not hidden") {
  captured_log cap;
  json_logger log(log_level::info, "a", "default/x", cap.file, std::chrono::milliseconds(50));
  auto sink = log.sink();
  auto crashed = event(event_type::module_crashed);
  crashed.module = "job";
  crashed.reason = "exec: command exited with status 1";
  for (int i = 0; i < 5; ++i)
    sink(crashed);                        // 1 line, 4 counted
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  sink(crashed);                          // the period has passed: the summary of 5
  sink(crashed);
  auto lines = cap.lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["msg"] == "module crashed");
  CHECK(lines[1]["msg"].get<std::string>().rfind("module crashed … repeated 5 times in ", 0) == 0);
  CHECK(lines[1]["repeated"] == 5);
  CHECK(lines[1]["module"] == "job");
}

TEST_CASE("the journal writes one flushed JSON line per journaled event") {
  test::temp_dir dir;
  auto path = dir.file("j.jsonl");
  {
    journal j(path, "a");
    REQUIRE(j.ok());
    auto sink = j.sink();
    auto acquired = event(event_type::term_acquired);
    acquired.term = 2;
    acquired.valid_until_ns = 123456789;
    sink(acquired);
    auto started = event(event_type::module_started);
    started.module = "tick";
    started.leader_only = true;
    started.term = 2;
    sink(started);
    sink(event(event_type::leader_changed));   // not journaled
    // Flushed per line: readable before the journal closes.
    auto text = test::read_file(path);
    CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  }
  auto text = test::read_file(path);
  auto first = json::parse(text.substr(0, text.find('\n')));
  CHECK(first["event"] == "term_acquired");
  CHECK(first["identity"] == "a");
  CHECK(first["term"] == 2);
  CHECK(first["mono_ns"].is_number_integer());
  CHECK(first["valid_until_ns"] == 123456789);   // the elector's fence
  auto second = json::parse(text.substr(text.find('\n') + 1));
  CHECK(second["event"] == "module_started");
  CHECK(second["module"] == "tick");
  CHECK(second["leader_only"] == true);
}

TEST_CASE("metrics render as valid Prometheus text") {
  metrics m;
  auto renewed = event(event_type::renewed);
  renewed.value = 3;   // ms
  m.record(renewed);
  renewed.value = 40;
  m.record(renewed);
  m.record(event(event_type::term_acquired));
  auto err = event(event_type::api_request_failed);
  err.error.kind = error_kind::timeout;
  m.record(err);
  runner_status st;
  st.state = runner_state::leader;
  st.modules.push_back({"ti\"ck", "ticker", true, module_state::running, 2});
  auto text = m.render(st);
  CHECK(test::prometheus_violations(text).empty());
  CHECK(text.find("leasehold_is_leader 1\n") != std::string::npos);
  CHECK(text.find("leasehold_leadership_transitions_total 1\n") != std::string::npos);
  CHECK(text.find("leasehold_renew_latency_seconds_bucket{le=\"0.005\"} 1\n") != std::string::npos);
  CHECK(text.find("leasehold_renew_latency_seconds_bucket{le=\"0.05\"} 2\n") != std::string::npos);
  CHECK(text.find("leasehold_renew_latency_seconds_count 2\n") != std::string::npos);
  CHECK(text.find("leasehold_api_errors_total{kind=\"timeout\"} 1\n") != std::string::npos);
  CHECK(text.find("leasehold_module_restarts_total{module=\"ti\\\"ck\"} 2\n") != std::string::npos);
  CHECK(text.find("leasehold_module_running{module=\"ti\\\"ck\"} 1\n") != std::string::npos);
  CHECK(test::prometheus_violations("bad line\nx{a=\"b\"} 1\n")
        == std::vector<std::string>{"bad line"});
}

TEST_CASE("metrics: every failed request by kind, lost races apart, API unreachable since, "
          "build info, process metrics") {
  metrics m;
  m.set_build_info("9.8.7", "etcd");
  auto failed = [&](error_kind k, int n) {
    auto e = event(event_type::api_request_failed);
    e.error.kind = k;
    for (int i = 0; i < n; ++i)
      m.record(e);
  };
  failed(error_kind::connection_refused, 7);   // one outage, seven failed requests
  failed(error_kind::timeout, 2);
  failed(error_kind::conflict, 3);             // lost races: answers, not errors
  failed(error_kind::already_exists, 1);
  auto log_line = event(event_type::api_error);   // what the log says: not counted again
  log_line.error.kind = error_kind::connection_refused;
  m.record(log_line);
  runner_status st;
  st.api_unreachable_ms = 4500;
  auto text = m.render(st);
  CHECK(test::prometheus_violations(text).empty());
  auto has_line = [&](const std::string& l) { return text.find("\n" + l + "\n") != std::string::npos; };
  CHECK(has_line("leasehold_api_errors_total{kind=\"connection_refused\"} 7"));
  CHECK(has_line("leasehold_api_errors_total{kind=\"timeout\"} 2"));
  CHECK(text.find("leasehold_api_errors_total{kind=\"conflict\"}") == std::string::npos);
  CHECK(text.find("leasehold_api_errors_total{kind=\"already_exists\"}") == std::string::npos);
  CHECK(has_line("leasehold_api_lost_races_total{kind=\"conflict\"} 3"));
  CHECK(has_line("leasehold_api_lost_races_total{kind=\"already_exists\"} 1"));
  CHECK(has_line("# TYPE leasehold_api_unreachable_since_timestamp_seconds gauge"));
  CHECK(has_line("leasehold_api_unreachable_seconds 4.5"));
  auto value = [&](const std::string& name) {
    auto at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size() + 2));
  };
  auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(value("leasehold_api_unreachable_since_timestamp_seconds") == doctest::Approx(now - 4.5).epsilon(1e-8));
  CHECK(has_line("leasehold_build_info{version=\"9.8.7\",backend=\"etcd\",caf_version=\"0.17.6\"} 1"));
  // The standard process metrics, read from /proc.
  CHECK(value("process_cpu_seconds_total") >= 0);
  CHECK(value("process_resident_memory_bytes") > 1e6);
  CHECK(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
  CHECK(value("process_open_fds") >= 3);
  CHECK(value("process_max_fds") >= value("process_open_fds"));
  CHECK(value("process_start_time_seconds") <= now);
  CHECK(value("process_start_time_seconds") > now - 3600);
  CHECK(has_line("# TYPE process_cpu_seconds_total counter"));
  CHECK(value("process_threads") >= 1);
  CHECK(has_line("# TYPE leasehold_transport_workers gauge"));
  CHECK(has_line("# TYPE leasehold_watch_streams gauge"));
  CHECK(has_line("# TYPE leasehold_transport_requests_total counter"));

  st.api_unreachable_ms = -1;   // answering again
  text = m.render(st);
  CHECK(has_line("leasehold_api_unreachable_since_timestamp_seconds 0"));
  CHECK(has_line("leasehold_api_unreachable_seconds 0"));
}

TEST_CASE("metrics: labelled counters at 0 before their first event, timestamps named so, "
          "the timings") {
  metrics m;
  election_timings t;
  t.lease_duration = std::chrono::milliseconds(2500);
  t.renew_deadline = std::chrono::milliseconds(1500);
  m.set_timings(t);
  runner_status st;
  auto text = m.render(st);
  CHECK(test::prometheus_violations(text).empty());
  auto has_line = [&](const std::string& l) { return text.find("\n" + l + "\n") != std::string::npos; };
  // Nothing failed yet: every kind is there at 0, so the first failure is an increase.
  for (auto kind : {"connection_refused", "timeout", "server_error", "throttled", "invalid",
                    "forbidden", "unauthorized", "not_found", "tls_error", "disconnected",
                    "malformed_body", "other"}) {
    CAPTURE(kind);
    CHECK(has_line(std::string("leasehold_api_errors_total{kind=\"") + kind + "\"} 0"));
  }
  CHECK(has_line("leasehold_api_lost_races_total{kind=\"conflict\"} 0"));
  CHECK(has_line("leasehold_api_lost_races_total{kind=\"already_exists\"} 0"));
  CHECK(text.find("kind=\"none\"") == std::string::npos);
  CHECK(has_line("leasehold_lease_duration_seconds 2.5"));
  CHECK(has_line("leasehold_renew_deadline_seconds 1.5"));
  // A series that holds a Unix time ends in _timestamp_seconds (Prometheus's
  // naming); process_start_time_seconds keeps the client libraries' name.
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("# HELP ", 0) != 0 || l.find("Unix time") == std::string::npos)
      continue;
    auto name = l.substr(7, l.find(' ', 7) - 7);
    CAPTURE(name);
    CHECK(name.size() > 18);
    CHECK(name.compare(name.size() - 18, 18, "_timestamp_seconds") == 0);
  }
  CHECK(text.find("leasehold_api_unreachable_since_seconds") == std::string::npos);
}

TEST_CASE("probes: lease watchdog, failed every-replica module, readiness") {
  election_timings t;   // 15s lease, 2s retry: limit 17s
  runner_status st;
  st.state = runner_state::leader;
  st.electing = true;
  st.ms_since_renew = 16000;
  CHECK(liveness(st, t).ok);
  st.ms_since_renew = 17001;
  auto p = liveness(st, t);
  CHECK_FALSE(p.ok);
  CHECK(p.body["reason"].get<std::string>().find("lease watchdog") != std::string::npos);
  st.ms_since_renew = 10;
  st.modules.push_back({"hook", "webhook", false, module_state::failed, 5});
  CHECK(liveness(st, t).ok);                            // /livez: alive and electing
  p = health(st, t);                                    // /healthz: and no crash loop
  CHECK_FALSE(p.ok);
  CHECK(p.body["reason"].get<std::string>().find("module hook is crash-looping")
        != std::string::npos);
  CHECK_FALSE(liveness(std::nullopt, t).ok);
  CHECK_FALSE(health(std::nullopt, t).ok);
  st.modules.clear();
  st.electing = false;
  CHECK_FALSE(liveness(st, t).ok);                      // leading but no elector
  st.electing = true;

  // Readiness, one source (the runner's status): a follower once the API
  // answered, through blips shorter than renew_deadline (10 s here).
  st.state = runner_state::follower;
  st.holder.clear();
  st.api_answered = false;
  CHECK_FALSE(readiness(st, t).ok);                     // API never answered
  st.api_answered = true;
  CHECK(readiness(st, t).ok);
  st.api_unreachable_ms = 3000;                         // a 3 s outage: a blip
  st.api_error = "GET ...: connection_refused";
  CHECK(readiness(st, t).ok);
  st.api_unreachable_ms = 10001;                        // longer than renew_deadline
  auto p2 = readiness(st, t);
  CHECK_FALSE(p2.ok);
  CHECK(p2.body["reason"].get<std::string>().find("lease API failing for 10001ms (longer than "
                                                  "renew_deadline, 10000ms): GET ...") != std::string::npos);
  // The leader with a valid fence is ready through the outage; past its
  // renew deadline (its term is ending) it is not.
  st.state = runner_state::leader;
  st.ms_since_renew = 9000;
  CHECK(readiness(st, t).ok);
  st.ms_since_renew = 10001;
  CHECK_FALSE(readiness(st, t).ok);
  st.state = runner_state::idle;
  st.electing = false;
  CHECK(readiness(st, t).ok);                           // idle: nothing to elect for
}

TEST_CASE("default identity: POD_NAME, else hostname plus the process suffix") {
  auto env = test_env();
  env.process_suffix = "0123456789ab";
  CHECK(default_identity(env) == "host-1_0123456789ab");
  env.pod_name = "pod-7";
  CHECK(default_identity(env) == "pod-7");
  auto a = config_environment::from_process();
  auto b = config_environment::from_process();
  CHECK(a.process_suffix.size() == 12);
  CHECK(a.process_suffix != b.process_suffix);
}

TEST_CASE("names the API would reject with 422 are config errors") {
  for (const std::string& bad : {std::string("My_Lease"), std::string("-x"), std::string("x-"),
                                std::string("a..b"), std::string("UPPER"), std::string(254, 'a')}) {
    CAPTURE(bad);
    auto doc = test::short_config();
    doc["lease_name"] = bad;
    agent_config cfg;
    auto errs = parse(doc, cfg);
    REQUIRE(errs.size() == 1);
    CHECK(errs[0].rfind("lease_name: must be a lowercase RFC 1123 subdomain", 0) == 0);
  }
  for (auto good : {"a", "agent-test", "a.b-c.d9"}) {
    auto doc = test::short_config();
    doc["lease_name"] = good;
    agent_config cfg;
    CHECK(parse(doc, cfg).empty());
  }
  auto doc = test::short_config();
  doc["namespace"] = "a.b";   // a label: no dots
  agent_config cfg;
  auto errs = parse(doc, cfg);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].rfind("namespace: must be a lowercase RFC 1123 label", 0) == 0);
}

TEST_CASE("probes: a replica that handed over for a crash-looping module is live, not ready") {
  election_timings t;
  runner_status st;
  st.state = runner_state::follower;
  st.electing = true;
  st.holder = "other";
  module_status job{"job", "exec", true, module_state::stopped, 3};
  job.max_restarts = 2;
  job.within = std::chrono::seconds(10);
  st.modules.push_back(job);
  st.handover_module = "job";
  st.handover_backoff = std::chrono::seconds(12);
  st.api_answered = true;
  CHECK(liveness(st, t).ok);
  for (auto& p : {health(st, t), readiness(st, t)}) {
    CHECK_FALSE(p.ok);
    auto reason = p.body["reason"].get<std::string>();
    CHECK(reason.find("module job crash-looped") != std::string::npos);
    CHECK(reason.find("competing again in 12000ms") != std::string::npos);
  }
  auto j = status_json(st, t.lease_duration);
  CHECK(j["handover"]["module"] == "job");
  CHECK(j["handover"]["backing_off_ms"] == 12000);
  CHECK(j["modules"][0]["restart_policy"]["max_restarts"] == 2);
  CHECK(j["modules"][0]["restart_policy"]["within_ms"] == 10000);
  CHECK(j["modules"][0]["backing_off_until"].get<std::string>().back() == 'Z');
  st.handover_backoff = caf::timespan{-1};   // competing again
  CHECK(health(st, t).ok);
  CHECK(readiness(st, t).ok);
}

TEST_CASE("the shipped RBAC grants every verb the agent uses") {
  // Regression: deploy/rbac.yaml granted get/create/update only, so
  // every watch was forbidden and the agents polled.
  const char* root = std::getenv("LEASEHOLD_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  auto docs = YAML::LoadAllFromFile(std::string(root) + "/deploy/rbac.yaml");
  std::map<std::string, std::set<std::string>> granted;   // "group/resource" -> verbs
  for (auto& d : docs) {
    if (!d["kind"] || d["kind"].as<std::string>() != "Role")
      continue;
    for (auto rule : d["rules"])
      for (auto group : rule["apiGroups"])
        for (auto res : rule["resources"])
          for (auto verb : rule["verbs"])
            granted[group.as<std::string>() + "/" + res.as<std::string>()].insert(verb.as<std::string>());
  }
  // GET/POST/PUT of a Lease; the namespace's Lease collection watched
  // (watch=1 on the collection: "watch", and "list" for its first state).
  for (auto verb : {"get", "create", "update", "list", "watch"})
    CHECK_MESSAGE(granted["coordination.k8s.io/leases"].count(verb) == 1, verb);
  CHECK(granted["/events"].count("create") == 1);   // POST of an Event
  CHECK(granted["/events"].count("patch") == 1);    // a repeated Event's count
  // The balanced groups' LeaseCandidates.
  for (auto verb : {"get", "list", "watch", "create", "update", "delete"})
    CHECK_MESSAGE(granted["coordination.k8s.io/leasecandidates"].count(verb) == 1, verb);
}

TEST_CASE("one run reports every error of every stage") {
  auto doc = test::short_config();
  doc["timings"]["retry_period"] = "2x";   // a timing error must not hide the modules'
  doc["modules"] = json::array();
  for (int i = 0; i < 7; ++i)   // seven modules with bad settings: seven errors
    doc["modules"].push_back({{"type", "ticker"},
                              {"name", "t" + std::to_string(i)},
                              {"settings", {{"interval_ms", 0}}}});
  doc["modules"].push_back({{"type", "exec"},
                            {"name", "job"},
                            {"restart", {{"max_restarts", "x"}}},
                            {"settings", {{"command", {"true"}}, {"grace_ms", 5000}}}});
  agent_config cfg;
  auto errs = parse(doc, cfg);
  CAPTURE(joined(errs));
  CHECK(has(errs, "timings.retry_period: invalid duration"));
  for (int i = 0; i < 7; ++i)
    CHECK(has(errs, "modules[" + std::to_string(i) + "].settings.interval_ms"));
  CHECK(has(errs, "modules[7].restart.max_restarts"));
  CHECK(has(errs, "modules[7].settings.grace_ms: 5000ms must be below "
                  "timings.module_stop_timeout (400ms)"));
  // Timing relations are checked beside other stages' errors too.
  doc = test::short_config();
  doc["timings"]["renew_deadline"] = "3s";
  doc["colour"] = "blue";
  doc["modules"][0]["settings"]["interval_ms"] = 0;
  errs = parse(doc, cfg);
  CHECK(has(errs, "colour: unknown field"));
  CHECK(has(errs, "timings.lease_duration: must be > renew_deadline"));
  CHECK(has(errs, "modules[0].settings.interval_ms"));
}

TEST_CASE("durations and identities: the error says why and names the bound") {
  auto bad = [](const std::string& text) {
    auto doc = test::short_config();
    doc["timings"]["retry_period"] = text;
    agent_config cfg;
    auto errs = parse(doc, cfg);
    return joined(errs);
  };
  CHECK(bad("-5s").find("invalid duration \"-5s\": negative; durations are 0 or more")
        != std::string::npos);
  CHECK(bad("1000000h").find("invalid duration \"1000000h\": above the maximum of 24h")
        != std::string::npos);
  CHECK(bad("2").find("invalid duration \"2\": missing unit after \"2\" (ns, us, ms, s, m or h)")
        != std::string::npos);
  CHECK(bad("2x").find("unknown unit \"x\"") != std::string::npos);
  CHECK(parse_duration("24h"));
  CHECK_FALSE(parse_duration("24h1s"));
  CHECK(duration_error("15s").empty());

  agent_config cfg;
  config_overrides over;
  over.identity = "";
  auto errs = parse(test::short_config(), cfg, over);
  CAPTURE(joined(errs));
  CHECK(has(errs, "--identity: must not be empty"));
  over.identity = std::string(5000, 'a');
  errs = parse(test::short_config(), cfg, over);
  CHECK(has(errs, "--identity: 5000 characters, above the limit of 253"));
  over.identity = std::string(253, 'a');
  CHECK(parse(test::short_config(), cfg, over).empty());
  auto doc = test::short_config();
  doc["identity"] = "";
  CHECK(has(parse(doc, cfg), "identity: must not be empty"));
}

TEST_CASE("YAML configs and LEASEHOLD_* variables: flag > env > file > default") {
  auto mods = make_builtin_modules();
  const std::string yaml = R"(# a ConfigMap's config.yaml
lease_name: agent-test
watch: false
timings:
  lease_duration: 2s
  renew_deadline: 1500ms
  retry_period: 300ms
  module_stop_timeout: 400ms
modules:
  - type: ticker
    name: tick
    settings: {interval_ms: 200}
  - type: leader_endpoint
)";
  agent_config from_yaml, from_json;
  auto errs = parse_config(yaml, *mods.registry, {}, test_env(), from_yaml);
  CAPTURE(joined(errs));
  REQUIRE(errs.empty());
  auto doc = test::short_config();
  doc["watch"] = false;
  doc.erase("timings");
  doc["timings"] = {{"lease_duration", "2s"}, {"renew_deadline", "1500ms"},
                    {"retry_period", "300ms"}, {"module_stop_timeout", "400ms"}};
  REQUIRE(parse(doc, from_json).empty());
  CHECK(from_yaml.lease_name == "agent-test");
  CHECK_FALSE(from_yaml.watch);
  CHECK(from_yaml.timings.retry_period == from_json.timings.retry_period);
  CHECK(from_yaml.modules.modules.size() == 2);
  CHECK(from_yaml.modules.modules[0].settings == from_json.modules.modules[0].settings);
  // YAML errors: the parser's position, and paths as for JSON.
  errs = parse_config("lease_name: [", *mods.registry, {}, test_env(), from_yaml);
  REQUIRE(errs.size() == 1);
  CHECK(has(errs, "$: invalid YAML"));
  errs = parse_config("watch: \"true\"\ncolour: blue\n", *mods.registry, {}, test_env(), from_yaml);
  CHECK(has(errs, "watch: must be true or false"));   // quoted: a string
  CHECK(has(errs, "colour: unknown field"));

  // The environment fills what no flag set; the file comes after both.
  std::map<std::string, std::string> env{{"LEASEHOLD_LOG_LEVEL", "debug"},
                                         {"LEASEHOLD_RETRY_PERIOD", "250ms"},
                                         {"LEASEHOLD_IDENTITY", "from-env"},
                                         {"POD_NAME", "pod-name"},
                                         {"LEASEHOLD_LEASE_NAME", ""}};   // empty: unset
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  config_overrides over;
  over.log_level = "warn";   // a flag
  apply_environment(over, getenv);
  CHECK(over.log_level == std::optional<std::string>("warn"));
  CHECK(over.retry_period == std::optional<std::string>("250ms"));
  CHECK(over.identity == std::optional<std::string>("from-env"));
  CHECK_FALSE(over.lease_name);
  agent_config cfg;
  REQUIRE(parse(test::short_config(), cfg, over).empty());
  CHECK(cfg.log_level == "warn");
  CHECK(cfg.timings.retry_period == caf::timespan{std::chrono::milliseconds(250)});
  CHECK(cfg.identity == "from-env");
  CHECK(cfg.lease_name == "agent-test");   // the file's
  env.erase("LEASEHOLD_IDENTITY");
  config_overrides pod;
  apply_environment(pod, getenv);
  CHECK(pod.identity == std::optional<std::string>("pod-name"));
}

TEST_CASE("modules' own leases and balance groups: layout, YAML, every error in one pass") {
  auto yaml = R"(
lease_name: main
modules:
  - {type: ticker, name: tick}
  - {type: leader_endpoint}
  - {type: ticker, name: report, lease: reports}
  - {type: ticker, name: w0, balance: workers}
  - {type: ticker, name: w1, balance: workers, lease: workers-one}
  - {type: ticker, name: w1-side, balance: workers, lease: workers-one}
  - {type: ticker, name: own-main, lease: main}
)";
  auto mods = make_builtin_modules();
  agent_config cfg;
  auto errs = parse_config(yaml, *mods.registry, {}, test_env(), cfg);
  REQUIRE_MESSAGE(errs.empty(), joined(errs));
  CHECK(cfg.leases.main.lease == "main");
  std::vector<std::string> main_modules;
  for (auto& m : cfg.leases.main.modules.modules)
    main_modules.push_back(m.name);
  CHECK(main_modules == std::vector<std::string>{"tick", "leader_endpoint", "own-main"});
  REQUIRE(cfg.leases.others.size() == 3);
  CHECK(cfg.leases.others[0].lease == "reports");
  CHECK(cfg.leases.others[0].group == "");
  CHECK(cfg.leases.others[1].lease == "w0");   // a balanced module's lease: its name
  CHECK(cfg.leases.others[1].group == "workers");
  CHECK(cfg.leases.others[2].lease == "workers-one");
  CHECK(cfg.leases.others[2].modules.modules.size() == 2);
  auto groups = cfg.leases.groups();
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].first == "workers");
  CHECK(groups[0].second == std::vector<std::string>{"w0", "workers-one"});

  // Each lease's runner gets its modules with their lease resolved; a runner
  // (the embedding API) refuses a module of another lease.
  CHECK(cfg.leases.others[1].modules.modules[0].lease == "w0");
  CHECK(check_leases(cfg.leases.others[1].modules, "w0").empty());
  CHECK(check_leases(cfg.leases.main.modules, "main").empty());
  auto refused = check_leases(cfg.leases.others[0].modules, "main");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0] == "modules[0].lease: \"reports\" is not this runner's lease \"main\" (one "
                      "runner per lease: give the module to its lease's runner)");

  // A reload may change settings, not which lease or group a module runs under.
  agent_config moved;
  auto other = std::string(yaml);
  other.replace(other.find("lease: reports"), 14, "lease: report2");
  REQUIRE(parse_config(other, *mods.registry, {}, test_env(), moved).empty());
  CHECK_FALSE(cfg.leases.same_leases(moved.leases));
  agent_config retuned;
  other = std::string(yaml);
  other.replace(other.find("name: w0"), 8, "name: w0, settings: {interval_ms: 50}");
  REQUIRE(parse_config(other, *mods.registry, {}, test_env(), retuned).empty());
  CHECK(cfg.leases.same_leases(retuned.leases));

  // Every error, each naming its field.
  json doc = {{"lease_name", "main"},
              {"modules",
               {{{"type", "leader_endpoint"}, {"balance", "g"}},              // 0: not leader-only
                {{"type", "ticker"}, {"name", "Bad_Name"}, {"balance", "g"}}, // 1: default lease
                {{"type", "ticker"}, {"name", "t2"}, {"balance", "G!"}},       // 2: group name
                {{"type", "ticker"}, {"name", "t3"}, {"balance", "g"}, {"lease", "main"}},
                {{"type", "ticker"}, {"name", "t4"}, {"lease", "shared"}},
                {{"type", "ticker"}, {"name", "t5"}, {"lease", "shared"}, {"balance", "g"}},
                {{"type", "ticker"}, {"name", "t6"}, {"lease", 7}}}}};
  errs = parse(doc, cfg);
  CAPTURE(joined(errs));
  CHECK(has(errs, "modules[0].balance: only a leader-only module runs under a lease of its own"));
  CHECK(has(errs, "modules[1].name: must be a lowercase RFC 1123 subdomain"));
  CHECK(has(errs, "(a balanced module's lease is its name unless it sets lease)"));
  CHECK(has(errs, "modules[2].balance: must be a lowercase RFC 1123 label"));
  CHECK(has(errs, "modules[3].lease: \"main\" is the agent's own lease"));
  CHECK(has(errs, "modules[5].balance: lease \"shared\" is not balanced at modules[4]"));
  CHECK(has(errs, "modules[6].lease: must be a string"));
  CHECK(errs.size() == 6);
}

TEST_CASE("a balance group's settle time: balance: {group, settle_ms} beside the plain name, in "
          "JSON and YAML; bounds, one value per group and unknown fields named in one pass") {
  auto yaml = R"(
lease_name: main
modules:
  - {type: ticker, name: w0, balance: {group: workers, settle_ms: 250}}
  - {type: ticker, name: w1, balance: workers}
  - {type: ticker, name: w2, balance: {group: workers, settle_ms: 250}}
  - {type: ticker, name: x0, balance: {group: others}}
)";
  auto mods = make_builtin_modules();
  agent_config cfg;
  auto errs = parse_config(yaml, *mods.registry, {}, test_env(), cfg);
  REQUIRE_MESSAGE(errs.empty(), joined(errs));
  CHECK(cfg.leases.settle_ms == std::map<std::string, std::int64_t>{{"workers", 250}});
  CHECK(cfg.leases.others[0].group == "workers");
  CHECK(cfg.leases.others[3].group == "others");
  // A changed settle time takes a restart, like a changed group.
  agent_config retuned;
  auto other = std::string(yaml);
  other.replace(other.find("settle_ms: 250"), 14, "settle_ms: 500");
  other.replace(other.find("settle_ms: 250"), 14, "settle_ms: 500");
  REQUIRE(parse_config(other, *mods.registry, {}, test_env(), retuned).empty());
  CHECK(retuned.leases.settle_ms.at("workers") == 500);
  CHECK_FALSE(cfg.leases.same_leases(retuned.leases));

  json doc = {{"lease_name", "main"},
              {"modules",
               {{{"type", "ticker"}, {"name", "t0"}, {"balance", {{"group", "g"}, {"settle_ms", 100}}}},
                {{"type", "ticker"}, {"name", "t1"}, {"balance", {{"group", "g"}, {"settle_ms", 200}}}},
                {{"type", "ticker"}, {"name", "t2"}, {"balance", {{"group", "h"}, {"settle_ms", -1}}}},
                {{"type", "ticker"}, {"name", "t3"}, {"balance", {{"group", "h"}, {"settle_ms", 600001}}}},
                {{"type", "ticker"}, {"name", "t4"}, {"balance", {{"settle_ms", 10}, {"grup", "g"}}}},
                {{"type", "ticker"}, {"name", "t5"}, {"balance", 7}}}}};
  errs = parse(doc, cfg);
  CAPTURE(joined(errs));
  CHECK(has(errs, "modules[1].balance.settle_ms: group \"g\" has settle_ms 100 at modules[0] (is 200); "
                  "one settle time per group"));
  CHECK(has(errs, "modules[2].balance.settle_ms: must be an integer in [0, 600000]"));
  CHECK(has(errs, "modules[3].balance.settle_ms: must be an integer in [0, 600000]"));
  CHECK(has(errs, "modules[4].balance.group: missing (the balance group's name)"));
  CHECK(has(errs, "modules[4].balance.grup: unknown field (known: group, settle_ms)"));
  CHECK(has(errs, "modules[5].balance: must be a group name or an object"));
  CHECK(errs.size() == 6);
}

TEST_CASE("session: auto, on or off and session_lease_seconds from 1 to 86400, else named errors") {
  agent_config cfg;
  json doc = test::short_config();
  REQUIRE(parse(doc, cfg).empty());
  CHECK(cfg.session == "auto");
  CHECK(cfg.session_lease_seconds == 600);
  doc["session"] = "on";
  doc["session_lease_seconds"] = 30;
  REQUIRE(parse(doc, cfg).empty());
  CHECK(cfg.session == "on");
  CHECK(cfg.session_lease_seconds == 30);
  config_overrides over;
  over.session = "off";
  REQUIRE(parse(doc, cfg, over).empty());
  CHECK(cfg.session == "off");

  doc["session"] = "yes";
  doc["session_lease_seconds"] = 0;
  auto errs = parse(doc, cfg);
  CHECK(has(errs, "session: must be auto, on or off (is \"yes\")"));
  CHECK(has(errs, "session_lease_seconds: must be a whole number of seconds from 1 to 86400"
                  " (the leaseDurationSeconds readers that are not leasehold wait on a bound Lease)"));
}
