// One table of words for every event (include/leasehold/events.hpp): every
// event_type has a row, and both sinks that write words, the default sink
// and the agent's JSON log, say exactly the table's words.
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "leasehold/events.hpp"
#include "cmd/leasehold/json_log.hpp"
#include "test_support.hpp"

using namespace leasehold;

namespace {

/// The enumerators of `event_type` as the public header spells them.
std::vector<std::string> declared_event_types() {
  auto text = test::slurp(test::env_or("LEASEHOLD_SOURCE_ROOT", ".") + "/include/leasehold/events.hpp");
  auto begin = text.find("enum class event_type {");
  REQUIRE(begin != std::string::npos);
  auto body = text.substr(begin, text.find("};", begin) - begin);
  body = std::regex_replace(body, std::regex("//[^\n]*"), "");
  std::vector<std::string> out;
  std::regex name(R"(\b([a-z_][a-z0-9_]*)\s*(,|$))");
  body = body.substr(body.find('{') + 1);
  for (std::sregex_iterator it(body.begin(), body.end(), name), end; it != end; ++it)
    out.push_back((*it)[1]);
  return out;
}

/// An event that is `row`: of its type, and carrying what makes it the variant.
runtime_event event_of(const event_words& row) {
  runtime_event ev;
  ev.type = row.type;
  ev.identity = "a";
  ev.lease = "default/x";
  ev.module = "work";
  ev.term = 3;
  ev.holder = "b";
  ev.reason = "because";
  ev.detail = "down";
  ev.error.kind = error_kind::server_error;
  std::string v = row.variant;
  if (v == "lost_race")
    ev.error.kind = error_kind::conflict;
  else if (v == "refused")
    ev.error.kind = error_kind::invalid;
  else if (v == "up")
    ev.detail = "up";
  else if (v == "forbidden")
    ev.reason = "watch GET /apis/...: forbidden (403)";
  else if (v == "child")
    ev.reason = "stdout";
  else if (v == "fence_kill")
    ev.reason = "fence_kill";
  else if (v == "held")
    ev.detail = "held";
  return ev;
}

/// Everything written to a temporary FILE* by `write`.
template <class F>
std::string captured(F write) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  write(f);
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    out.append(buf, n);
  std::fclose(f);
  return out;
}

} // namespace

TEST_CASE("every event_type has a name and words: its own row, in the order of the enum") {
  auto declared = declared_event_types();
  REQUIRE(declared.size() >= 25);
  auto& table = event_words_table();
  REQUIRE(table.size() >= declared.size());
  std::set<std::string> names;
  for (size_t i = 0; i < declared.size(); ++i) {
    CAPTURE(declared[i]);
    auto t = static_cast<event_type>(i);
    CHECK(std::string(to_string(t)) == declared[i]);
    CHECK(table[i].type == t);
    CHECK(std::string(table[i].variant).empty());
    CHECK(!std::string(table[i].words).empty());
    names.insert(to_string(t));
  }
  CHECK(names.size() == declared.size());
  // The rest are variants of declared types, each reachable from an event.
  for (size_t i = declared.size(); i < table.size(); ++i) {
    std::string variant = table[i].variant;
    CAPTURE(variant);
    CHECK(static_cast<size_t>(table[i].type) < declared.size());
    CHECK(!std::string(table[i].variant).empty());
    CHECK(&words_for(event_of(table[i])) == &table[i]);
  }
}

TEST_CASE("the default sink says the table's words, for the rows the table gives it") {
  for (auto& row : event_words_table()) {
    std::string type = to_string(row.type), variant = row.variant;
    CAPTURE(type);
    CAPTURE(variant);
    auto out = captured([&](std::FILE* f) { default_event_sink(f)(event_of(row)); });
    if (!row.said_by_default) {
      CHECK(out.empty());
      continue;
    }
    CHECK(out.rfind(std::string("leasehold [a default/x] ") + row.words, 0) == 0);
  }
  // What it is about and why follow the words.
  runtime_event failed = event_of(event_words_table()[static_cast<size_t>(event_type::module_failed)]);
  auto line = captured([&](std::FILE* f) { default_event_sink(f)(failed); });
  CHECK(line == "leasehold [a default/x] module failed: over its restart intensity, not restarted "
                "(work, term 3): because\n");
}

TEST_CASE("the JSON log's msg and level are the table's, for every row") {
  for (auto& row : event_words_table()) {
    std::string type = to_string(row.type), variant = row.variant;
    CAPTURE(type);
    CAPTURE(variant);
    auto out = captured([&](std::FILE* f) {
      agent::json_logger log(agent::log_level::debug, "a", "default/x", f);
      log.sink()(event_of(row));
    });
    if (row.severity == event_severity::unlogged) {
      CHECK(out.empty());
      continue;
    }
    REQUIRE(!out.empty());
    auto line = nlohmann::json::parse(out.substr(0, out.find('\n')));
    CHECK(line["msg"] == row.words);
    const char* level = row.severity == event_severity::debug     ? "debug"
                        : row.severity == event_severity::info    ? "info"
                        : row.severity == event_severity::warning ? "warn"
                                                                  : "error";
    CHECK(line["level"] == level);
  }
}
