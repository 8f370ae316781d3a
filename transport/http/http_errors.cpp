#include "transport/http/http_errors.hpp"

#include <algorithm>
#include <cstdlib>

#include "transport/http/text_files.hpp"

namespace leasehold {

int parse_retry_after(const std::string& header) {
  auto text = trim_whitespace(header);
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0; // absent, or an HTTP-date (not used by the API server)
  return std::atoi(text.c_str());
}

std::string body_excerpt(int status, const std::string& body) {
  auto text = trim_whitespace(body.substr(0, body.find('\n')));
  if (text.empty())
    return "HTTP " + std::to_string(status);
  constexpr size_t max_len = 200;
  return text.size() > max_len ? text.substr(0, max_len) + "..." : text;
}

api_error transport_error(const std::string& verb, const std::string& path, httplib::Error e,
                          bool got_headers, std::chrono::milliseconds elapsed,
                          const connection_config& cfg) {
  api_error err;
  err.verb = verb;
  err.path = path;
  // httplib reports a read or handshake timeout with the same code as a
  // closed connection; the time spent tells them apart.
  auto waited = [&](std::chrono::milliseconds limit) { return elapsed * 10 >= limit * 9; };
  auto detail = " (" + httplib::to_string(e) + ")";
  switch (e) {
    case httplib::Error::Connection:
      err.kind = error_kind::connection_refused;
      err.reason = "cannot connect" + detail;
      break;
    case httplib::Error::ConnectionTimeout:
      err.kind = error_kind::timeout;
      err.reason = "connect timed out after " + std::to_string(cfg.connect_timeout.count()) +
                   "ms" + detail;
      break;
    case httplib::Error::Read:
      if (waited(cfg.read_timeout)) {
        err.kind = error_kind::timeout;
        err.reason = "no response within " + std::to_string(cfg.read_timeout.count()) + "ms" +
                     detail;
      } else if (got_headers) {
        err.kind = error_kind::malformed_body;
        err.reason = "body: truncated (connection closed before the end)" + detail;
      } else {
        err.kind = error_kind::connection_refused;
        err.reason = "connection closed before a response" + detail;
      }
      break;
    case httplib::Error::Write:
      err.kind = waited(cfg.write_timeout) ? error_kind::timeout : error_kind::connection_refused;
      err.reason = "cannot send request" + detail;
      break;
    case httplib::Error::SSLConnection:
      err.kind = waited(cfg.connect_timeout) ? error_kind::timeout : error_kind::tls_error;
      err.reason = "TLS handshake failed" + detail;
      break;
    case httplib::Error::SSLServerVerification:
      err.kind = error_kind::tls_error;
      err.reason = "server certificate not trusted" + detail;
      break;
    case httplib::Error::SSLLoadingCerts:
      err.kind = error_kind::tls_error;
      err.reason = "cannot load CA certificates" + detail;
      break;
    default:
      err.kind = error_kind::other;
      err.reason = "request failed" + detail;
      break;
  }
  return err;
}

api_error classify_response(const std::string& verb, const std::string& path, int status,
                            const std::string& body, const std::string& retry_after_header) {
  api_error e;
  e.verb = verb;
  e.path = path;
  e.http_status = status;
  if (is_success(status))
    return e;
  auto st = parse_status(body);
  e.reason = st.ok() && !st.value->message.empty() ? st.value->message
                                                    : body_excerpt(status, body);
  e.retry_after_seconds = parse_retry_after(retry_after_header);
  switch (status) {
    case 404: e.kind = error_kind::not_found; break;
    case 409:
      e.kind = st.ok() && st.value->reason == "AlreadyExists" ? error_kind::already_exists
                                                               : error_kind::conflict;
      break;
    case 400:
    case 422: e.kind = error_kind::invalid; break;
    case 401: e.kind = error_kind::unauthorized; break;
    case 403: e.kind = error_kind::forbidden; break;
    case 429: e.kind = error_kind::throttled; break;
    default: e.kind = status >= 500 && status < 600 ? error_kind::server_error : error_kind::other;
  }
  return e;
}

api_result<lease> lease_from_response(const std::string& verb, const std::string& path,
                                      int status, const std::string& body,
                                      const std::string& retry_after_header) {
  if (!is_success(status))
    return api_result<lease>::failure(
      classify_response(verb, path, status, body, retry_after_header));
  auto parsed = parse_lease(body);
  if (parsed.ok())
    return api_result<lease>::success(std::move(*parsed.value));
  return api_result<lease>::failure(
    {error_kind::malformed_body, status, verb, path, parsed.error, 0});
}

} // namespace leasehold
