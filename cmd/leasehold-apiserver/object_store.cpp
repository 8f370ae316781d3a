#include "cmd/leasehold-apiserver/object_store.hpp"

#include <algorithm>
#include <ctime>
#include <utility>

namespace leasehold::apiserver {

using nlohmann::json;

std::string watch_line(const std::string& type, const std::string& object_json) {
  // As json{{"type", type}, {"object", object}}.dump(): keys in order; the
  // types are plain words (ADDED, BOOKMARK, ...), nothing to escape.
  std::string line;
  line.reserve(object_json.size() + type.size() + 24);
  line.append("{\"object\":").append(object_json).append(",\"type\":\"").append(type).append("\"}\n");
  return line;
}

namespace {

std::string in_quotes(const std::string& s) {
  return "\"" + s + "\"";
}

reply not_found(const resource_type& r, const std::string& name) {
  return {404, failure_status(404, "NotFound", r.qualified() + " " + in_quotes(name) + " not found",
                              object_details(r, name))};
}

reply conflict(const resource_type& r, const std::string& name, const std::string& why) {
  return {409, failure_status(409, "Conflict",
                              "Operation cannot be fulfilled on " + r.qualified() + " " +
                                in_quotes(name) + ": " + why,
                              object_details(r, name))};
}

reply bad_request(const std::string& message) {
  return {400, failure_status(400, "BadRequest", message)};
}

reply invalid(const resource_type& r, const std::string& name, const field_error& e) {
  json details = {{"name", name},
                  {"kind", r.kind},
                  {"causes", {{{"reason", e.type}, {"message", e.cause_message()}, {"field", e.field}}}}};
  if (!r.group.empty())
    details["group"] = r.group;
  return {422, failure_status(422, "Invalid",
                              r.qualified_kind() + " " + in_quotes(name) + " is invalid: " + e.field +
                                ": " + e.cause_message(),
                              std::move(details))};
}

std::string string_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::string name_of(const json& object) {
  auto md = object.find("metadata");
  return md != object.end() && md->is_object() ? string_field(*md, "name") : std::string{};
}

/// The checks shared by POST and PUT: a JSON object of this resource, in
/// this namespace, named as the URL (when the URL names it), valid.
std::optional<reply> check_body(const resource_type& r, const std::string& ns,
                                const std::string& url_name, const json& body) {
  if (!body.is_object())
    return bad_request(r.kind + " in version " + in_quotes(r.version) + " cannot be handled as a " +
                       r.kind + ": the body must be a JSON object");
  auto kind = string_field(body, "kind");
  if (!kind.empty() && kind != r.kind)
    return bad_request("the kind of the object (" + kind + ") does not match the resource (" +
                       r.kind + ")");
  auto api_version = string_field(body, "apiVersion");
  if (!api_version.empty() && api_version != r.api_version())
    return bad_request("the apiVersion of the object (" + api_version +
                       ") does not match the resource (" + r.api_version() + ")");
  if (auto e = validate_object(r, body))
    return invalid(r, url_name.empty() ? name_of(body) : url_name, *e);
  auto md = body.find("metadata");
  if (md == body.end() || !md->is_object())
    return std::nullopt;
  auto body_ns = string_field(*md, "namespace");
  if (!body_ns.empty() && body_ns != ns)
    return bad_request("the namespace of the provided object does not match the namespace sent "
                       "on the request");
  auto body_name = string_field(*md, "name");
  if (!url_name.empty() && body_name != url_name)
    return bad_request("the name of the object (" + body_name +
                       ") does not match the name on the URL (" + url_name + ")");
  return std::nullopt;
}

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace

object_store::object_store(std::size_t history_limit)
    : history_limit_(std::max<std::size_t>(history_limit, 1)), rng_(std::random_device{}()) {}

std::string object_store::random_suffix() {
  static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";  // as the API server
  std::string s;
  for (int i = 0; i < 5; ++i)
    s += alphabet[rng_() % (sizeof alphabet - 1)];
  return s;
}

std::string object_store::new_uid() {
  static const char hex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20)
      s += '-';
    unsigned v = rng_() & 15u;
    if (i == 12)
      v = 4;                    // version 4
    else if (i == 16)
      v = 8 | (v & 3u);         // RFC 4122 variant
    s += hex[v];
  }
  return s;
}

