// The messages an embedding program and its modules see: the fencing token
// a leader-only module gets, leadership changes, new module settings.
// All are local (never serialized): allowed as unsafe message types.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "leasehold/lease.hpp"
#include "leasehold/protocol.hpp"

namespace leasehold {

/// Fencing token handed to leader-only modules: the Lease's leaseTransitions
/// at acquisition (`term`) and the holder identity. A module that writes to a
/// shared system can reject writes carrying an older term.
struct fencing_token {
  lease_key lease;
  std::string identity;
  std::int64_t term = 0;
  /// Until when (actor clock ns) this replica may act as leader: the last
  /// renew's send + renew_deadline; 0 once the term ended. Check
  /// `valid(self->clock().now())` right before leader-only work.
  std::shared_ptr<std::atomic<std::int64_t>> valid_until =
    std::make_shared<std::atomic<std::int64_t>>(0);

  bool valid(caf::actor_clock::time_point now) const {
    return valid_until && now.time_since_epoch().count() < valid_until->load();
  }
};

/// runner -> subscribers (and modules that asked).
struct leadership_changed {
  bool leading = false;
  std::string holder;        // our identity when leading or in a creation hold, else last observed holder
  std::int64_t term = 0;
  /// Why leadership ended (empty on acquire); in a creation hold (leading
  /// false, holder our identity): "creation hold: term N starts in Mms".
  std::string reason;
  /// The lease was seen free with this preferredHolder (a yield's named
  /// successor; a yielding leader reports its target as it steps down);
  /// "" otherwise. Balance groups leave such a lease to it (docs/balance.md).
  std::string preferred;
};

/// runner -> module: new settings for a running module (same type).
struct module_settings {
  std::string name;
  nlohmann::json settings;
};


} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::fencing_token)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::module_settings)
