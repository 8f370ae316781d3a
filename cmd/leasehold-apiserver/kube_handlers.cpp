// Kubernetes API requests: the route, the fault gate, the answer, the counters
// and the request log line.
#include <chrono>
#include <cstdlib>

#include "cmd/leasehold-apiserver/http_replies.hpp"
#include "cmd/leasehold-apiserver/patch.hpp"
#include "cmd/leasehold-apiserver/resources.hpp"
#include "cmd/leasehold-apiserver/server_impl.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

void local_api_server::impl::kube(const httplib::Request& req, httplib::Response& res) {
  auto arrived = std::chrono::steady_clock::now();
  auto user_agent = req.get_header_value("User-Agent");
  auto identity = req.get_header_value("X-Leasehold-Identity");
  auto route = parse_route(req.method, req.path);
  std::string verb = route ? route->verb : "unknown";
  if (verb.empty())
    verb = "unsupported";
  else if ((verb == "list" || verb == "get") && parse_bool(req.get_param_value("watch")).value_or(false))
    verb = "watch";
  int code = 0;
  switch (apply_faults(user_agent, identity, res)) {
    case outcome::dropped:
      drop_connection(req);
      set_status(res, 503, "connection dropped");   // only if the drop failed
      break;
    case outcome::answered:
      code = res.status;
      break;
    case outcome::serve:
      serve(req, route, res);
      code = res.status;
      break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stats.record(verb, user_agent, identity, code,
                 std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now() - arrived));
  }
  if (opts.log_requests)
    log("request", {{"verb", verb}, {"method", req.method}, {"path", req.path},
                    {"code", code}, {"user_agent", user_agent}, {"identity", identity}});
}

void local_api_server::impl::serve(const httplib::Request& req, const std::optional<kube_route>& route,
                                   httplib::Response& res) {
  auto doc = route && route->verb == "discovery"
               ? discovery_document(req.path, opts.host + ":" + std::to_string(port))
               : std::nullopt;
  if (!doc && req.method == "GET" && req.path.rfind("/openapi/", 0) == 0)
    doc = openapi_document(req.path);
  if (doc)
    return set_json(res, 200, *doc);
  if (!route || route->verb == "discovery")
    return set_status(res, 404, "the server could not find the requested resource");
  if (route->verb.empty())
    return set_status(res, 405, req.method + " " + req.path + " is not supported by leasehold-apiserver");
  const resource_type& r = *route->resource;
  auto watch = parse_bool(req.get_param_value("watch"));
  if (!watch)
    return set_status(res, 400, "watch: invalid value \"" + req.get_param_value("watch") + "\"");
  if (route->verb == "get" && !*watch)
    return send_reply(res, store.get(r, route->ns, route->name), wants_table(req) ? &r : nullptr, req);
  if (route->verb == "list" || route->verb == "get") {
    object_filter filter;
    std::string field_selector = req.get_param_value("fieldSelector");
    if (route->verb == "get")   // a watch on one object
      field_selector = "metadata.name=" + route->name + (field_selector.empty() ? "" : "," + field_selector);
    auto error = filter.parse(route->ns, req.get_param_value("labelSelector"), field_selector);
    if (!error.empty())
      return set_status(res, 400, error);
    if (*watch)
      return start_watch(req, r, std::move(filter), res);
    auto limit = std::strtoull(req.get_param_value("limit").c_str(), nullptr, 10);
    return send_reply(res, store.list(r, filter, limit, req.get_param_value("continue")),
                      wants_table(req) ? &r : nullptr, req);
  }
  json body = req.body.empty() ? json(nullptr) : json::parse(req.body, nullptr, false);
  if (body.is_discarded())
    return set_status(res, 400, "the request body is not valid JSON");
  if (route->verb == "delete")
    return send_reply(res, store.remove(r, route->ns, route->name, body));
  if (route->verb == "patch")
    return send_reply(res, store.patch(r, route->ns, route->name, [&](json& object) {
      return apply_patch(req.get_header_value("Content-Type"), body, object);
    }));
  reply result = route->verb == "create" ? store.create(r, route->ns, std::move(body))
                                         : store.update(r, route->ns, route->name, std::move(body));
  send_reply(res, result);
}

} // namespace leasehold
