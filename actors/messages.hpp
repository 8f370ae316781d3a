// Typed messages between elector, runner, modules and embedders.
// All are local (never serialized): allowed as unsafe message types.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "transport/lease.hpp"

namespace leasehold {

/// Fencing token handed to leader-only modules: the Lease's leaseTransitions
/// at acquisition (`term`) and the holder identity. A module that writes to a
/// shared system can reject writes carrying an older term.
struct fencing_token {
  lease_key lease;
  std::string identity;
  std::int64_t term = 0;
  /// Until when (actor clock, ns since its epoch) this replica may still act
  /// as leader: the last successful renew's send time + renew_deadline. The
  /// elector moves it forward on every renew and zeroes it when the term
  /// ends. A module checks `valid(self->clock().now())` right before
  /// leader-only work, so a process resumed after a long pause (SIGSTOP,
  /// VM freeze) does no work on a lease it no longer holds.
  std::shared_ptr<std::atomic<std::int64_t>> valid_until =
    std::make_shared<std::atomic<std::int64_t>>(0);

  bool valid(caf::actor_clock::time_point now) const {
    return valid_until && now.time_since_epoch().count() < valid_until->load();
  }
};

/// What a replica knows about its Lease, kept by the runner across electors
/// so that a respawned elector judges expiry exactly as the dead one would
/// have (by the local clock since the record was last seen to change) and
/// never hands out a term number it has already seen.
struct lease_memory {
  std::optional<lease> record;                          // the last record seen
  caf::actor_clock::time_point observed_at{};           // when it was seen to change (local clock)
  /// This replica created the lease (POST) at this local time (the send
  /// time). An API that lost its storage may have lost another replica's
  /// live term with it, so a term on a created lease starts only a whole
  /// lease duration later: by then that replica has stopped its work.
  std::optional<caf::actor_clock::time_point> created_at;
  std::int64_t max_term = -1;                           // highest leaseTransitions seen
  /// The last term this replica itself wrote (acquired or renewed): a record
  /// still naming us in exactly that term may be taken again at once; any
  /// other record naming us (a former process, a copied identity) is waited
  /// out like anyone else's.
  std::optional<lease_spec> own_term;
  /// An API error was reported and no answer came since: the next elector's
  /// first answer reports the recovery (readiness waits for it).
  bool api_error_outstanding = false;
};

// elector -> runner
struct leadership_acquired { fencing_token fence; };
struct leadership_lost { std::string reason; };
/// A successful renew: the term goes on; the fence is valid until `valid_until`.
struct lease_renewed { std::int64_t term = 0; std::int64_t valid_until = 0; };
/// The elector saw the lease change (or vanish): the runner keeps it for the next elector.
struct lease_observed { lease_memory memory; };
struct leader_observed { std::string holder; std::int64_t term = 0; };

// runner -> subscribers (and modules that asked)
struct leadership_changed {
  bool leading = false;
  std::string holder;        // our identity when leading, else last observed holder
  std::int64_t term = 0;
  std::string reason;        // why leadership ended (empty on acquire)
};

// runner -> module: new settings for a running module (same type).
struct module_settings {
  std::string name;
  nlohmann::json settings;
};

// Atoms (text at most 10 characters in CAF 0.17).
using release_atom = caf::atom_constant<caf::atom("lh_release")>;
using get_status_atom = caf::atom_constant<caf::atom("lh_status")>;
using subscribe_atom = caf::atom_constant<caf::atom("lh_sub")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("lh_unsub")>;
using shutdown_atom = caf::atom_constant<caf::atom("lh_shutdn")>;
using tick_atom = caf::atom_constant<caf::atom("lh_tick")>;
using deadline_atom = caf::atom_constant<caf::atom("lh_dline")>;
using stop_timeout_atom = caf::atom_constant<caf::atom("lh_stopto")>;
using respawn_atom = caf::atom_constant<caf::atom("lh_respawn")>;
using restart_atom = caf::atom_constant<caf::atom("lh_restart")>;
using fatal_atom = caf::atom_constant<caf::atom("lh_fatal")>;

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::fencing_token)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_acquired)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_lost)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_renewed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_observed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leader_observed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::module_settings)
