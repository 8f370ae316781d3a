#include "leasehold/api_result.hpp"

namespace leasehold {

const char* to_string(error_kind k) {
  switch (k) {
    case error_kind::none: return "none";
    case error_kind::not_found: return "not_found";
    case error_kind::conflict: return "conflict";
    case error_kind::already_exists: return "already_exists";
    case error_kind::invalid: return "invalid";
    case error_kind::unauthorized: return "unauthorized";
    case error_kind::forbidden: return "forbidden";
    case error_kind::throttled: return "throttled";
    case error_kind::server_error: return "server_error";
    case error_kind::timeout: return "timeout";
    case error_kind::connection_refused: return "connection_refused";
    case error_kind::disconnected: return "disconnected";
    case error_kind::tls_error: return "tls_error";
    case error_kind::malformed_body: return "malformed_body";
    case error_kind::session_ended: return "session_ended";
    case error_kind::other: return "other";
  }
  return "other";
}

std::string api_error::describe() const {
  std::string out = verb + " " + path + ": " + to_string(kind);
  if (http_status != 0)
    out += " (" + std::to_string(http_status) + ")";
  if (!reason.empty())
    out += ": " + reason;
  if (retry_after_seconds > 0)
    out += " (retry after " + std::to_string(retry_after_seconds) + "s)";
  return out;
}

} // namespace leasehold
