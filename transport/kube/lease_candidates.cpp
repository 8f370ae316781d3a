#include "transport/kube/lease_candidates.hpp"

#include <cctype>

#include "transport/http/http_errors.hpp"
#include "transport/membership_actor.hpp"

#ifndef LEASEHOLD_VERSION
#define LEASEHOLD_VERSION "dev"
#endif

namespace leasehold {

using nlohmann::json;

namespace {

constexpr const char* group_label = "leasehold.io/group";
constexpr const char* identity_annotation = "leasehold.io/identity";
constexpr const char* leases_annotation = "leasehold.io/group-leases";

members_reply failed(api_error e) {
  return members_reply::failure(std::move(e));
}

} // namespace

std::string lease_candidates_path(const std::string& ns) {
  return "/apis/coordination.k8s.io/v1beta1/namespaces/" + ns + "/leasecandidates";
}

std::string lease_candidate_name(const candidate& c) {
  std::string out;
  for (char ch : c.group + "-" + c.identity) {
    auto u = static_cast<unsigned char>(ch);
    char l = static_cast<char>(std::tolower(u));
    out += (std::isalnum(static_cast<unsigned char>(l)) || l == '.' || l == '-') ? l : '-';
  }
  return out.substr(0, 253);
}

json lease_candidate_object(const candidate& c, wall_time now) {
  return {{"apiVersion", "coordination.k8s.io/v1beta1"},
          {"kind", "LeaseCandidate"},
          {"metadata",
           {{"name", lease_candidate_name(c)},
            {"namespace", c.ns},
            {"labels", {{group_label, c.group}}},
            {"annotations", {{identity_annotation, c.identity}, {leases_annotation, c.leases}}}}},
          {"spec",
           {{"leaseName", c.group},
            {"renewTime", format_micro_time(now)},
            {"binaryVersion", LEASEHOLD_VERSION},
            {"strategy", "OldestEmulationVersion"}}}};
}

parse_result<std::vector<member_record>> parse_lease_candidates(const std::string& body,
                                                                const std::string& group) {
  parse_result<std::vector<member_record>> out;
  auto fail = [&out](std::string why) {
    out.error = std::move(why);
    return out;
  };
  auto doc = json::parse(body, nullptr, false);
  if (!doc.is_object())
    return fail("body: not a JSON object");
  auto items = doc.find("items");
  if (items == doc.end() || !items->is_array())
    return fail("items: expected an array");
  std::vector<member_record> members;
  for (std::size_t i = 0; i < items->size(); ++i) {
    auto& item = (*items)[i];
    auto where = "items[" + std::to_string(i) + "].";
    auto md = item.find("metadata");
    if (!item.is_object() || md == item.end() || !md->is_object())
      return fail(where + "metadata: expected an object");
    auto labels = md->value("labels", json::object());
    if (!labels.is_object() || labels.value(group_label, json()) != group)
      continue;   // another group's (a selector the server ignored)
    auto annotations = md->value("annotations", json::object());
    auto id = annotations.is_object() ? annotations.find(identity_annotation) : annotations.end();
    if (!annotations.is_object() || id == annotations.end() || !id->is_string() || id->get<std::string>().empty())
      return fail(where + "metadata.annotations." + identity_annotation + ": expected a string");
    auto created = md->find("creationTimestamp");
    auto joined = created != md->end() && created->is_string()
                    ? parse_micro_time(created->get<std::string>())   // the API's Time: whole seconds
                    : std::nullopt;
    if (!joined)
      return fail(where + "metadata.creationTimestamp: expected an RFC 3339 time");
    auto spec = item.value("spec", json::object());
    auto renew = spec.is_object() ? spec.value("renewTime", json()) : json();
    if (!renew.is_string())
      return fail(where + "spec.renewTime: expected a MicroTime string");
    auto since_epoch = std::chrono::duration_cast<std::chrono::seconds>(joined->time_since_epoch());
    auto leases = annotations.value(leases_annotation, json());
    members.push_back({id->get<std::string>(), since_epoch.count(), renew.get<std::string>(),
                       leases.is_string() ? leases.get<std::string>() : std::string()});
  }
  out.value = std::move(members);
  return out;
}

members_reply lease_candidates::announce(const candidate& c) {
  auto base = lease_candidates_path(c.ns);
  auto path = base + "/" + lease_candidate_name(c);
  auto now = wall_now();
  auto object = lease_candidate_object(c, now);
  // PUT on the version read (the API wants one), else POST; a lost race
  // (409) is harmless: the next round renews.
  auto got = client_.send("GET", path, nullptr);
  if (auto e = reply_error("GET", path, got, 404); e.kind != error_kind::none)
    return failed(e);
  const char* verb = "POST";
  auto target = base;
  if (is_success(got.value->status)) {
    auto current = json::parse(got.value->body, nullptr, false);
    auto rv = current.is_object() ? current.value("metadata", json::object()).value("resourceVersion", json())
                                  : json();
    if (!rv.is_string())
      return failed(api_error{error_kind::malformed_body, got.value->status, "GET", path,
                              "metadata.resourceVersion: expected a string", 0});
    object["metadata"]["resourceVersion"] = rv;
    verb = "PUT";
    target = path;
  }
  auto body = object.dump();
  auto wrote = client_.send(verb, target, &body);
  if (auto e = reply_error(verb, target, wrote, 409); e.kind != error_kind::none)
    return failed(e);
  auto list_path = base + "?labelSelector=" + std::string(group_label) + "%3D" + c.group;
  auto list = client_.send("GET", list_path, nullptr);
  if (auto e = reply_error("GET", list_path, list); e.kind != error_kind::none)
    return failed(e);
  auto parsed = parse_lease_candidates(list.value->body, c.group);
  if (!parsed.ok())
    return failed(api_error{error_kind::malformed_body, list.value->status, "GET", list_path,
                            parsed.error, 0});
  return members_reply::success(std::move(*parsed.value));
}

withdraw_reply lease_candidates::withdraw(const candidate& c) {
  auto path = lease_candidates_path(c.ns) + "/" + lease_candidate_name(c);
  auto del = client_.send("DELETE", path, nullptr);
  if (auto e = reply_error("DELETE", path, del, 404); e.kind != error_kind::none)
    return withdraw_reply::failure(e);
  return withdraw_reply::success(del.value->status != 404);
}

membership_actor spawn_http_membership(caf::actor_system& sys, connection_config cfg) {
  return spawn_membership_actor(sys, std::make_shared<lease_candidates>(std::move(cfg)));
}

} // namespace leasehold
