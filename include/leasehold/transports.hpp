// The lease backends a program can create: the Kubernetes API over
// HTTP(S), and etcd v3. Share one backend between many runners
// (docs/embedding.md, 'A runner in five steps').
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"

namespace leasehold {

/// Where and how to reach the Kubernetes API server (the agent fills it from
/// in-cluster config, a kubeconfig or --server).
struct connection_config {
  std::string server;                 // "https://10.0.0.1:443" or "http://127.0.0.1:8001"
  std::string ca_file;                // PEM bundle path (https)
  std::string ca_data;                // PEM text (kubeconfig certificate-authority-data, decoded)
  std::string token;                  // bearer token (static)
  std::string token_file;             // bearer token re-read when the file changes
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_data;       // PEM text; used instead of client_cert_file when set
  std::string client_key_data;        // PEM text; used instead of client_key_file when set
  bool insecure_skip_tls_verify = false;
  // Defaults keep one request (connect + write + read) well inside the
  // default renew deadline (10 s), so a hung server is reported as `timeout`
  // by the transport before an elector gives up on its term.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds read_timeout{2000};
  std::chrono::milliseconds write_timeout{2000};
  std::string user_agent;             // default "leasehold/<version>"
  /// Sent as X-Leasehold-Identity (the replica), so API-side counters and
  /// fault injection can tell replicas apart. Empty: not sent.
  std::string identity;
  /// The transport's workers: at most this many requests at once, each on
  /// a thread and a keep-alive connection of its own, started on demand
  /// (1..64). Requests beyond wait for a worker in arrival order.
  std::size_t workers = 4;
};

/// One message per invalid field, named by its config path with `prefix`
/// ("workers: ...", "etcd.workers: ..."). A transport spawned with an
/// invalid config answers every request with that error.
std::vector<std::string> validate(const connection_config& cfg, const std::string& prefix = "");

struct etcd_config {
  std::vector<std::string> endpoints;   // "http://127.0.0.1:2379", "https://10.0.0.5:2379"
  std::string prefix = "/leasehold";    // keys are <prefix>/<namespace>/<name>
  std::string username;                 // with password: /v3/auth/authenticate
  std::string password;
  /// TLS (ca_file, client_cert_file, client_key_file), timeouts and identity
  /// for every endpoint; `server` is ignored (each endpoint is one server).
  connection_config http;
};

/// One message per invalid field, named by its config path ("etcd.endpoints[1]: ...").
std::vector<std::string> validate(const etcd_config& cfg);

/// Spawns the Kubernetes backend. A request takes at most connect_timeout +
/// write_timeout + read_timeout on its worker: bounded_by() (runtime.hpp)
/// fits them to the election timings.
lease_backend spawn_http_backend(caf::actor_system& sys, connection_config cfg);

/// Spawns the etcd backend: the same pool (cfg.http.workers workers, one
/// etcd client each); its traits let etcd judge expiry (server_expiry) and
/// name requests by their keys (docs/safety.md).
lease_backend spawn_etcd_backend(caf::actor_system& sys, etcd_config cfg);

} // namespace leasehold
