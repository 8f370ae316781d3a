// The blocking HTTP(S) client every backend speaks through (cpp-httplib): TLS,
// timeouts, the bearer token (re-read: service-account tokens rotate), its
// failures classified as api_errors. It knows no API. Blocking: a transport
// worker or a watch thread only, never a scheduler thread.
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

/// Upper bound of one blocking request to a server that never answers:
/// actor request timeouts above it get the transport's `timeout` reply first.
std::chrono::milliseconds max_request_time(const connection_config& cfg);

/// A complete HTTP response (any status).
struct http_response {
  int status = 0;
  std::string body;
  std::string retry_after;
};

using http_headers = std::vector<std::pair<std::string, std::string>>;

/// One request of a pipelined batch; a `body` is sent as JSON.
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

  /// One request (a `body` is sent as JSON); transport failures are
  /// api_errors, any HTTP status is returned as is. Never throws.
  api_result<http_response> send(const std::string& verb, const std::string& path,
                                 const std::string* body, const http_headers& headers = {});

  /// The requests `calls` pipelined (http_pipeline.hpp); one result per
  /// call, in order. Never throws.
  std::vector<api_result<http_response>> send_all(const std::vector<http_call>& calls);

  /// A watch: `on_open` once the server answered 200, then `on_data` per
  /// chunk until the stream ends, on_data returns false, nothing arrives for
  /// `idle_timeout` or stop() is called; why it ended (none: server or on_data).
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
