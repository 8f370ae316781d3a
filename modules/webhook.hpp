// webhook: POSTs every leadership change this replica sees to a URL.
//
// settings: {"url": "http://host:port/path" (required, http or https),
//            "timeout_ms": int > 0 (default 2000), "max_retries": int >= 0 (default 3)}
//
// Runs on every replica by default. It subscribes to the runner and, for each
// leadership_changed, POSTs
//   {"identity", "leading", "holder", "term", "time" (RFC 3339), "lease" (ns/name)}
// How it sends, retries and drops bodies is said at http_url below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

// A sender thread does the HTTP work, so the actor never blocks: it queues at
// most max_queue bodies (beyond that the oldest is dropped and a module_output
// line says so). A connection error, timeout, 429 or 5xx is retried up to
// max_retries times with exponential backoff (100 ms doubling, at most 2 s);
// other statuses are final. A body that cannot be delivered is dropped with a
// module_output line. On exit it unsubscribes, cancels the request in flight
// and joins the sender. New settings replace the sender (pending bodies of the
// old one are dropped).
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
