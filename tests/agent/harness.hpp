// Process-level helpers for the agent tests: child processes,
// leasehold-apiserver and leasehold agents on 127.0.0.1, HTTP, polling
// (temp dirs, /proc and waiting: tests/support).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/proc.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

namespace leasehold::test {

using namespace std::chrono_literals;

std::string build_root();
std::string source_root();

void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);

/// A child process; SIGKILLed and reaped on destruction if still running.
class child {
public:
  child(const std::vector<std::string>& argv, const std::string& stdout_file,
        const std::string& stderr_file);
  ~child();
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  /// The exit code (128+N for a signal), nullopt if still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  bool running();

private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// `leasehold-apiserver --port 0` with its ports read from its first stdout line.
class api_server {
public:
  explicit api_server(const temp_dir& dir, std::vector<std::string> extra_args = {});
  int port() const { return port_; }
  int control_port() const { return control_port_; }
  std::string url() const;
  /// POST /_leasehold/faults on the control port; true on 200.
  bool fault(const nlohmann::json& body);
  /// The Lease as JSON (from the control port, which is never faulted),
  /// nullopt when absent.
  std::optional<nlohmann::json> lease(const std::string& ns, const std::string& name);
  child& process() { return *proc_; }

private:
  std::unique_ptr<child> proc_;
  int port_ = 0;
  int control_port_ = 0;
  bool tls_ = false;
};

/// A one-member etcd on loopback ephemeral ports
/// (`tests/faults/etcd_cluster.py --members 1`), stopped on destruction.
class etcd_server {
public:
  explicit etcd_server(const temp_dir& dir);
  ~etcd_server();
  /// "http://127.0.0.1:PORT"; empty when it did not start.
  const std::string& endpoint() const { return endpoint_; }

private:
  std::unique_ptr<child> proc_;
  std::string endpoint_;
};

/// Writes an agent config with the ticker module and short timings
/// (lease 2s, renew 1.5s, retry 300ms, stop 400ms).
nlohmann::json short_config(bool ticker_enabled = true);

/// A config's "timings" with these four and the short respawn backoff of
/// short_config (200 ms doubling to 1 s).
nlohmann::json test_timings(const std::string& lease_duration, const std::string& renew_deadline,
                            const std::string& retry_period, const std::string& module_stop_timeout);

/// short_config with these timings (test_timings) written to <dir>/config.json;
/// returns its path.
std::string write_short_config(const temp_dir& dir, const nlohmann::json& timings);

/// `leasehold run` as a child; stderr (JSON log) goes to <dir>/<identity>.log.
class agent {
public:
  agent(const temp_dir& dir, const std::string& identity, const std::string& config_file,
        std::vector<std::string> extra_args);
  const std::string& identity() const { return identity_; }
  /// Waits for the "agent started" log line; returns the health port.
  int health_port();
  std::vector<nlohmann::json> log_lines() const;
  std::string log_file() const { return log_; }
  std::string journal_file() const { return journal_; }
  child& process() { return *proc_; }

private:
  std::string identity_;
  std::string log_;
  std::string journal_;
  std::unique_ptr<child> proc_;
  int health_port_ = 0;
};

/// agent-a, agent-b and agent-c on one config and the same flags.
struct three_agents {
  three_agents(const temp_dir& dir, const std::string& config_file,
               const std::vector<std::string>& extra_args);
  agent a, b, c;
  std::vector<agent*> all{&a, &b, &c};
};

/// One run of a program to its end: exit code (-1: still running after
/// the timeout, then killed), stdout and stderr.
struct cli_result {
  int code = -1;
  std::string out, err;
};
/// `leasehold ARGS` (in `dir`'s files cli.out / cli.err).
cli_result run_cli(const temp_dir& dir, std::vector<std::string> args,
                   std::chrono::milliseconds timeout = 10s);
/// Any program (argv[0] a path).
cli_result run_program(const temp_dir& dir, std::vector<std::string> argv,
                       std::chrono::milliseconds timeout = 10s);

struct http_reply {
  int status = 0;       // 0: no answer
  std::string body;
};
http_reply http_get(int port, const std::string& path);
http_reply http_post(int port, const std::string& path, const std::string& body);

/// A sample's value in the agent on `port`'s /metrics (`series` with its
/// labels, e.g. `x_total{kind="a"}`); nullopt when absent.
std::optional<double> metric(int port, const std::string& series);

/// /debug/state of an agent as JSON (null on failure).
nlohmann::json agent_state(agent& a);

/// Polls `pred` every 50 ms until it holds or `timeout` passes.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return eventually(pred, timeout, 50ms);
}

/// Every non-comment, non-empty line matches `name{labels} value`; returns
/// the offending lines.
std::vector<std::string> prometheus_violations(const std::string& text);

} // namespace leasehold::test
