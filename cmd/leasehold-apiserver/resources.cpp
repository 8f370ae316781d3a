#include "cmd/leasehold-apiserver/resources.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <ctime>
#include <limits>

#include "leasehold/lease.hpp"

namespace leasehold::apiserver {

extern const char openapi_schemas_json[];   // openapi/schemas.json, embedded at build time

using nlohmann::json;

namespace {

field_error invalid(std::string field, const json& value, std::string detail) {
  return {std::move(field), "FieldValueInvalid", value.dump(), std::move(detail)};
}

// Each check returns the first error for one field of `obj` (absent and null
// are accepted: the API server defaults them).
std::optional<field_error> check_string(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null() || it->is_string())
    return std::nullopt;
  return invalid(path + key, *it, "must be a string");
}

std::optional<field_error> check_int32(const json& obj, const char* key, const std::string& path,
                                       std::int64_t min, const char* min_detail) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number_integer())
    return invalid(path + key, *it, "must be an integer");
  auto v = it->get<std::int64_t>();
  if (v > std::numeric_limits<std::int32_t>::max())
    return invalid(path + key, *it, "must fit in a 32-bit integer");
  if (v < min)
    return invalid(path + key, *it, min_detail);
  return std::nullopt;
}

std::optional<field_error> check_micro_time(const json& obj, const char* key, const std::string& path) {
  if (auto e = check_string(obj, key, path))
    return e;
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string() && !parse_micro_time(it->get<std::string>()))
    return invalid(path + key, *it, "must be an RFC 3339 time like 2006-01-02T15:04:05.000000Z");
  return std::nullopt;
}

std::optional<field_error> check_object(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null() || it->is_object())
    return std::nullopt;
  return invalid(path + key, *it, "must be an object");
}

std::optional<field_error> check_string_map(const json& obj, const char* key, const std::string& path) {
  if (auto e = check_object(obj, key, path))
    return e;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return std::nullopt;
  for (auto& [k, v] : it->items())
    if (!v.is_string())
      return invalid(path + key + "." + k, v, "must be a string");
  return std::nullopt;
}

std::optional<field_error> validate_lease_spec(const json& object) {
  if (auto e = check_object(object, "spec", ""))
    return e;
  auto it = object.find("spec");
  if (it == object.end() || it->is_null())
    return std::nullopt;
  const json& spec = *it;
  const std::string p = "spec.";
  if (auto e = check_string(spec, "holderIdentity", p)) return e;
  if (auto e = check_int32(spec, "leaseDurationSeconds", p, 1, "must be greater than 0")) return e;
  if (auto e = check_micro_time(spec, "acquireTime", p)) return e;
  if (auto e = check_micro_time(spec, "renewTime", p)) return e;
  if (auto e = check_int32(spec, "leaseTransitions", p, 0, "must be greater than or equal to 0")) return e;
  if (auto e = check_string(spec, "preferredHolder", p)) return e;
  return check_string(spec, "strategy", p);
}

/// coordination.k8s.io/v1beta1 LeaseCandidate: spec.leaseName is required;
/// the rest as the API types them.
std::optional<field_error> validate_lease_candidate_spec(const json& object) {
  const field_error required{"spec.leaseName", "FieldValueRequired", "", ""};
  if (auto e = check_object(object, "spec", ""))
    return e;
  auto it = object.find("spec");
  if (it == object.end() || it->is_null())
    return required;
  const json& spec = *it;
  const std::string p = "spec.";
  if (auto e = check_string(spec, "leaseName", p)) return e;
  auto name = spec.find("leaseName");
  if (name == spec.end() || name->is_null() || name->get<std::string>().empty())
    return required;
  if (auto e = check_micro_time(spec, "pingTime", p)) return e;
  if (auto e = check_micro_time(spec, "renewTime", p)) return e;
  if (auto e = check_string(spec, "binaryVersion", p)) return e;
  if (auto e = check_string(spec, "emulationVersion", p)) return e;
  return check_string(spec, "strategy", p);
}

std::optional<field_error> validate_config_map(const json& object) {
  if (auto e = check_string_map(object, "data", ""))
    return e;
  return check_string_map(object, "binaryData", "");
}

std::optional<field_error> validate_event(const json& object) {
  return check_object(object, "involvedObject", "");
}

// ---- table cells ------------------------------------------------------------

