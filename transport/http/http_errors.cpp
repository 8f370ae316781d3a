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
  auto failed = [&](error_kind kind, const std::string& reason) {
    return api_error{kind, 0, verb, path, reason + " (" + httplib::to_string(e) + ")", 0};
  };
  // httplib reports a read or handshake timeout with the same code as a
  // closed connection; the time spent tells them apart.
  auto waited = [&](std::chrono::milliseconds limit) { return elapsed * 10 >= limit * 9; };
  auto ms = [](std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; };
  switch (e) {
    case httplib::Error::Connection:
      return failed(error_kind::connection_refused, "cannot connect");
    case httplib::Error::ConnectionTimeout:
      return failed(error_kind::timeout, "connect timed out after " + ms(cfg.connect_timeout));
    case httplib::Error::Read:
      if (waited(cfg.read_timeout))
        return failed(error_kind::timeout, "no response within " + ms(cfg.read_timeout));
      if (got_headers)
        return failed(error_kind::malformed_body,
                      "body: truncated (connection closed before the end)");
      return failed(error_kind::connection_refused, "connection closed before a response");
    case httplib::Error::Write:
      return failed(waited(cfg.write_timeout) ? error_kind::timeout : error_kind::connection_refused,
                    "cannot send request");
    case httplib::Error::SSLConnection:
      return failed(waited(cfg.connect_timeout) ? error_kind::timeout : error_kind::tls_error,
                    "TLS handshake failed");
    case httplib::Error::SSLServerVerification:
      return failed(error_kind::tls_error, "server certificate not trusted");
    case httplib::Error::SSLLoadingCerts:
      return failed(error_kind::tls_error, "cannot load CA certificates");
    default:
      return failed(error_kind::other, "request failed");
  }
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

api_error reply_error(const std::string& verb, const std::string& path,
                      const api_result<http_response>& reply, int also_fine) {
  if (!reply.ok())
    return reply.error;
  auto& r = *reply.value;
  if (is_success(r.status) || r.status == also_fine)
    return {};
  return classify_response(verb, path, r.status, r.body, r.retry_after);
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
