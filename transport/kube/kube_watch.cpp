#include "transport/kube/kube_watch.hpp"

#include <nlohmann/json.hpp>

#include "transport/kube/kube_client.hpp"
#include "lease/lease_json.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

std::string object_version(const json& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object())
    return {};
  auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get<std::string>() : std::string{};
}

/// The type of an event that carries a Lease: ADDED, MODIFIED or DELETED.
std::optional<watch_line::type> change_of(std::string_view type) {
  if (type == "ADDED")
    return watch_line::type::added;
  if (type == "MODIFIED")
    return watch_line::type::modified;
  if (type == "DELETED")
    return watch_line::type::deleted;
  return std::nullopt;
}

/// An ADDED, MODIFIED or DELETED line whose object is a plain Lease
/// (read_plain_event), read in place; nullopt for anything else (the
/// document path reads it).
std::optional<watch_line> plain_watch_line(const std::string& line) {
  std::string type;
  auto l = read_plain_event(line, type);
  auto what = l ? change_of(type) : std::nullopt;
  if (!what)
    return std::nullopt;
  watch_line w;
  w.what = *what;
  w.resource_version = l->resource_version;
  w.record = std::move(l);
  return w;
}

} // namespace

parse_result<watch_line> parse_watch_line(const std::string& line) {
  parse_result<watch_line> out;
  auto fail = [&out](std::string why) {
    out.error = std::move(why);
    return out;
  };
  if ((out.value = plain_watch_line(line)))
    return out;
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail("not a JSON object");
  auto type = j.find("type");
  auto obj = j.find("object");
  if (type == j.end() || !type->is_string())
    return fail("type: expected a string");
  if (obj == j.end() || !obj->is_object())
    return fail("object: expected an object");
  watch_line w;
  auto t = type->get<std::string>();
  if (t == "ERROR") {
    w.what = watch_line::type::error;
    w.status_code = obj->value("code", 0);
    w.message = obj->value("message", std::string{});
    out.value = std::move(w);
    return out;
  }
  w.resource_version = object_version(*obj);
  if (t == "BOOKMARK") {
    w.what = watch_line::type::bookmark;
    out.value = std::move(w);
    return out;
  }
  auto what = change_of(t);
  if (!what)
    return fail("type: unknown event type \"" + t + "\"");
  w.what = *what;
  auto rec = parse_lease(*obj);
  if (!rec.ok())
    return fail("object." + rec.error);
  w.record = std::move(rec.value);
  out.value = std::move(w);
  return out;
}

std::string lease_watch_path(const lease_key& k, const std::string& rv, int timeout_seconds) {
  auto path = leases_path(k.ns) + "?watch=1&allowWatchBookmarks=true"
              + (k.name.empty() ? std::string{} : "&fieldSelector=metadata.name%3D" + k.name)
              + "&timeoutSeconds=" + std::to_string(timeout_seconds);
  if (!rv.empty())
    path += "&resourceVersion=" + rv;
  return path;
}

lease_watcher::lease_watcher(connection_config cfg, lease_watch_request req,
                             std::shared_ptr<watch_fanout> fanout,
                             std::shared_ptr<watch_echoes> echoes)
  : lease_watch_loop(std::move(req), std::move(fanout)), client_(std::move(cfg)),
    echoes_(std::move(echoes)), rv_(watch_request().resource_version) {
  start();
}

lease_watcher::~lease_watcher() {
  halt();
}

lease_watch_loop::request lease_watcher::next_request() {
  return {"GET", lease_watch_path(watch_request().lease, rv_, watch_stream_seconds)};
}

api_error lease_watcher::open(const request& r, std::chrono::milliseconds idle,
                              const std::function<void()>& on_open,
                              const std::function<bool(const char*, std::size_t)>& on_data) {
  return client_.stream(r.verb, r.path, nullptr, {}, idle, on_open, on_data);
}

void lease_watcher::abort() {
  client_.stop();
}

std::optional<api_error> lease_watcher::on_line(const std::string& line, const request& r,
                                                bool& delivered) {
  if (echoes_ && fanout()) {
    // This transport's own renew, its writer the Lease's only follower: it
    // has the answer; nothing to parse or deliver.
    auto e = echoes_->take(line);
    if (e && fanout()->followed_by_one(e->name)) {
      rv_ = e->resource_version;
      delivered = true;
      ++census::echoes_dropped;
      return std::nullopt;
    }
  }
  auto parsed = parse_watch_line(line);
  if (!parsed.ok())
    return malformed(r, "malformed watch event: " + parsed.error);
  auto& w = *parsed.value;
  using t = watch_line::type;
  if (w.what == t::error) {
    if (w.status_code == 410) {
      rv_.clear();   // too old: start again from the current state
      return api_error{};   // an ordinary end
    }
    return api_error{error_kind::other, w.status_code, r.verb, r.path,
                     "ERROR event: " + std::to_string(w.status_code) + " " + w.message, 0};
  }
  if (!w.resource_version.empty())
    rv_ = w.resource_version;
  delivered = true;
  if (w.what == t::bookmark)
    return std::nullopt;
  auto name = w.record ? w.record->name : std::string{};
  if (w.what == t::deleted)
    send_for(name, {lease_watch_event::kind::deleted, std::nullopt, {}});
  else
    send_for(name, {lease_watch_event::kind::record, std::move(w.record), {}});
  return std::nullopt;
}

} // namespace leasehold
