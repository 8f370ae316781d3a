#include "transport/etcd/etcd_members.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/membership_actor.hpp"

namespace leasehold {

using nlohmann::json;

etcd_scope etcd_members::group_scope(const candidate& c) const {
  return {client_.config().prefix + "/_members/" + c.ns, c.group};
}

api_error etcd_members::put_key(const candidate& c) {
  auto key = group_scope(c).key(c.identity);
  auto ttl = std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(c.ttl).count());
  auto g = etcd_grant(ttl, post_);
  if (!g.ok())
    return g.error;
  auto& id = *g.value;
  // A plain put: a key left by this replica's previous process keeps its
  // create_revision (its place in the join order) and takes the new lease.
  const std::string put = "/v3/kv/put";
  auto p = client_.post(put, {{"key", encode_base64(key)}, {"value", encode_base64(json{{"leases", c.leases}}.dump())}, {"lease", id}});
  if (!p.ok()) {
    client_.post("/v3/lease/revoke", {{"ID", id}});
    return p.error;
  }
  lease_of_[key] = id;
  return {};
}

members_reply etcd_members::announce(const candidate& c) {
  auto key = group_scope(c).key(c.identity);
  auto held = lease_of_.find(key);
  bool alive = false;
  if (held != lease_of_.end()) {
    auto k = etcd_keepalive(held->second, post_);
    if (!k.ok())
      return members_reply::failure(k.error);
    alive = *k.value > 0;   // 0: the lease ran out (a pause): the key is gone with it
  }
  if (!alive) {
    lease_of_.erase(key);
    if (auto err = put_key(c); err.kind != error_kind::none)
      return members_reply::failure(err);
  }
  const std::string range = "/v3/kv/range";
  auto scope = group_scope(c);
  auto r = client_.post(range, {{"key", encode_base64(scope.dir())},
                                {"range_end", encode_base64(scope.range_end())}});
  if (!r.ok())
    return members_reply::failure(r.error);
  std::vector<member_record> out;
  auto kvs = r.value->find("kvs");
  if (kvs != r.value->end() && !kvs->is_array())
    return members_reply::failure(
      api_error{error_kind::malformed_body, 200, "POST", range, "kvs: expected an array", 0});
  for (std::size_t i = 0; kvs != r.value->end() && i < kvs->size(); ++i) {
    auto kv = parse_kv((*kvs)[i], "kvs[" + std::to_string(i) + "]");
    if (!kv.ok())
      return members_reply::failure(
        api_error{error_kind::malformed_body, 200, "POST", range, kv.error, 0});
    if (auto identity = scope.name_of(kv.value->key)) {
      // The value names the member's lease list ("{}" from older versions).
      auto v = json::parse(kv.value->value, nullptr, false);
      auto leases = v.is_object() ? v.value("leases", json()) : json();
      out.push_back({*identity, kv.value->create_revision, "",
                     leases.is_string() ? leases.get<std::string>() : std::string()});
    }
  }
  return members_reply::success(std::move(out));
}

withdraw_reply etcd_members::withdraw(const candidate& c) {
  auto key = group_scope(c).key(c.identity);
  const std::string path = "/v3/kv/deleterange";
  auto d = client_.post(path, {{"key", encode_base64(key)}});
  if (!d.ok())
    return withdraw_reply::failure(d.error);
  std::int64_t deleted = 0;
  int64_field(*d.value, "deleted", deleted);
  if (auto held = lease_of_.find(key); held != lease_of_.end()) {
    client_.post("/v3/lease/revoke", {{"ID", held->second}});
    lease_of_.erase(held);
  }
  return withdraw_reply::success(deleted > 0);
}

membership_actor spawn_etcd_membership(caf::actor_system& sys, etcd_config cfg) {
  return spawn_membership_actor(sys, std::make_shared<etcd_members>(std::move(cfg)));
}

} // namespace leasehold
