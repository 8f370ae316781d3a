// webhook: POSTs every leadership change this replica sees to a URL
// (settings and body: cmd/leasehold/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

// A sender thread does the HTTP work, so the actor never blocks; a body
// dropped (queue full, retries spent) is said in a module_output line.
struct http_url {
  std::string scheme;   // "http" or "https"
  std::string host;     // an IPv6 literal keeps its brackets
  int port = 0;
  std::string path;     // "/" when the URL has none; includes any query
  /// "scheme://host:port", what httplib::Client takes.
  std::string origin() const;
};

std::optional<http_url> parse_http_url(const std::string& url);

struct webhook_settings {
  http_url url;
  std::int64_t timeout_ms = 2000;
  std::int64_t max_retries = 3;
};

constexpr std::size_t webhook_max_queue = 16;

parsed<webhook_settings> parse_webhook_settings(const nlohmann::json& settings);

/// The "webhook" module type (every replica by default).
module_type webhook_module();

} // namespace leasehold::modules
