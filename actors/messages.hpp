// The runtime's internal messages: elector <-> runner, and the timer atoms.
// What embedders and modules see is in include/leasehold/messages.hpp.
// All are local (never serialized): allowed as unsafe message types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "leasehold/lease_transport.hpp"
#include "leasehold/messages.hpp"

namespace leasehold {

/// What a replica knows about its Lease, kept across electors (docs/safety.md,
/// "What a replica knows survives its electors").
struct lease_memory {
  std::optional<lease> record;                          // the last record seen
  caf::actor_clock::time_point observed_at{};           // when it was seen to change (local clock)
  /// This replica created the lease (POST) at this local send time: the
  /// creation hold counts from here.
  std::optional<caf::actor_clock::time_point> created_at;
  std::int64_t max_term = -1;                           // highest leaseTransitions seen
  /// The last term this replica itself wrote: a record naming us in another
  /// term (a former process, a copied identity) is waited out like anyone else's.
  std::optional<lease_spec> own_term;
  /// An API error was reported and no answer came since: the next elector's
  /// first answer reports the recovery. `api_error_words`: that error.
  bool api_error_outstanding = false;
  std::string api_error_words;
  /// The API has answered at least once (a record, "no such lease", a write,
  /// a lost race, the watch).
  bool api_answered = false;
  /// When a read last found the record as in `record` (on etcd a renew
  /// changes nothing, so this, not observed_at, says the holder is current).
  caf::actor_clock::time_point confirmed_at{};
};

// elector -> runner
struct leadership_acquired { fencing_token fence; };
struct leadership_lost { std::string reason; };
/// The elector saw the lease change (or vanish): the runner keeps it for the next elector.
struct lease_observed { lease_memory memory; };
struct leader_observed {
  std::string holder;
  std::int64_t term = 0;
  std::string preferred;   // the record's preferredHolder
};

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_acquired)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leadership_lost)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_observed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leader_observed)
