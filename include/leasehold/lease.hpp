// Kubernetes coordination.k8s.io/v1 Lease and meta/v1 Status types.
//
// Parsing never throws into callers: parse_* functions return a
// parse_result that carries either the value or a message naming the field.
// Fields of a Lease leasehold does not model are kept in `raw` and written
// back on to_json, so a round trip through leasehold never drops what another
// client wrote.
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
/// at most 253 characters, on both backends, so that a config moves between
/// them unchanged. etcd keys are `<prefix>/<namespace>/<name>`: a '/' in a
/// name would make one lease's key another namespace's.
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

/// The record encoding's one mark of a release (released_spec, and
/// client-go's release): holder "" and leaseDurationSeconds 1 (or none). A
/// holder emptied with its duration kept was emptied by somebody else.
bool released_record(const lease_spec& s);

/// leaseDurationSeconds of every record but a release: whole seconds,
/// rounded up, and at least 2, because 1 marks a release. A lease of 1 s or
/// less is written as 2 s: readers wait longer, never shorter
/// (docs/safety.md, "How a release is told").
int duration_seconds(std::chrono::nanoseconds lease_duration);

struct lease {
  std::string name;
  std::string ns;
  std::string resource_version;   // opaque: compared for equality only
  std::string uid;
  std::string creation_timestamp; // kept as the server wrote it
  lease_spec spec;
  /// What the fields above do not hold, as received: labels, annotations,
  /// managedFields, fields unknown to leasehold (null: nothing). to_json
  /// starts from it and writes the fields above. Only that rest is kept, so
  /// a lease is copied (per renew, per message) without a copy of the JSON
  /// of its own fields.
  nlohmann::json raw;
  /// etcd only: the remaining TTL of the key's etcd lease when it was read,
  /// in whole seconds as etcd reports it (truncated). Followers judge from
  /// it whether a vanished key could have expired (docs/safety.md,
  /// "Writes from outside the protocol"). nullopt elsewhere, and on records
  /// that came from a watch stream.
  std::optional<std::int64_t> ttl_seconds;
  /// etcd only: how long before the transport began this read the reading
  /// in ttl_seconds was sent (a reading of the same etcd lease shared with
  /// other keys: transport/etcd/etcd_ttl_readings.hpp); 0 when it was sent
  /// during this read. A follower counts the reading from its own send
  /// time minus this age.
  std::chrono::nanoseconds ttl_age{0};
  /// etcd only: the ID of the etcd lease the key is bound to, as etcd
  /// writes it (a range or a watch PUT; "" or "0": none). A follower looks
  /// up its transport's latest TTL reading of that lease by it
  /// (etcd_shared_readings::status_of).
  std::string etcd_lease_id;
  /// etcd renew reply: how long before the transport began this renew the
  /// keepalive that renewed the key was sent (one keepalive of a session
  /// lease serves the renews of every key bound to it:
  /// transport/etcd/etcd_session.hpp); 0 when it was sent during this renew.
  /// The elector counts the renew's validity from its own send time minus
  /// this age.
  std::chrono::nanoseconds renewed_age{0};
  /// etcd renew request: the oldest keepalive (by its send, before the
  /// transport begins the renew) the renew may ride on instead of sending
  /// one (0: a keepalive sent during the renew). The elector sets what its
  /// timings spare (elector_actor::renew).
  std::chrono::nanoseconds renew_max_age{0};
  /// etcd create only (a request field): the store revision of the read
  /// that found the key absent (0: none). The transport then reports in
  /// `unwritten_since_read` whether etcd's history of the key shows no
  /// write between that read and this create, i.e. no term of another
  /// replica came and went unseen in between (docs/safety.md).
  std::int64_t absent_at_revision = 0;
  /// etcd create only (a request field): the store revision of the
  /// follower's latest read that found the key present with a TTL of 0
  /// (its read_revision), when it judged the key ran out. The transport
  /// then reports in `unwritten_since_read` whether the key's history
  /// from there shows it present, then gone once, then nothing up to this
  /// create: no other term came and went, however late a stream is.
  std::int64_t seen_at_revision = 0;
  /// etcd read reply: the store revision the range that read this record
  /// was answered at (0: a record from a stream, a write, elsewhere).
  std::int64_t read_revision = 0;
  /// etcd create reply: true when etcd's history of the key from
  /// absent_at_revision + 1 up to this create holds no other write; false
  /// when it does, when it is unknown (compacted, a failed read, more than
  /// 2,048 revisions in between) or when not asked.
  bool unwritten_since_read = false;
  /// Kubernetes renew (a request field): the writer follows the
  /// transport's watch stream and needs no event of this write (it has
  /// the answer): the stream drops the event that repeats the answer byte
  /// for byte while the writer alone follows the Lease
  /// (transport/watch_echoes.hpp).
  bool skip_watch_echo = false;

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
