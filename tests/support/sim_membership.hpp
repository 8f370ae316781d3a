// A simulated membership backend for balance groups (include/leasehold/
// membership.hpp) on CAF's test coordinator: members announce and are
// listed at once; each announcement changes its `renewed` marker, and the
// readers expire a member that stops announcing, as with Kubernetes
// LeaseCandidates (set `store_expires` for etcd's way: the store forgets a
// member after its ttl and lists no marker). A partitioned client's
// requests fail with connection_refused; so do everyone's while the store
// is down (`partition("", true)`).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <caf/all.hpp>

#include "leasehold/membership.hpp"

namespace leasehold {

class sim_members {
public:
  explicit sim_members(std::function<caf::actor_clock::time_point()> now, bool store_expires = false)
    : now_(std::move(now)), store_expires_(store_expires) {}
  members_reply announce(const std::string& client, const candidate& c);
  withdraw_reply withdraw(const std::string& client, const candidate& c);
  /// Requests of `client` ("": every client, the store is down) fail
  /// (true) or work again (false).
  void partition(const std::string& client, bool cut);
  /// Every partition ends.
  void heal() { cut_.clear(); }
  /// Announcements so far (all clients).
  std::size_t announcements() const { return announcements_; }

private:
  struct entry {
    std::int64_t joined = 0;
    std::int64_t renewals = 0;
    caf::actor_clock::time_point last{};
    caf::timespan ttl{};
    std::string leases;
  };
  std::function<caf::actor_clock::time_point()> now_;
  bool store_expires_;
  std::map<std::string, std::map<std::string, entry>> groups_;   // "ns/group" -> identity -> entry
  std::set<std::string> cut_;
  std::int64_t next_joined_ = 1;
  std::size_t announcements_ = 0;
};

membership_actor spawn_sim_membership(caf::actor_system& sys, std::shared_ptr<sim_members> store,
                                      std::string client);

} // namespace leasehold