void object_store::stamp(const resource_type& r, const std::string& ns, json& object) {
  object["kind"] = r.kind;
  object["apiVersion"] = r.api_version();
  auto& md = object["metadata"];
  md["namespace"] = ns;
  md["resourceVersion"] = std::to_string(++resource_version_);
}

object_store::write_lock::write_lock(object_store& store)
  : store_(store), lock_(store.mu_), version_(store.resource_version_) {}

object_store::write_lock::~write_lock() {
  bool changed = store_.resource_version_ != version_;
  std::vector<std::shared_ptr<const watch_event>> evicted;
  evicted.swap(store_.evicted_);
  lock_.unlock();
  if (changed)
    store_.changed_.notify_all();
}   // the evicted events are freed here, outside the lock

std::string object_store::record(const std::string& type, const std::string& plural, object_ptr object,
                                 object_ptr previous) {
  auto rv = std::stoull((*object)["metadata"]["resourceVersion"].get<std::string>());
  auto text = object->dump();
  auto line = watch_line(type, text);
  history_.push_back(std::make_shared<const watch_event>(
    watch_event{rv, type, plural, std::move(object), std::move(previous), std::move(line)}));
  while (history_.size() > history_limit_) {
    history_floor_ = history_.front()->resource_version;
    evicted_.push_back(std::move(history_.front()));
    history_.pop_front();
  }
  return text;
}

json object_store::erase_locked(iterator it) {
  json object = *it->second.object;   // the stored one stays as the history has it
  json uid = object["metadata"]["uid"];
  creation_order_[std::get<0>(it->first)].erase(it->second.created);
  auto plural = std::get<0>(it->first);
  objects_.erase(it);
  // The real API reports a deletion with the deletion's resourceVersion.
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  record("DELETED", plural, std::make_shared<const json>(std::move(object)));
  return uid;
}

reply object_store::get(const resource_type& r, const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find({r.plural, ns, name});
  if (it == objects_.end())
    return not_found(r, name);
  return {200, it->second.object};
}

// A continue token is "<namespace>/<name>" of the next item to send (neither
// can contain a slash); the next page starts there, at the current state.
reply object_store::list(const resource_type& r, const object_filter& filter, std::size_t limit,
                         const std::string& continue_token) const {
  std::string start_ns, start_name;
  if (!continue_token.empty()) {
    auto slash = continue_token.find('/');
    if (slash == std::string::npos)
      return bad_request("continue: the continue token is not valid: " + in_quotes(continue_token));
    start_ns = continue_token.substr(0, slash);
    start_name = continue_token.substr(slash + 1);
  }
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  json metadata = {{"resourceVersion", std::to_string(resource_version_)}};
  for (auto it = objects_.lower_bound({r.plural, start_ns, start_name}); it != objects_.end(); ++it) {
    if (std::get<0>(it->first) != r.plural)
      break;
    if (!filter.matches(*it->second.object))
      continue;
    if (limit != 0 && items.size() == limit) {
      metadata["continue"] = std::get<1>(it->first) + "/" + std::get<2>(it->first);
      break;
    }
    items.push_back(*it->second.object);
  }
  return {200, {{"kind", r.kind + "List"},
                {"apiVersion", r.api_version()},
                {"metadata", std::move(metadata)},
                {"items", std::move(items)}}};
}

