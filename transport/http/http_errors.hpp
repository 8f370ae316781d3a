// What went wrong with an HTTP request, as an api_error: a response's status
// and Status body (classify_response), a Lease response (lease_from_response),
// or a request that got no complete response (transport_error).
#pragma once

#include <chrono>
#include <string>

#include <httplib.h>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/transports.hpp"
#include "transport/http/http_client.hpp"

namespace leasehold {

inline bool is_success(int status) { return status >= 200 && status < 300; }

/// Runs `f` (returning an api_result<T>); an exception it throws (a JSON
/// dump of invalid UTF-8, say) becomes an error of kind `other` naming the
/// request, so a client call never throws.
template <class T, class F>
api_result<T> never_throw(const std::string& verb, const std::string& path, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return api_result<T>::failure({error_kind::other, 0, verb, path,
                                   std::string("internal error: ") + e.what(), 0});
  } catch (...) {
    return api_result<T>::failure({error_kind::other, 0, verb, path, "internal error", 0});
  }
}

/// Seconds of a Retry-After header; 0 when absent or an HTTP-date.
int parse_retry_after(const std::string& header);

/// Short reason for a non-Status error body (e.g. from a proxy).
std::string body_excerpt(int status, const std::string& body);

/// An api_error for a request that got no complete response; the time spent
/// tells a timeout from a closed connection, which httplib reports alike.
api_error transport_error(const std::string& verb, const std::string& path, httplib::Error e,
                          bool got_headers, std::chrono::milliseconds elapsed,
                          const connection_config& cfg);

/// An HTTP status and body as an api_error: kind `none` for 2xx (the caller
/// checks the body), else the reason from the Status body.
api_error classify_response(const std::string& verb, const std::string& path,
                            int status, const std::string& body,
                            const std::string& retry_after_header);

/// `reply`'s error: its own when no response came, else classify_response
/// of a status neither 2xx nor `also_fine`; kind none otherwise.
api_error reply_error(const std::string& verb, const std::string& path,
                      const api_result<http_response>& reply, int also_fine = 0);

/// A Lease response: classify_response for non-2xx, else the parsed Lease or
/// malformed_body naming the field ("spec.leaseTransitions: expected integer").
api_result<lease> lease_from_response(const std::string& verb, const std::string& path,
                                      int status, const std::string& body,
                                      const std::string& retry_after_header);

} // namespace leasehold