/// As Kubernetes prints durations (k8s.io/apimachinery/pkg/util/duration).
std::string human_duration(long long seconds) {
  if (seconds < -1)
    return "<invalid>";
  if (seconds < 0)
    seconds = 0;
  auto t = [](long long a, const char* ua, long long b = 0, const char* ub = "") {
    return std::to_string(a) + ua + (b != 0 ? std::to_string(b) + ub : "");
  };
  long long minutes = seconds / 60, hours = seconds / 3600, days = hours / 24;
  if (seconds < 120) return t(seconds, "s");
  if (minutes < 10) return t(minutes, "m", seconds % 60, "s");
  if (minutes < 180) return t(minutes, "m");
  if (hours < 8) return t(hours, "h", minutes % 60, "m");
  if (hours < 48) return t(hours, "h");
  if (hours < 24 * 8) return t(days, "d", hours % 24, "h");
  if (days < 365 * 2) return t(days, "d");
  if (days < 365 * 8) return t(days / 365, "y", days % 365, "d");
  return t(days / 365, "y");
}

/// Seconds since the epoch of an RFC 3339 time ("...Z"); nullopt if not one.
std::optional<long long> epoch_seconds(const json& text) {
  if (!text.is_string())
    return std::nullopt;
  std::tm tm{};
  const char* end = strptime(text.get_ref<const std::string&>().c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr)
    return std::nullopt;
  return static_cast<long long>(timegm(&tm));
}

json age_since(const json& time, long long now) {
  auto then = epoch_seconds(time);
  return then ? json(human_duration(now - *then)) : json("<unknown>");
}

json field_at(const json& object, const char* pointer) {
  json::json_pointer p(pointer);
  return object.contains(p) && !object[p].is_null() ? object[p] : json("");
}

json cell_name(const json& o, long long) { return field_at(o, "/metadata/name"); }
json cell_age(const json& o, long long now) { return age_since(field_at(o, "/metadata/creationTimestamp"), now); }
json cell_holder(const json& o, long long) { return field_at(o, "/spec/holderIdentity"); }
json cell_lease_name(const json& o, long long) { return field_at(o, "/spec/leaseName"); }
json cell_data(const json& o, long long) {
  std::size_t n = 0;
  for (const char* key : {"data", "binaryData"})
    if (o.contains(key) && o[key].is_object())
      n += o[key].size();
  return n;
}
json cell_last_seen(const json& o, long long now) {
  for (const char* p : {"/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"})
    if (auto t = field_at(o, p); t != "")
      return age_since(t, now);
  return "<unknown>";
}
json cell_type(const json& o, long long) { return field_at(o, "/type"); }
json cell_reason(const json& o, long long) { return field_at(o, "/reason"); }
json cell_message(const json& o, long long) { return field_at(o, "/message"); }
json cell_object(const json& o, long long) {
  std::string kind = field_at(o, "/involvedObject/kind").get<std::string>();
  std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) { return std::tolower(c); });
  return kind + "/" + field_at(o, "/involvedObject/name").get<std::string>();
}

const char* name_doc = "Name must be unique within a namespace. More info: "
                       "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const char* age_doc = "CreationTimestamp is a timestamp representing the server time when this "
                      "object was created.";

json group_version_entry(const resource_type& r) {
  return {{"groupVersion", r.api_version()}, {"version", r.version}};
}

/// Every version the group serves, the first in the table preferred
/// (coordination.k8s.io: v1 with Lease, v1beta1 with LeaseCandidate).
json api_group(const std::string& name) {
  json versions = json::array();
  for (auto& r : served_resources())
    if (r.group == name && std::find(versions.begin(), versions.end(), group_version_entry(r))
                               == versions.end())
      versions.push_back(group_version_entry(r));
  if (versions.empty())
    return nullptr;
  json preferred = versions.front();
  return {{"name", name}, {"versions", std::move(versions)}, {"preferredVersion", std::move(preferred)}};
}

json resource_list(const std::string& group_version) {
  json resources = json::array();
  for (auto& r : served_resources()) {
    if (r.api_version() != group_version)
      continue;
    json entry = {{"name", r.plural},
                  {"singularName", r.singular},
                  {"namespaced", true},
                  {"kind", r.kind},
                  {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}};
    if (!r.short_names.empty())
      entry["shortNames"] = r.short_names;
    resources.push_back(std::move(entry));
  }
  return {{"kind", "APIResourceList"}, {"apiVersion", "v1"},
          {"groupVersion", group_version}, {"resources", std::move(resources)}};
}

} // namespace

std::string field_error::cause_message() const {
  if (type == "FieldValueRequired")
    return "Required value: " + detail;
  return "Invalid value: " + value + ": " + detail;
}

std::string resource_type::api_version() const {
  return group.empty() ? version : group + "/" + version;
}

