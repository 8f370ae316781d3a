// The standard process metrics (as Prometheus client libraries export them
// on Linux), read from /proc at scrape time, and the lease transports'
// series; all are listed at process_sample below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace leasehold::agent {

// The series:
//   process_cpu_seconds_total       counter  user + system CPU time
//   process_resident_memory_bytes   gauge    resident set size
//   process_virtual_memory_bytes    gauge    virtual memory size
//   process_open_fds                gauge    open file descriptors
//   process_max_fds                 gauge    the open-files limit (RLIMIT_NOFILE, soft)
//   process_start_time_seconds      gauge    start time, seconds since the Unix epoch
//   process_threads                 gauge    threads of this process (as Go's go_threads)
// and this process's lease transports (transport/transport_pool.hpp):
//   leasehold_transport_pools, leasehold_transport_workers (one thread and
//   one keep-alive connection each), leasehold_transport_busy_workers,
//   leasehold_transport_queued_requests, leasehold_watch_streams (one
//   thread and one stream each), leasehold_transport_requests_total,
//   leasehold_transport_expired_total (answered timeout after waiting for
//   a worker).
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

/// The exposition text of `s` and of the transports now (HELP and TYPE
/// lines included).
std::string render_process_metrics(const process_sample& s);

/// /debug/state's "transport": the transports' census and the process's
/// threads ({pools, workers, busy_workers, queued, watch_streams, requests,
/// expired, threads}).
nlohmann::json transport_state_json();

} // namespace leasehold::agent
