// Fault injection state of leasehold-apiserver and request counters.
#pragma once

#include <cstdint>
#include <chrono>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace leasehold::apiserver {

// The control body's fields, merged into the current state: docs/apiserver.md,
// 'What the control port does'; watch faults: cmd/leasehold-apiserver/README.md.
enum class fault_mode { none, down, hang, error };

struct partition_rule {
  std::string user_agent;   // matches when the User-Agent contains it
  std::string identity;     // matches when X-Leasehold-Identity equals it
  bool hang = false;        // hang instead of closing the connection
  bool active() const { return !user_agent.empty() || !identity.empty(); }
  bool matches(const std::string& user_agent_header, const std::string& identity_header) const;
};

struct watch_faults {
  int close_after_ms = 0;     // 0: off
  bool reset = false;         // close by dropping the connection
  bool hang = false;
  int malformed_lines = 0;    // pending injections, consumed one per line
  int error_events = 0;       // pending ERROR events, consumed one per stream
  int error_status = 500;
  int bookmark_ms = 0;        // 0: the server's default
};

struct fault_state {
  fault_mode mode = fault_mode::none;
  int error_status = 503;
  int retry_after_seconds = 0;
  int latency_ms = 0;
  partition_rule partition;
  watch_faults watch;

  nlohmann::json to_json() const;
};

/// A validated control request.
struct fault_request {
  fault_state next;    // the state after the request
  bool wipe = false;
};

/// Merges `body` into `current`; returns an error text naming the field, or "".
std::string parse_fault_request(const nlohmann::json& body, const fault_state& current,
                                fault_request& out);

/// Request counters (docs/apiserver.md, 'What the control port does').
/// Not thread-safe (the server locks).
class request_stats {
public:
  /// `code` 0: closed without an answer; `took`: from arrival to answer.
  void record(const std::string& verb, const std::string& user_agent,
              const std::string& identity, int code,
              std::chrono::microseconds took = std::chrono::microseconds{0});
  nlohmann::json to_json() const;
  void reset() { *this = request_stats{}; }

private:
  struct counters {
    std::uint64_t requests = 0;
    std::map<std::string, std::uint64_t> by_verb;
    std::map<std::string, std::uint64_t> by_code;
    void add(const std::string& verb, const std::string& code);
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(counters, requests, by_verb, by_code)
  };
  counters total_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::uint64_t timed_ = 0;             // non-watch requests with a latency
  std::chrono::microseconds took_sum_{0}, took_max_{0};
  std::map<std::string, counters> by_user_agent_;
  std::map<std::string, counters> by_identity_;
};

} // namespace leasehold::apiserver
