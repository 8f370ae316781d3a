// The standard process metrics (as Prometheus client libraries export them
// on Linux), read from /proc at scrape time:
//   process_cpu_seconds_total       counter  user + system CPU time
//   process_resident_memory_bytes   gauge    resident set size
//   process_virtual_memory_bytes    gauge    virtual memory size
//   process_open_fds                gauge    open file descriptors
//   process_max_fds                 gauge    the open-files limit (RLIMIT_NOFILE, soft)
//   process_start_time_seconds      gauge    start time, seconds since the Unix epoch
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace leasehold::agent {

struct process_sample {
  double cpu_seconds = 0;
  std::int64_t resident_bytes = 0;
  std::int64_t virtual_bytes = 0;
  std::int64_t open_fds = 0;
  std::int64_t max_fds = 0;
  double start_time_seconds = 0;
};

/// This process now; nullopt when /proc cannot be read.
std::optional<process_sample> sample_process();

/// The exposition text of `s` (HELP and TYPE lines included).
std::string render_process_metrics(const process_sample& s);

} // namespace leasehold::agent