std::string resource_type::qualified() const {
  return group.empty() ? plural : plural + "." + group;
}

std::string resource_type::qualified_kind() const {
  return group.empty() ? kind : kind + "." + group;
}

const std::vector<resource_type>& served_resources() {
  static const std::vector<resource_type> table = {
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", {}, 0, validate_lease_spec,
     {{"Name", name_doc, cell_name, "name"},
      {"Holder", "The holder of the lease.", cell_holder, ""},
      {"Age", age_doc, cell_age, ""}}},
    {"coordination.k8s.io", "v1beta1", "leasecandidates", "leasecandidate", "LeaseCandidate", {},
     0, validate_lease_candidate_spec,
     {{"Name", name_doc, cell_name, "name"},
      {"Lease", "The Lease this candidate runs for.", cell_lease_name, ""},
      {"Age", age_doc, cell_age, ""}}},
    {"", "v1", "configmaps", "configmap", "ConfigMap", {"cm"}, 0, validate_config_map,
     {{"Name", name_doc, cell_name, "name"},
      {"Data", "The number of entries in data and binaryData.", cell_data, ""},
      {"Age", age_doc, cell_age, ""}}},
    {"", "v1", "events", "event", "Event", {"ev"}, 10000, validate_event,
     {{"Last Seen", "The time of the last occurrence.", cell_last_seen, ""},
      {"Type", "Type of this event (Normal, Warning).", cell_type, ""},
      {"Reason", "The reason for the transition into the object's current status.", cell_reason, ""},
      {"Object", "The object this event is about.", cell_object, ""},
      {"Message", "A description of the status of this operation.", cell_message, ""},
      {"Name", name_doc, cell_name, "name"}}},
  };
  return table;
}

const resource_type* find_resource(const std::string& group, const std::string& version,
                                   const std::string& plural) {
  for (auto& r : served_resources())
    if (r.group == group && r.version == version && r.plural == plural)
      return &r;
  return nullptr;
}

std::optional<field_error> validate_object(const resource_type& r, const json& object) {
  if (auto e = check_object(object, "metadata", ""))
    return e;
  if (auto md = object.find("metadata"); md != object.end() && md->is_object()) {
    const std::string p = "metadata.";
    for (const char* key : {"name", "generateName", "namespace", "resourceVersion", "uid"})
      if (auto e = check_string(*md, key, p))
        return e;
    if (auto e = check_string_map(*md, "labels", p)) return e;
    if (auto e = check_string_map(*md, "annotations", p)) return e;
    auto name = md->find("name");
    if (name != md->end() && name->is_string() && !lease_name_error(name->get<std::string>()).empty())
      return invalid("metadata.name", *name,
                     "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                     "characters, '-' or '.', and must start and end with an alphanumeric character");
  }
  return r.validate_spec ? r.validate_spec(object) : std::nullopt;
}

std::string reason_for(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "Unknown";
  }
}

json failure_status(int code, const std::string& reason, const std::string& message, json details) {
  json s = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason}, {"code", code}};
  if (!details.empty())
    s["details"] = std::move(details);
  return s;
}

json object_details(const resource_type& r, const std::string& name) {
  json d = {{"name", name}, {"kind", r.plural}};
  if (!r.group.empty())
    d["group"] = r.group;
  return d;
}

