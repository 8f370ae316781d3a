// One watch stream's subscribers by lease name, shared by a transport's
// subscribers in one scope. The stream's thread delivers and the transport
// actor adds and removes: the table is locked.
#pragma once

#include <cstddef>
#include <functional>
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
  /// Drops every subscription of `who`; the number left. By an index by
  /// subscriber: a SIGTERM's 10,000 table scans delayed the releases.
  std::size_t remove(const caf::actor_addr& who);
  /// Subscriptions looked at by remove() since construction (what the
  /// index saves is checked by counting, not by timing: unit-lease-watch).
  std::size_t examined() const;
  std::size_t size() const;
  /// The lease names somebody follows.
  std::vector<std::string> names() const;
  bool follows(const std::string& name) const;
  /// Exactly one subscriber follows `name` (once or more).
  bool followed_by_one(const std::string& name) const;

  /// up / down: to every subscriber (and kept for later ones).
  void to_all(const lease_watch_event& ev);
  /// A record or a delete of lease `name`: to its subscribers only.
  void to(const std::string& name, const lease_watch_event& ev);

private:
  mutable std::mutex mx_;
  using by_name_map = std::map<std::string, std::vector<lease_watch_subscriber>>;
  by_name_map by_name_;
  /// Each subscription's entry in by_name_, by subscriber (map iterators
  /// stay valid until their entry is erased, which needs it empty).
  std::multimap<caf::actor_addr, by_name_map::iterator> by_subscriber_;
  std::size_t examined_ = 0;
  std::size_t count_ = 0;
  lease_watch_event health_{lease_watch_event::kind::down, std::nullopt, "the stream is opening"};
  bool health_known_ = false;
};

/// A transport actor's shared watches (watch_per_namespace, lease_watch.hpp):
/// `join` a subscriber; `leave`: a subscriber needs its streams no more.
struct shared_watches {
  std::function<void(lease_watch_request&)> join;
  std::function<void(const caf::actor_addr&)> leave;
};

} // namespace leasehold
