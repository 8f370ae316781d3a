// The Kubernetes resources leasehold-apiserver serves, their validation,
// Status bodies and discovery. One table (served_resources) drives routing,
// storage, validation and discovery: a new resource is one entry.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace leasehold::apiserver {

/// One invalid field, as the API server reports it in an Invalid Status.
struct field_error {
  std::string field;    // "spec.leaseDurationSeconds"
  std::string type;     // "FieldValueInvalid" or "FieldValueRequired"
  std::string value;    // the offending value as JSON text (Invalid only)
  std::string detail;   // "must be greater than 0"

  /// "Invalid value: 0: must be greater than 0" (the cause message).
  std::string cause_message() const;
};

using validator = std::optional<field_error> (*)(const nlohmann::json& object);

/// One column of `kubectl get` output (a meta/v1 Table column).
struct table_column {
  std::string name;          // "Holder"
  std::string description;
  /// The cell for an object; `now` is seconds since the epoch (for ages).
  nlohmann::json (*cell)(const nlohmann::json& object, long long now);
  std::string format;        // "name" for the Name column
};

struct resource_type {
  std::string group;        // "" for the core group
  std::string version;      // "v1"
  std::string plural;       // "leases"
  std::string singular;     // "lease"
  std::string kind;         // "Lease"
  std::vector<std::string> short_names;
  std::size_t max_objects = 0;   // 0: unbounded; else the oldest are evicted
  validator validate_spec = nullptr;
  std::vector<table_column> columns;   // as a real API server prints them

  std::string api_version() const;   // "coordination.k8s.io/v1" or "v1"
  std::string qualified() const;     // "leases.coordination.k8s.io" or "configmaps"
  std::string qualified_kind() const;  // "Lease.coordination.k8s.io" or "ConfigMap"
};

const std::vector<resource_type>& served_resources();
const resource_type* find_resource(const std::string& group, const std::string& version,
                                   const std::string& plural);

/// Validates the metadata every stored object shares, then the resource's fields.
std::optional<field_error> validate_object(const resource_type& r, const nlohmann::json& object);

/// A meta/v1 Status with status Failure (details omitted when empty).
nlohmann::json failure_status(int code, const std::string& reason, const std::string& message,
                              nlohmann::json details = nlohmann::json::object());
/// details{name, group, kind} for errors about one object (group omitted for core).
nlohmann::json object_details(const resource_type& r, const std::string& name);
/// The usual Status reason for an HTTP code ("NotFound", "TooManyRequests", ...).
std::string reason_for(int code);

/// A meta/v1 Table of `objects`, rows carrying the object's metadata
/// (PartialObjectMetadata) or, with `include_object`, the whole object.
nlohmann::json as_table(const resource_type& r, const nlohmann::json& objects,
                        nlohmann::json list_metadata, bool include_object);

/// OpenAPI v3 documents for the served resources; nullopt for other paths.
std::optional<nlohmann::json> openapi_document(const std::string& path);

/// Discovery documents for the served resources; nullopt for other paths.
std::optional<nlohmann::json> discovery_document(const std::string& path,
                                                 const std::string& server_address);

} // namespace leasehold::apiserver