json as_table(const resource_type& r, const json& objects, json list_metadata, bool include_object) {
  json columns = json::array();
  for (auto& c : r.columns)
    columns.push_back({{"name", c.name}, {"type", c.name == "Data" ? "integer" : "string"},
                       {"format", c.format}, {"description", c.description},
                       {"priority", c.name == "Name" && r.plural == "events" ? 1 : 0}});
  long long now = static_cast<long long>(std::time(nullptr));
  json rows = json::array();
  for (auto& o : objects) {
    json cells = json::array();
    for (auto& c : r.columns)
      cells.push_back(c.cell(o, now));
    json row_object = include_object
                        ? o
                        : json{{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"},
                               {"metadata", o.value("metadata", json::object())}};
    rows.push_back({{"cells", std::move(cells)}, {"object", std::move(row_object)}});
  }
  return {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", std::move(list_metadata)},
          {"columnDefinitions", std::move(columns)}, {"rows", std::move(rows)}};
}

namespace {

const json& openapi_schemas() {
  static const json schemas = json::parse(openapi_schemas_json);
  return schemas;
}

/// "api/v1" or "apis/coordination.k8s.io/v1": the key of a group version.
std::string openapi_key(const resource_type& r) {
  return r.group.empty() ? "api/" + r.version : "apis/" + r.api_version();
}

json openapi_operation(const resource_type& r, const std::string& action, bool item) {
  json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
  json params = json::array();
  if (action == "post" || action == "put" || action == "patch")
    for (const char* q : {"dryRun", "fieldManager", "fieldValidation"})
      params.push_back({{"name", q}, {"in", "query"}, {"schema", {{"type", "string"}, {"uniqueItems", true}}}});
  if (action == "list")
    for (const char* q : {"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
                          "watch", "allowWatchBookmarks", "timeoutSeconds"})
      params.push_back({{"name", q}, {"in", "query"}, {"schema", {{"type", "string"}, {"uniqueItems", true}}}});
  std::string schema_ref;
  for (auto& [name, schema] : openapi_schemas().items())
    if (schema.contains("x-kubernetes-group-version-kind") &&
        schema["x-kubernetes-group-version-kind"][0] == gvk)
      schema_ref = "#/components/schemas/" + name;
  json response_schema = action == "list" || action == "delete"
                           ? json{{"type", "object"}}
                           : json{{"$ref", schema_ref}};
  json op = {{"operationId", action + r.kind + (item ? "" : "Collection")},
             {"parameters", std::move(params)},
             {"responses", {{"200", {{"description", "OK"},
                                     {"content", {{"application/json", {{"schema", response_schema}}}}}}}}},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", gvk}};
  if (action == "patch")
    op["requestBody"] = {{"content", {{"application/json-patch+json", {{"schema", {{"type", "object"}}}}},
                                      {"application/merge-patch+json", {{"schema", {{"type", "object"}}}}},
                                      {"application/strategic-merge-patch+json", {{"schema", {{"type", "object"}}}}}}},
                         {"required", true}};
  return op;
}

} // namespace

std::optional<json> openapi_document(const std::string& path) {
  const std::string prefix = "/openapi/v3";
  if (path == prefix) {
    auto hash = std::to_string(std::hash<std::string>{}(openapi_schemas_json));
    json paths = json::object();
    for (auto& r : served_resources())
      paths[openapi_key(r)] = {{"serverRelativeURL", prefix + "/" + openapi_key(r) + "?hash=" + hash}};
    return json{{"paths", std::move(paths)}};
  }
  json paths = json::object();
  for (auto& r : served_resources()) {
    if (path != prefix + "/" + openapi_key(r))
      continue;
    json ns_param = {{"name", "namespace"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}};
    json name_param = {{"name", "name"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}};
    std::string collection = "/" + openapi_key(r) + "/namespaces/{namespace}/" + r.plural;
    paths[collection] = {{"get", openapi_operation(r, "list", false)},
                         {"post", openapi_operation(r, "post", false)},
                         {"parameters", {ns_param}}};
    paths[collection + "/{name}"] = {{"get", openapi_operation(r, "get", true)},
                                     {"put", openapi_operation(r, "put", true)},
                                     {"patch", openapi_operation(r, "patch", true)},
                                     {"delete", openapi_operation(r, "delete", true)},
                                     {"parameters", {name_param, ns_param}}};
  }
  if (paths.empty())
    return std::nullopt;
  return json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0+leasehold"}}},
              {"paths", std::move(paths)},
              {"components", {{"schemas", openapi_schemas()}}}};
}

std::optional<json> discovery_document(const std::string& path, const std::string& server_address) {
  if (path == "/version")
    return json{{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0+leasehold"},
                {"gitCommit", ""}, {"gitTreeState", "clean"}, {"buildDate", "2025-01-01T00:00:00Z"},
                {"goVersion", "go1.23"}, {"compiler", "gc"}, {"platform", "linux/amd64"}};
  if (path == "/api")
    return json{{"kind", "APIVersions"}, {"versions", {"v1"}},
                {"serverAddressByClientCIDRs",
                 {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
  if (path == "/api/v1")
    return resource_list("v1");
  if (path == "/apis") {
    json groups = json::array();
    for (auto& r : served_resources()) {
      json g = api_group(r.group);
      if (!r.group.empty() && std::find(groups.begin(), groups.end(), g) == groups.end())
        groups.push_back(std::move(g));
    }
    return json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", std::move(groups)}};
  }
  for (auto& r : served_resources()) {
    if (r.group.empty())
      continue;
    if (path == "/apis/" + r.group) {
      json g = api_group(r.group);
      g["kind"] = "APIGroup";
      g["apiVersion"] = "v1";
      return g;
    }
    if (path == "/apis/" + r.api_version())
      return resource_list(r.api_version());
  }
  return std::nullopt;
}

} // namespace leasehold::apiserver
