// Kubernetes coordination.k8s.io/v1 Lease and meta/v1 Status types. Parsing
// never throws: parse_* return the value or a message naming the field.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace leasehold {

using wall_clock = std::chrono::system_clock;
using wall_time = std::chrono::time_point<wall_clock, std::chrono::microseconds>;

/// Now, as a MicroTime holds it.
inline wall_time wall_now() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(wall_clock::now());
}

/// Formats a MicroTime: `2006-01-02T15:04:05.000000Z` (always 6 digits, UTC).
std::string format_micro_time(wall_time t);

/// Parses RFC 3339 times as the API sends them: `...Z` with 0 to 9 fraction
/// digits (MicroTime has 6, Time has none) or a numeric offset. nullopt on error.
std::optional<wall_time> parse_micro_time(const std::string& text);

/// Identifies one Lease object.
struct lease_key {
  std::string ns;
  std::string name;
  bool operator==(const lease_key& o) const { return ns == o.ns && name == o.name; }
  bool operator<(const lease_key& o) const {
    return ns < o.ns || (ns == o.ns && name < o.name);
  }
  std::string to_string() const { return ns + "/" + name; }
};

/// Why `name` is not a name the Kubernetes API accepts ("" when it is): a
/// lowercase RFC 1123 subdomain (or label: no dots), at most `max`
/// characters. The API answers 422 to anything else, on every retry.
std::string dns1123_error(const std::string& name, std::size_t max, bool label = false);
/// Why `name` cannot name a lease ("" when it can): an RFC 1123 subdomain of
/// at most 253 characters on both backends (on etcd a '/' would reach into
/// another namespace's keys).
std::string lease_name_error(const std::string& name);
/// Why `ns` cannot name a namespace ("" when it can): an RFC 1123 label of
/// at most 63 characters.
std::string namespace_error(const std::string& ns);

struct lease_spec {
  std::string holder_identity;                  // empty: nobody holds it
  std::optional<int> lease_duration_seconds;
  std::optional<wall_time> acquire_time;
  std::optional<wall_time> renew_time;
  int lease_transitions = 0;
  /// Coordinated leader election (Kubernetes 1.31+): the identity the
  /// holder should hand the lease to, and the election strategy
  /// ("OldestEmulationVersion", ...). Empty: absent. Kept round-trip.
  std::string preferred_holder;
  std::string strategy;

  bool operator==(const lease_spec& o) const;
  bool operator!=(const lease_spec& o) const { return !(*this == o); }
};

/// The strategy leasehold writes with a preferredHolder when the Lease has
/// none (the API accepts preferredHolder only with a strategy; "prefix/name"
/// is a custom strategy, which Kubernetes' own election controller leaves alone).
constexpr const char* handover_strategy = "leasehold/yield";

/// Holder "" and leaseDurationSeconds 1 (or none): a release (docs/safety.md,
/// "How a release is told").
bool released_record(const lease_spec& s);

/// leaseDurationSeconds of every record but a release: rounded up, at least
/// 2, because 1 marks a release (docs/safety.md, "How a release is told").
int duration_seconds(std::chrono::nanoseconds lease_duration);

struct lease {
  std::string name;
  std::string ns;
  std::string resource_version;   // opaque: compared for equality only
  std::string uid;
  std::string creation_timestamp; // kept as the server wrote it
  lease_spec spec;
  /// What the fields above do not hold, as received (null: nothing), so a
  /// round trip never drops what another client wrote.
  nlohmann::json raw;
  /// etcd only: the remaining TTL of the key's etcd lease when read, in
  /// whole seconds (truncated); nullopt elsewhere and from a watch stream.
  std::optional<std::int64_t> ttl_seconds;
  /// etcd only: how long before this read the ttl_seconds reading was sent
  /// (a shared reading: transport/etcd/etcd_ttl_readings.hpp); 0: during it.
  std::chrono::nanoseconds ttl_age{0};
  /// etcd only: the ID of the etcd lease the key is bound to ("" or "0":
  /// none), for etcd_shared_readings::status_of.
  std::string etcd_lease_id;
  /// etcd renew reply: how long before this renew the keepalive that served
  /// it was sent (transport/etcd/etcd_session.hpp); 0: during it.
  std::chrono::nanoseconds renewed_age{0};
  /// etcd renew request: the oldest keepalive the renew may ride on instead
  /// of sending one (0: none).
  std::chrono::nanoseconds renew_max_age{0};
  /// etcd create request: the store revision of the read that found the key
  /// absent (0: none), for `unwritten_since_read`.
  std::int64_t absent_at_revision = 0;
  /// etcd create request: the revision of the latest read that found the key
  /// with a TTL of 0; `unwritten_since_read` then says whether it was gone
  /// once and then unwritten up to this create.
  std::int64_t seen_at_revision = 0;
  /// etcd read reply: the store revision the range that read this record
  /// was answered at (0: a record from a stream, a write, elsewhere).
  std::int64_t read_revision = 0;
  /// etcd create reply: true when the key's history since the read holds no
  /// other write; false when it does, is unknown, or was not asked.
  bool unwritten_since_read = false;
  /// Kubernetes renew request: the writer has the answer, so the stream may
  /// drop this write's echo (transport/watch_echoes.hpp).
  bool skip_watch_echo = false;
  /// Kubernetes take request: the session binding of the record it takes
  /// (transport/kube/kube_session.hpp), whose session ends first if it
  /// still runs; "" none.
  std::string session_end;

  lease_key key() const { return {ns, name}; }
};

/// meta/v1 Status, the body of every API error.
struct api_status {
  std::string status;   // "Failure" / "Success"
  std::string message;
  std::string reason;   // NotFound, AlreadyExists, Conflict, Invalid, Forbidden, ...
  int code = 0;
};

template <class T>
struct parse_result {
  std::optional<T> value;
  std::string error;    // names the field, e.g. "spec.leaseTransitions: expected integer"
  bool ok() const { return value.has_value(); }
};

nlohmann::json to_json_value(const lease& l);
/// The Lease's JSON text, as to_json_value(l).dump() writes it (written in
/// place when no field needs escaping); throws what dump() throws (a field
/// that is not UTF-8).
std::string to_json_text(const lease& l);
parse_result<lease> parse_lease(const nlohmann::json& j);
/// A Lease body (read in place when it is plain, else as a document: the
/// same lease, or the same error).
parse_result<lease> parse_lease(const std::string& body);
parse_result<api_status> parse_status(const std::string& body);

/// A core/v1 Event about a Lease (reason LeaderElection).
struct kube_event {
  lease_key involved;       // the Lease the event is about
  std::string involved_uid;
  std::string reason = "LeaderElection";
  std::string message;      // "<identity> became leader"
  std::string type = "Normal";
  std::string component = "leasehold";
  std::string reporting_instance;  // identity
  wall_time time{};
};

nlohmann::json to_json_value(const kube_event& e);

} // namespace leasehold
