// The etcd v3 JSON gateway's answers, parsed: int64 fields sent as JSON
// strings, base64 keys and values, a key-value as a lease record (term =
// create_revision, resourceVersion = mod_revision), gRPC error codes, and
// the lines of a watch stream. Every error names the field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"

namespace leasehold {

/// One key-value as /v3/kv/range returns it (int64 fields are JSON strings,
/// absent when zero; key and value base64).
struct etcd_kv {
  std::string key;        // decoded ("" when the reply leaves it out)
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::string lease_id;   // "0" or absent: no lease
  std::string value;
};

/// The keys of one namespace: <prefix>/<namespace>/<name>. A watch or a
/// range of the whole scope is [dir(), range_end()).
struct etcd_scope {
  std::string prefix;
  std::string ns;
  std::string dir() const { return prefix + "/" + ns + "/"; }
  std::string key(const std::string& name) const { return dir() + name; }
  /// The first key after every key that starts with dir().
  std::string range_end() const;
  /// The lease name of `key`; nullopt when it is not a key of this scope.
  std::optional<std::string> name_of(const std::string& key) const;
};

/// An int64 field sent as a JSON string (or number); 0 when absent.
bool int64_field(const nlohmann::json& j, const char* name, std::int64_t& out);
/// An etcd lease ID field as text ("0" when absent, "" when not an ID).
std::string id_field(const nlohmann::json& j, const char* name);
/// gRPC status code (in the gateway's error body) to an error kind.
error_kind grpc_kind(int code, int http_status);
/// One key-value object of a range reply or a watch event (`where` names
/// it in errors: "kvs[0]", "events[1].kv").
parse_result<etcd_kv> parse_kv(const nlohmann::json& j, const std::string& where);
/// kvs[0] of a range reply; nullopt when the key does not exist.
parse_result<std::optional<etcd_kv>> first_kv(const nlohmann::json& reply);
/// The lease record for `kv` (of a range reply or a watch event, `where`).
parse_result<lease> to_lease(const lease_key& k, const etcd_kv& kv,
                             const std::string& where = "kvs[0]");
/// header.revision of a reply; 0 when absent or not an int64.
std::int64_t header_revision(const nlohmann::json& reply);
/// The TTL (whole seconds) of a key created with `s`: its leaseDurationSeconds
/// (at least 1), twice that without a holder, so a standby's unheld create
/// outlives every replica's wait for it (else it would be held as vanished).
int etcd_key_ttl(const lease_spec& s);

/// A key's record kept compactly: the fields to_lease sets (a map of
/// 10,000 keys: ~270 bytes a key, 472 as whole leases).
struct etcd_record {
  std::string resource_version;
  std::string etcd_lease_id;
  // The spec, without what an etcd value never has (renewTime) and with
  // what it seldom has (preferredHolder, strategy) out of line: 80 bytes
  // a key, not lease_spec's 144.
  std::string holder_identity;
  std::optional<int> lease_duration_seconds;
  std::optional<wall_time> acquire_time;
  int lease_transitions = 0;
  struct seldom {
    std::string preferred_holder;
    std::string strategy;
  };
  std::shared_ptr<const seldom> rare;   // null: both empty

  static etcd_record of(const lease& l);
  /// The record as to_lease made it, for lease `k`.
  lease to_lease(const lease_key& k) const;
};

/// Every key of a scope as one range read saw it.
struct etcd_scope_state {
  std::map<std::string, etcd_record> records;   // by lease name
  std::int64_t revision = 0;              // the store's revision at the read
  /// A page of a read with a limit that left keys out (the reply's `more`):
  /// the next page starts at this key; empty when the range is complete.
  std::string next_key;
};
/// A namespace's keys as a quiet watch checks them (etcd_client::changed_since).
struct etcd_scope_changes {
  std::int64_t count = 0;   // keys under the namespace's prefix
  bool written = false;     // one of them was written at or after the revision asked
};
/// A range reply over `scope`: the records by name (a key that is no lease
/// record is nobody's lease: left out). `from`: where the page began; a
/// next page that would not start past it is an error.
parse_result<etcd_scope_state> parse_scope_range(const nlohmann::json& reply,
                                                 const etcd_scope& scope,
                                                 const std::string& from = "");

/// One message of an etcd watch stream (the gateway writes one JSON object
/// per line: {"result":{...}} or {"error":{...}}).
struct etcd_watch_message {
  struct event {
    std::string name;              // the lease name (the key in the watched scope)
    bool deleted = false;          // DELETE (an expired or revoked lease, too); else PUT
    std::optional<lease> record;   // PUT: the record, parsed as etcd_client::get_lease does
    std::string error;             // PUT of a value that is no lease record: why (no record)
    std::int64_t mod_revision = 0;
  };
  bool created = false;            // the watch is set up
  bool canceled = false;           // the server ended this watch
  std::int64_t compact_revision = 0;   // canceled: the start revision is compacted away
  std::string cancel_reason;
  std::vector<event> events;
  bool error = false;              // {"error":...}: the gateway's stream failed
  int grpc_code = 0;
  int http_code = 0;
  std::string message;             // error: its message
};

/// Parses one line of a watch of `scope`. A PUT whose value is no lease
/// record is no error of the line: its event says why.
parse_result<etcd_watch_message> parse_etcd_watch_line(const std::string& line,
                                                       const etcd_scope& scope);

} // namespace leasehold
