// Blocking Kubernetes API client (cpp-httplib) for Leases and Events.
//
// Blocking: use it only from a detached actor (see spawn_http_transport) or a
// plain thread, never from a scheduler thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/transports.hpp"
#include "transport/server_url.hpp"

namespace leasehold {

/// Upper bound of one blocking request against a server that accepts and
/// never answers (connect + write + read timeouts): pick actor request
/// timeouts above it so the transport's `timeout` reply arrives first.
std::chrono::milliseconds max_request_time(const connection_config& cfg);

std::string lease_path(const lease_key& k);             // .../namespaces/{ns}/leases/{name}
std::string leases_path(const std::string& ns);         // .../namespaces/{ns}/leases
std::string events_path(const std::string& ns);         // /api/v1/namespaces/{ns}/events

/// A complete HTTP response (any status).
struct http_response {
  int status = 0;
  std::string body;
  std::string retry_after;
};

using http_headers = std::vector<std::pair<std::string, std::string>>;

class kube_client {
public:
  explicit kube_client(connection_config cfg);
  ~kube_client();
  kube_client(const kube_client&) = delete;
  kube_client& operator=(const kube_client&) = delete;

  api_result<lease> get_lease(const lease_key& k);
  api_result<lease> create_lease(const lease& l);
  api_result<lease> update_lease(const lease& l);   // PUT with l.resource_version
  api_result<bool> create_event(const kube_event& e);
  /// One request to `path` on this server with the client's TLS, timeouts
  /// and identity header, plus `headers`; transport failures classified as
  /// for the Lease calls, any HTTP status returned as is. Other JSON APIs
  /// over the same connection code (the etcd gateway) use it.
  api_result<http_response> send(const std::string& verb, const std::string& path,
                                 const std::string* body, const http_headers& headers = {});

  /// A streaming request (a watch: GET for Kubernetes, POST with a JSON
  /// `body` and `headers` for the etcd gateway): `on_open` once the server
  /// answered 200, then `on_data` for every chunk until the server ends the
  /// stream, on_data returns false, nothing arrives for `idle_timeout`, or
  /// stop() is called. Returns why the stream ended (kind none: the server
  /// ended it, or on_data did).
  /// Blocks: call it from its own thread, with a client of its own.
  api_error stream(const std::string& verb, const std::string& path, const std::string* body,
                   const http_headers& headers, std::chrono::milliseconds idle_timeout,
                   const std::function<void()>& on_open,
                   const std::function<bool(const char*, std::size_t)>& on_data);
  /// Aborts a blocking stream() from any thread.
  void stop();

  const connection_config& config() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace leasehold
