// The replies of lease requests sent at once from a scoped actor, by name.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"

namespace leasehold::test {

/// Receives the reply of each of `pending` (a lease name and its request's
/// handle, all sent before): the replies by name; an actor error (a lost
/// request, the request's timeout) is an error of kind other.
template <class Handle>
std::map<std::string, lease_reply> receive_replies(std::vector<std::pair<std::string, Handle>>& pending) {
  std::map<std::string, lease_reply> out;
  for (auto& [n, h] : pending)
    h.receive([&out, n = n](lease_reply& r) { out[n] = std::move(r); },
              [&out, n = n](caf::error&) {
                out[n] = lease_reply::failure({error_kind::other, 0, "", "", "actor error", 0});
              });
  return out;
}

} // namespace leasehold::test