reply object_store::create(const resource_type& r, const std::string& ns, json body) {
  if (auto error = check_body(r, ns, "", body))
    return *error;
  auto& md = body["metadata"];
  write_lock lock(*this);
  auto name = string_field(md, "name");
  if (name.empty()) {
    auto prefix = string_field(md, "generateName");
    if (prefix.empty())
      return invalid(r, "", {"metadata.name", "FieldValueRequired", "",
                             "name or generateName is required"});
    for (int attempt = 0; attempt < 8; ++attempt) {
      name = prefix + random_suffix();
      if (objects_.count({r.plural, ns, name}) == 0)
        break;
    }
    md["name"] = name;
    if (auto e = validate_object(r, body))
      return invalid(r, name, *e);
  }
  key k{r.plural, ns, name};
  if (objects_.count(k) != 0)
    return {409, failure_status(409, "AlreadyExists",
                                r.qualified() + " " + in_quotes(name) + " already exists",
                                object_details(r, name))};
  // Evict before stamping: the history stays in resourceVersion order.
  auto& order = creation_order_[r.plural];
  while (r.max_objects != 0 && order.size() >= r.max_objects)
    erase_locked(objects_.find(order.begin()->second));
  stamp(r, ns, body);
  md["uid"] = new_uid();
  md["creationTimestamp"] = now_rfc3339();
  order.emplace(resource_version_, k);
  auto object = std::make_shared<const json>(std::move(body));
  auto text = record("ADDED", r.plural, object);
  objects_[std::move(k)] = stored{object, resource_version_};
  ++mutations_;
  return {201, std::move(object), std::move(text)};
}

reply object_store::update(const resource_type& r, const std::string& ns, const std::string& name,
                           json body) {
  if (auto error = check_body(r, ns, name, body))   // the body alone: outside the lock
    return *error;
  write_lock lock(*this);
  return update_locked(r, ns, name, std::move(body), true);
}

reply object_store::patch(const resource_type& r, const std::string& ns, const std::string& name,
                          const patch_fn& apply) {
  write_lock lock(*this);
  auto it = objects_.find({r.plural, ns, name});
  if (it == objects_.end())
    return not_found(r, name);
  const json& stored_md = (*it->second.object)["metadata"];
  json object = *it->second.object;
  if (auto error = apply(object))
    return *error;
  if (!object.is_object())
    return bad_request("the patched " + r.kind + " is not a JSON object");
  auto& md = object["metadata"];
  if (!md.is_object())
    return bad_request("the patched " + r.kind + " has no metadata object");
  // What the patch does not name keeps its stored value.
  for (const char* field : {"resourceVersion", "uid", "creationTimestamp", "name", "namespace"})
    if ((!md.contains(field) || md[field].is_null()) && stored_md.contains(field))
      md[field] = stored_md[field];
  return update_locked(r, ns, name, std::move(object));
}

reply object_store::update_locked(const resource_type& r, const std::string& ns,
                                  const std::string& name, json body, bool checked) {
  if (auto error = checked ? std::nullopt : check_body(r, ns, name, body))
    return *error;
  auto& md = body["metadata"];
  auto version = string_field(md, "resourceVersion");
  if (version.empty())
    return invalid(r, name, {"metadata.resourceVersion", "FieldValueInvalid", "0x0",
                             "must be specified for an update"});
  auto it = objects_.find({r.plural, ns, name});
  if (it == objects_.end())
    return not_found(r, name);
  const json& old_md = (*it->second.object)["metadata"];
  if (version != old_md["resourceVersion"].get<std::string>())
    return conflict(r, name, "the object has been modified; please apply your changes to the "
                             "latest version and try again");
  md["uid"] = old_md.value("uid", json());
  md["creationTimestamp"] = old_md.value("creationTimestamp", json());
  stamp(r, ns, body);
  auto object = std::make_shared<const json>(std::move(body));
  auto previous = std::exchange(it->second.object, object);
  auto text = record("MODIFIED", r.plural, object, std::move(previous));
  ++mutations_;
  return {200, std::move(object), std::move(text)};
}

