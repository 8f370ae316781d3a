// The membership actor of every backend: a detached actor (its client
// blocks) answering announce and withdraw with its client's.
#pragma once

#include <memory>

#include <caf/all.hpp>

#include "leasehold/membership.hpp"
#include "transport/thread_name.hpp"

namespace leasehold {

template <class Client>
membership_actor spawn_membership_actor(caf::actor_system& sys, std::shared_ptr<Client> client) {
  return sys.spawn<caf::detached>([client]() -> membership_actor::behavior_type {
    name_this_thread("lh.members");
    return {
      [client](announce_atom, const candidate& c) { return client->announce(c); },
      [client](withdraw_atom, const candidate& c) { return client->withdraw(c); },
    };
  });
}

} // namespace leasehold
