// leasehold-apiserver: a local Kubernetes API server for Leases, Events and
// ConfigMaps, with fault injection and request counters; in-process (tests) or
// via main.cpp. Not restartable: start() once. See cmd/leasehold-apiserver/README.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace leasehold {

struct api_server_options {
  std::string host = "127.0.0.1";
  int port = 0;                    // 0: an ephemeral port
  bool control_listener = true;    // the separate, never-faulted control port
  int control_port = 0;            // 0: an ephemeral port
  std::string snapshot_file;       // empty: memory only
  std::string tls_cert_file;       // both set: HTTPS on the main port
  std::string tls_key_file;
  // Threads of the main listener, at most: docs/apiserver.md, 'Scale'.
  std::size_t worker_threads = 16384;
  std::chrono::milliseconds bookmark_interval{1000};  // watch BOOKMARKs (runtime: faults.hpp)
  std::chrono::seconds max_watch{1800};             // a watch without timeoutSeconds ends after it
  std::size_t watch_history = 10000;  // events kept for resuming watches (older: 410 Gone): 2 s of 10,000 leases renewed every 2 s
  std::chrono::milliseconds hang_limit{60000};        // a hung request is dropped after it
  std::chrono::milliseconds snapshot_interval{200};   // snapshot writes at most this often
  std::function<void(const nlohmann::json&)> log;     // structured log lines; null: silent
  bool log_requests = false;       // one log line per Kubernetes API request
};

struct start_result {
  int port = 0;                    // the bound main port
  std::string error;               // empty on success
  bool ok() const { return error.empty(); }
};

class local_api_server {
public:
  explicit local_api_server(api_server_options opts = {});
  ~local_api_server();   // stop()s
  local_api_server(const local_api_server&) = delete;
  local_api_server& operator=(const local_api_server&) = delete;

  /// Loads the snapshot, binds both listeners and serves on background
  /// threads. Returns at once.
  start_result start();
  int port() const;
  int control_port() const;   // 0 without a control listener
  bool tls() const;
  /// Ends hung requests, closes the listeners, joins every thread and writes
  /// the last snapshot. Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace leasehold
