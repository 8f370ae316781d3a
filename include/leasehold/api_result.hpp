// Errors are values: every API call returns an api_result, never throws.
#pragma once

#include <optional>
#include <string>

namespace leasehold {

enum class error_kind {
  none,
  not_found,          // 404
  conflict,           // 409 Conflict (stale resourceVersion)
  already_exists,     // 409 AlreadyExists
  invalid,            // 422 / 400
  unauthorized,       // 401
  forbidden,          // 403
  throttled,          // 429 (retry_after_seconds set when the server said)
  server_error,       // 5xx
  timeout,            // connect/read/write timed out, or the actor request did
  connection_refused, // nobody listening / connection reset
  disconnected,       // an open stream dropped mid-message: its server (an etcd member) went away
  tls_error,          // handshake or certificate failure
  malformed_body,     // 2xx with a body that is not the expected object
  session_ended,      // the session a bound lease rides on ended: its term is over
  other,
};

/// Short stable name, used in logs and as the Prometheus label.
const char* to_string(error_kind k);

/// A 409 (Conflict, AlreadyExists): another replica wrote first. The API
/// answered and is as reachable as ever: a lost race, not an outage, so it
/// never makes a replica unready and is logged at debug only.
inline bool is_lost_race(error_kind k) {
  return k == error_kind::conflict || k == error_kind::already_exists;
}

/// A 422 or 400: the API refused the request itself (a name or a field it
/// does not accept). It answered, so it is reachable; the same request will
/// be refused again until what makes it changes.
inline bool is_refusal(error_kind k) { return k == error_kind::invalid; }

/// After an error of kind `k` a write may still stand in the store (no
/// answer, a reset after the request left, a gateway's 5xx, an unreadable
/// 2xx); a refusal or a lost race wrote nothing.
inline bool may_have_applied(error_kind k) {
  return k == error_kind::timeout || k == error_kind::connection_refused
         || k == error_kind::disconnected || k == error_kind::server_error
         || k == error_kind::malformed_body || k == error_kind::other;
}

struct api_error {
  error_kind kind = error_kind::none;
  int http_status = 0;       // 0 when no response was received
  std::string verb;          // GET, POST, PUT
  std::string path;          // request path
  std::string reason;        // short human text (Status.message or transport error)
  int retry_after_seconds = 0;
  /// etcd, on "no such key": the store's revision when it answered (0:
  /// unknown). An etcd revision counts every write in the cluster, so two
  /// reads with one revision saw no write between them.
  std::int64_t store_revision = 0;

  /// "PUT /apis/.../leases/x: conflict (409): the object has been modified"
  std::string describe() const;
};

template <class T>
struct api_result {
  std::optional<T> value;
  api_error error;

  static api_result success(T v) { api_result r; r.value = std::move(v); return r; }
  static api_result failure(api_error e) { api_result r; r.error = std::move(e); return r; }
  bool ok() const { return value.has_value(); }
  error_kind kind() const { return ok() ? error_kind::none : error.kind; }
};

} // namespace leasehold
