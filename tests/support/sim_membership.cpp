#include "tests/support/sim_membership.hpp"

namespace leasehold {

namespace {

api_error refused(const std::string& verb, const candidate& c) {
  return api_error{error_kind::connection_refused, 0, verb, c.ns + "/" + c.group, "partitioned", 0};
}

} // namespace

members_reply sim_members::announce(const std::string& client, const candidate& c) {
  if (cut_.count(client) || cut_.count(""))
    return members_reply::failure(refused("ANNOUNCE", c));
  ++announcements_;
  auto& group = groups_[c.ns + "/" + c.group];
  auto now = now_();
  if (store_expires_)   // etcd: a key whose ttl ran out is gone
    for (auto it = group.begin(); it != group.end();)
      it = now - it->second.last >= it->second.ttl ? group.erase(it) : std::next(it);
  auto& e = group[c.identity];
  if (e.joined == 0)
    e.joined = next_joined_++;
  ++e.renewals;
  e.last = now;
  e.ttl = c.ttl;
  e.leases = c.leases;
  std::vector<member_record> out;
  for (auto& [id, m] : group)
    out.push_back({id, m.joined, store_expires_ ? std::string{} : std::to_string(m.renewals), m.leases});
  return members_reply::success(std::move(out));
}

withdraw_reply sim_members::withdraw(const std::string& client, const candidate& c) {
  if (cut_.count(client) || cut_.count(""))
    return withdraw_reply::failure(refused("WITHDRAW", c));
  return withdraw_reply::success(groups_[c.ns + "/" + c.group].erase(c.identity) > 0);
}

void sim_members::partition(const std::string& client, bool cut) {
  if (cut)
    cut_.insert(client);
  else
    cut_.erase(client);
}

membership_actor spawn_sim_membership(caf::actor_system& sys, std::shared_ptr<sim_members> store,
                                      std::string client) {
  return sys.spawn([store, client]() -> membership_actor::behavior_type {
    return {
      [=](announce_atom, const candidate& c) { return store->announce(client, c); },
      [=](withdraw_atom, const candidate& c) { return store->withdraw(client, c); },
    };
  });
}

} // namespace leasehold
