// The standard process metrics (as Prometheus client libraries export them
// on Linux, and process_threads as Go's go_threads), read from /proc at
// scrape time, and the lease transports' series (transport/transport_pool.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace leasehold::agent {

struct process_sample {
  double cpu_seconds = 0;
  std::int64_t resident_bytes = 0;
  std::int64_t virtual_bytes = 0;
  std::int64_t open_fds = 0;
  std::int64_t max_fds = 0;
  double start_time_seconds = 0;
  std::int64_t threads = 0;
};

/// This process now; nullopt when /proc cannot be read.
std::optional<process_sample> sample_process();

/// The exposition text of `s` and of the transports now.
std::string render_process_metrics(const process_sample& s);

/// /debug/state's "transport": the transports' census and the process's threads.
nlohmann::json transport_state_json();

} // namespace leasehold::agent
