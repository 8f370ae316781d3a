// The API server's URL (connection_config::server) taken apart: the one
// parser behind the client's connection and the agent's start-up check.
#pragma once

#include <optional>
#include <string>

namespace leasehold {

/// scheme://host[:port][/prefix] of connection_config::server.
struct endpoint {
  bool tls = false;
  std::string host;
  int port = 0;
  std::string prefix; // path prefix of the server URL, without trailing '/'
};

/// The endpoint of `url`, or nullopt with `err` saying what is wrong.
std::optional<endpoint> parse_server_url(const std::string& url, std::string& err);

/// Why `url` cannot be connection_config::server ("" when it can); no retry
/// fixes these, so the agent reports them at start-up.
std::string server_url_error(const std::string& url);

} // namespace leasehold
