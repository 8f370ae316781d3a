// Logs on stderr, one line per fact: JSON (the default) or text (log_format:
// text). The logger is an event_sink for runtime events and takes the agent's
// own messages. Fields and repeat counting: docs/design.md, 'Log lines'.
#pragma once

#include <cstdio>
#include <mutex>
#include <optional>
#include <chrono>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "leasehold/events.hpp"

namespace leasehold::agent {

enum class log_level { debug = 0, info = 1, warn = 2, error = 3 };
const char* to_string(log_level l);
std::optional<log_level> parse_log_level(const std::string& s);

enum class log_format { json, text };
const char* to_string(log_format f);
std::optional<log_format> parse_log_format(const std::string& s);

class json_logger {
public:
  /// `out` is not owned (stderr by default). `identity` and `lease` are put
  /// on every line.
  json_logger(log_level min, std::string identity, std::string lease, std::FILE* out = stderr,
              std::chrono::steady_clock::duration summary_every = std::chrono::seconds(60));

  /// Thread-safe. `fields` is a JSON object (may be empty).
  void log(log_level level, const std::string& msg,
           const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());

  /// The sink for runtime events (thread-safe, never blocks on anything but
  /// the write itself).
  event_sink sink();

  void set_format(log_format f);

private:
  struct repeat {
    log_level level;
    std::string msg;
    nlohmann::ordered_json fields;
    int suppressed = 0;                          // repeats not written since `since`
    std::chrono::steady_clock::time_point since;
  };
  void summarize(repeat& r, std::chrono::steady_clock::time_point now);
  void emit(log_level level, const std::string& msg, const nlohmann::ordered_json& fields);
  void write(log_level level, const std::string& msg, const nlohmann::ordered_json& fields,
             bool suppress_repeats);

  std::mutex mtx_;
  log_level min_;
  log_format format_ = log_format::json;
  std::string identity_;
  std::string lease_;
  std::FILE* out_;
  std::chrono::steady_clock::duration summary_every_;
  std::map<std::string, repeat> seen_;   // (level, msg, fields) logged in this state
};

} // namespace leasehold::agent
