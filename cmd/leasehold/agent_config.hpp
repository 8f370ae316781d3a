// The agent's configuration: the JSON file, the command-line/env overrides
// and the defaults. Every error names its JSON path
// (`timings.retry_period: invalid duration "2x"`).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "leasehold/modules.hpp"
#include "leasehold/timings.hpp"
#include "cmd/leasehold/lease_layout.hpp"
#include "modules/settings.hpp"
#include "transport/etcd/etcd_transport.hpp"

namespace leasehold::agent {

election_timings agent_default_timings();

// Go-style durations ("15s", "1m30s") are parsed by the module settings
// too: one parser (modules/settings.hpp).
using modules::duration_error;
using modules::max_duration;
using modules::parse_duration;
/// The longest identity accepted: it is also a log field and a label-like
/// name, so the Kubernetes object-name limit.
constexpr std::size_t max_identity_length = 253;

/// The agent's release bound on shutdown (the library default is 2 s): with
/// it, module_stop_timeout + release + event flush fit the exit budget of
/// module_stop_timeout + 2 s.
constexpr std::chrono::milliseconds default_release_timeout{1000};

struct agent_config {
  std::string identity;
  std::string ns;
  bool ns_defaulted = false;        // no flag/env/file/service-account value: "default"
  std::string lease_name = "leasehold";
  std::string server;               // empty: kubeconfig or in-cluster
  std::string kubeconfig;
  election_timings timings = agent_default_timings();
  std::string health_addr = "127.0.0.1:8080";
  std::string journal;              // empty: no journal
  std::string fence_dir;            // leader-only exec fence files; empty: $TMPDIR, else /tmp
  std::string log_level = "info";
  std::string log_format = "json";  // json (for a log pipeline) or text (for a person)
  bool watch = true;                // followers watch the Lease (false: they poll)
  module_config modules;
  lease_layout leases;              // which lease each module runs under (from modules)
  std::string backend = "kubernetes";   // "kubernetes" | "etcd"
  etcd_config etcd;                     // used when backend is "etcd"
  /// Kubernetes: bind held leases to one session Lease per process:
  /// "on", "off", or "auto" (on when the agent runs 2 or more leases at start).
  std::string session = "auto";
  int session_lease_seconds = 600;      // the least leaseDurationSeconds of a bound Lease

  /// The JSON names of the differing fields that need a restart (all but modules).
  std::vector<std::string> restart_fields_changed(const agent_config& other) const;
};

/// Values given on the command line (or by their environment variable);
/// each set one overrides the file.
struct config_overrides {
  std::optional<std::string> identity, ns, lease_name, server, kubeconfig;
  std::optional<std::string> lease_duration, renew_deadline, retry_period, module_stop_timeout;
  std::optional<std::string> health_addr, journal, log_level, log_format, fence_dir;
  std::optional<std::string> backend, etcd_endpoints;   // etcd_endpoints: comma-separated
  std::optional<std::string> session;
};

/// The LEASEHOLD_* environment variables, one per override, fill the overrides
/// no flag set (cmd/leasehold/README.md, 'Config file (JSON)').
void apply_environment(config_overrides& over,
                       const std::function<const char*(const char*)>& getenv);

/// Where defaults come from; injectable for tests.
struct config_environment {
  std::string pod_name;                 // $POD_NAME
  std::string pod_namespace;            // $POD_NAMESPACE
  std::string hostname;
  std::string service_account_namespace;  // the in-cluster namespace file, trimmed
  /// Differs per process, so that two agents on one host never share the
  /// default identity "<hostname>_<suffix>" by accident.
  std::string process_suffix;
  /// Read once per process; a reload reuses it (the identity stays).
  static config_environment from_process();
};

/// $POD_NAME, else "<hostname>_<process_suffix>".
std::string default_identity(const config_environment& env);

/// Parses a config document, JSON when it starts with `{`, else YAML (as in
/// ConfigMaps); applies overrides and defaults, then validates everything.
std::vector<std::string> parse_config(const std::string& text, const module_registry& reg,
                                      const config_overrides& over,
                                      const config_environment& env, agent_config& out);

/// Reads and parses a file (an empty `path`: none); a read failure is one error.
std::vector<std::string> load_config(const std::string& path, const module_registry& reg,
                                     const config_overrides& over,
                                     const config_environment& env, agent_config& out);

} // namespace leasehold::agent
