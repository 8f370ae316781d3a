// The connection to an etcd cluster through its JSON gateway: endpoints and
// failover, authentication (simple tokens), one call or one stream at a
// time. etcd_client maps leases onto it; membership posts through it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/transports.hpp"

namespace leasehold {

class http_client;

/// Blocking. On a connection error, timeout or an unavailable member a call
/// moves to the next endpoint (and stays) and retries, once per endpoint.
class etcd_connection {
public:
  explicit etcd_connection(etcd_config cfg);
  ~etcd_connection();
  etcd_connection(const etcd_connection&) = delete;
  etcd_connection& operator=(const etcd_connection&) = delete;

  /// POST `body` to `path`, failing over between endpoints: the reply body
  /// (a JSON object), or the error (gRPC code mapped, endpoint named).
  api_result<nlohmann::json> call(const std::string& path, const nlohmann::json& body);
  /// As call(), with the body serialized and the reply's body unparsed.
  api_result<std::string> call_text(const std::string& path, const std::string& text);
  /// " (endpoint E)" to end an error's reason with, "" when E is empty.
  static std::string from_endpoint(const std::string& endpoint);
  /// A 2xx reply body of `path` (from `endpoint`, named in the error when
  /// given) as call() answers it: a JSON object, or malformed_body.
  static api_result<nlohmann::json> object_of(const std::string& path, const std::string& body,
                                              const std::string& endpoint = "");
  /// A watch on the current endpoint, as call(); a failure moves to the next
  /// endpoint, except a quiet open stream: nothing says its member is unwell.
  api_error stream(const std::string& path, const nlohmann::json& body,
                   std::chrono::milliseconds idle, const std::function<void()>& on_open,
                   const std::function<bool(const char*, std::size_t)>& on_data);
  /// A stream that reported an error of `kind` in its body: authenticate
  /// again (unauthorized) or move to the next endpoint, as for a call.
  void stream_failed(error_kind kind);
  /// Aborts a blocking stream() from another thread.
  void stop();
  const etcd_config& config() const { return cfg; }
  /// The endpoint the next call goes to.
  const std::string& current_endpoint() const { return cfg.endpoints.at(current); }

private:
  api_result<std::string> exchange(http_client& server, const std::string& path,
                                   const std::string& text);
  bool authenticate(http_client& server, api_error& err);

  etcd_config cfg;
  std::vector<std::unique_ptr<http_client>> servers;
  size_t current = 0;
  std::string token;   // auth token ("" without auth or before authenticate)
};

} // namespace leasehold
