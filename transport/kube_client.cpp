#include "transport/kube_client.hpp"

#include "transport/http_errors.hpp"

namespace leasehold {

namespace {

constexpr const char* lease_group_prefix = "/apis/coordination.k8s.io/v1/namespaces/";

} // namespace

std::string lease_path(const lease_key& k) {
  return leases_path(k.ns) + "/" + k.name;
}

std::string leases_path(const std::string& ns) {
  return lease_group_prefix + ns + "/leases";
}

std::string events_path(const std::string& ns) {
  return "/api/v1/namespaces/" + ns + "/events";
}

std::string kube_request_path(const std::string& verb, const lease_key& k) {
  return verb == "POST" ? leases_path(k.ns) : lease_path(k);
}

api_result<lease> kube_client::lease_call(const std::string& verb, const std::string& path,
                                          const std::string* body, bool echo) {
  auto reply = http_.send(verb, path, body);
  if (!reply.ok())
    return api_result<lease>::failure(reply.error);
  return never_throw<lease>(verb, path, [&] {
    auto out = lease_from_response(verb, path, reply.value->status, reply.value->body,
                                   reply.value->retry_after);
    if (echo && echoes_ && out.ok())
      echoes_->note(reply.value->body, out.value->name, out.value->resource_version);
    return out;
  });
}

api_result<lease> kube_client::get_lease(const lease_key& k) {
  return lease_call("GET", lease_path(k), nullptr);
}

api_result<lease> kube_client::create_lease(const lease& l) {
  return never_throw<lease>("POST", leases_path(l.ns), [&] {
    auto fresh = l;
    fresh.resource_version.clear(); // the API rejects a create that names a version
    auto body = to_json_value(fresh).dump();
    return lease_call("POST", leases_path(l.ns), &body);
  });
}

api_result<lease> kube_client::update_lease(const lease& l) {
  return never_throw<lease>("PUT", lease_path(l.key()), [&] {
    auto body = to_json_value(l).dump();
    return lease_call("PUT", lease_path(l.key()), &body, l.skip_watch_echo);
  });
}

api_result<bool> kube_client::create_event(const kube_event& e) {
  const auto path = events_path(e.involved.ns);
  return never_throw<bool>("POST", path, [&] {
    auto body = to_json_value(e).dump();
    auto reply = http_.send("POST", path, &body);
    if (!reply.ok())
      return api_result<bool>::failure(reply.error);
    if (!is_success(reply.value->status))
      return api_result<bool>::failure(classify_response(
        "POST", path, reply.value->status, reply.value->body, reply.value->retry_after));
    return api_result<bool>::success(true);
  });
}

} // namespace leasehold
