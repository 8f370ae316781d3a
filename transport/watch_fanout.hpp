// One watch stream shared by every subscriber of a transport in one scope
// (Kubernetes: a namespace's Lease collection; etcd: the keys under
// <prefix>/<namespace>/), its events demultiplexed to
// the subscribers by lease name. The stream's thread delivers; the
// transport actor adds and removes subscribers: the table is locked.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"

namespace leasehold {

class watch_fanout {
public:
  /// `who` follows lease `name`; it gets the stream's current health (up
  /// or down) at once, then every event of that lease.
  void add(const std::string& name, lease_watch_subscriber who);
  /// Drops every subscription of `who`; the number of subscriptions left.
  std::size_t remove(const caf::actor_addr& who);
  std::size_t size() const;
  /// The lease names somebody follows.
  std::vector<std::string> names() const;
  bool follows(const std::string& name) const;

  /// up / down: to every subscriber (and kept for later ones).
  void to_all(const lease_watch_event& ev);
  /// A record or a delete of lease `name`: to its subscribers only.
  void to(const std::string& name, const lease_watch_event& ev);

private:
  mutable std::mutex mx_;
  std::map<std::string, std::vector<lease_watch_subscriber>> by_name_;
  std::size_t count_ = 0;
  lease_watch_event health_{lease_watch_event::kind::down, std::nullopt, "the stream is opening"};
  bool health_known_ = false;
};

} // namespace leasehold
