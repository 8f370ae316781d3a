// The blocking HTTP(S) client every backend speaks through (cpp-httplib):
// one server, TLS (CA, client certificate, skip-verify), timeouts, the
// bearer token (re-read from its file: service-account tokens rotate), the
// User-Agent and identity headers; transport failures classified as
// api_errors (http_errors.hpp). It knows no API: the Kubernetes Lease calls
// are kube_client.hpp's, etcd's gateway calls etcd_client.hpp's, and each
// names its own request paths.
//
// Blocking: use it only from a detached actor (a transport pool worker) or
// a plain thread (a watch stream), never from a scheduler thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "leasehold/api_result.hpp"
#include "leasehold/transports.hpp"

namespace leasehold {

/// Upper bound of one blocking request against a server that accepts and
/// never answers (connect + write + read timeouts): pick actor request
/// timeouts above it so the transport's `timeout` reply arrives first.
std::chrono::milliseconds max_request_time(const connection_config& cfg);

/// A complete HTTP response (any status).
struct http_response {
  int status = 0;
  std::string body;
  std::string retry_after;
};

using http_headers = std::vector<std::pair<std::string, std::string>>;

/// One request of a pipelined batch (http_client::send_all); a `body` is
/// sent as JSON.
struct http_call {
  std::string verb;
  std::string path;
  const std::string* body = nullptr;
};

class http_client {
public:
  explicit http_client(connection_config cfg);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// One request to `path` on this server with the client's TLS, timeouts
  /// and identity header, plus `headers` (a `body` is sent as JSON);
  /// transport failures are api_errors naming `verb` and `path`, any HTTP
  /// status is returned as is. Never throws.
  api_result<http_response> send(const std::string& verb, const std::string& path,
                                 const std::string* body, const http_headers& headers = {});

  /// The requests `calls` pipelined on one keep-alive connection of their
  /// own (http_pipeline.hpp: all written, then the answers read in order),
  /// with the headers, TLS and timeouts of send(); one result per call, in
  /// order. A call whose answer was lost after its bytes may have left is
  /// an error whose reason says "(sent: may have been applied)". Never
  /// throws.
  std::vector<api_result<http_response>> send_all(const std::vector<http_call>& calls);

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