reply object_store::remove(const resource_type& r, const std::string& ns, const std::string& name,
                           const json& delete_options) {
  write_lock lock(*this);
  auto it = objects_.find({r.plural, ns, name});
  if (it == objects_.end())
    return not_found(r, name);
  const json& md = (*it->second.object)["metadata"];
  if (delete_options.is_object() && delete_options.contains("preconditions") &&
      delete_options["preconditions"].is_object()) {
    const json& pre = delete_options["preconditions"];
    for (const char* field : {"resourceVersion", "uid"}) {
      auto want = string_field(pre, field);
      auto have = md[field].get<std::string>();
      if (!want.empty() && want != have)
        return conflict(r, name, std::string("Precondition failed: ") + field + " in precondition: " +
                                   want + ", " + field + " in object meta: " + have);
    }
  }
  json details = object_details(r, name);
  details["uid"] = erase_locked(it);
  ++mutations_;
  return {200, {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
                {"status", "Success"}, {"details", std::move(details)}}};
}

void object_store::wipe() {
  write_lock lock(*this);
  while (!objects_.empty())
    erase_locked(objects_.begin());
  ++mutations_;
}

watch_batch object_store::events_since(const resource_type& r, std::uint64_t since) const {
  std::lock_guard<std::mutex> lock(mu_);
  watch_batch batch;
  batch.oldest = history_floor_;
  batch.current = std::max(since, resource_version_);
  if (since < history_floor_) {
    batch.expired = true;
    return batch;
  }
  auto first = std::upper_bound(history_.begin(), history_.end(), since,
                                [](std::uint64_t v, const auto& e) { return v < e->resource_version; });
  for (auto it = first; it != history_.end(); ++it)
    if ((*it)->plural == r.plural)
      batch.events.push_back(*it);
  return batch;
}

std::uint64_t object_store::wakes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wakes_;
}

void object_store::wait(std::uint64_t since, std::uint64_t wakes_seen,
                        std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_until(lock, deadline, [&] { return resource_version_ > since || wakes_ != wakes_seen; });
}

void object_store::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wakes_;
  }
  changed_.notify_all();
}

std::uint64_t object_store::mutations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mutations_;
}

json object_store::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  json objects = json::array();
  for (auto& [k, s] : objects_)
    objects.push_back({{"resource", std::get<0>(k)}, {"created", s.created}, {"object", *s.object}});
  return {{"resourceVersion", std::to_string(resource_version_)}, {"objects", std::move(objects)}};
}

std::string object_store::restore(const json& snap) {
  if (!snap.is_object() || !snap.contains("objects") || !snap["objects"].is_array())
    return "snapshot: expected an object with an \"objects\" array";
  std::map<key, stored> objects;
  std::map<std::string, std::map<std::uint64_t, key>> order;
  std::uint64_t version = 0;
  try {
    version = std::stoull(snap.value("resourceVersion", std::string("0")));
    for (auto& item : snap["objects"]) {
      auto plural = item.at("resource").get<std::string>();
      const json& object = item.at("object");
      const resource_type* r = nullptr;
      for (auto& candidate : served_resources())
        if (candidate.plural == plural && object.at("apiVersion") == candidate.api_version())
          r = &candidate;
      if (r == nullptr)
        return "snapshot: unknown resource " + plural;
      const json& md = object.at("metadata");
      key k{plural, md.at("namespace").get<std::string>(), md.at("name").get<std::string>()};
      auto created = item.at("created").get<std::uint64_t>();
      version = std::max<std::uint64_t>(version, std::stoull(md.at("resourceVersion").get<std::string>()));
      order[plural].emplace(created, k);
      objects[std::move(k)] = stored{std::make_shared<const json>(object), created};
    }
  } catch (const std::exception& e) {
    return std::string("snapshot: ") + e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  objects_ = std::move(objects);
  creation_order_ = std::move(order);
  resource_version_ = std::max(resource_version_, version);
  // Watches resume only from after the restore.
  history_.clear();
  history_floor_ = resource_version_;
  return "";
}

} // namespace leasehold::apiserver
