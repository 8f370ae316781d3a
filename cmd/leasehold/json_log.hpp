// JSON logs on stderr, one object per line:
//   {"level":"info","time":"...Z","msg":"became leader","identity":"a","lease":"ns/x","term":3}
// The logger is an event_sink for runtime events and takes the agent's own
// messages. It drops an exact repeat of (level, msg, fields) until the next
// state change, so an outage that the runtime reports again and again (one
// report per elector respawn) logs each distinct line once.
#pragma once

#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/observer.hpp"

namespace leasehold::agent {

enum class log_level { debug = 0, info = 1, warn = 2, error = 3 };
const char* to_string(log_level l);
std::optional<log_level> parse_log_level(const std::string& s);

class json_logger {
public:
  /// `out` is not owned (stderr by default). `identity` and `lease` are put
  /// on every line.
  json_logger(log_level min, std::string identity, std::string lease, std::FILE* out = stderr);

  /// Thread-safe. `fields` is a JSON object (may be empty).
  void log(log_level level, const std::string& msg,
           const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());

  /// The sink for runtime events (thread-safe, never blocks on anything but
  /// the write itself).
  event_sink sink();

  void set_level(log_level min);

private:
  void write(log_level level, const std::string& msg, const nlohmann::ordered_json& fields,
             bool suppress_repeats);
  void on_event(const runtime_event& e);

  std::mutex mtx_;
  log_level min_;
  std::string identity_;
  std::string lease_;
  std::FILE* out_;
  std::set<std::string> seen_;   // (level, msg, fields) logged in this state
};

} // namespace leasehold::agent
