// A balance group: this replica's share of M leases, spread over the
// replicas that run the same group. Safety is each lease's own: the group
// only decides who competes (docs/balance.md, 'The group actor').
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/events.hpp"
#include "leasehold/membership.hpp"
#include "leasehold/runner.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

struct balance_group_options {
  std::string identity;
  std::string ns;
  std::string group;
  /// The group's leases (the same names on every member) and this
  /// replica's runner of each, spawned with runner_options::compete = false
  /// (the group decides).
  std::vector<std::pair<std::string, runner_actor>> leases;
  membership_actor membership;
  /// retry_period: how often it announces itself and recomputes;
  /// lease_duration: the announcement's ttl, and how long a free lease may
  /// stay free before every member competes for it.
  election_timings timings;
  /// A member counts once it has been present this long (hysteresis: a
  /// flapping replica never gets work).
  caf::timespan settle{std::chrono::seconds(1)};
  event_sink events;
  /// false: a lease outside any group, whose runner competes by itself. The
  /// actor only announces this replica and tells the runner who a yield or
  /// a preferredHolder may name; it announces every lease duration, and a
  /// member counts for three.
  bool assign = true;
};

/// The membership group of the candidate set of `lease` (assign = false):
/// "lease.<lease>", which no balance group's name (a DNS label, no dot) can
/// be; "" when too long for a label value (no set: anyone may be named).
std::string candidate_set_group(const std::string& lease);
/// Whether membership group `group` is a candidate set.
bool is_candidate_set(const std::string& group);
/// A candidate set announces every lease duration and counts for this many.
constexpr int candidate_set_lease_durations = 3;

/// Spawns the group actor; it ends after leave_group or when killed.
caf::actor spawn_balance_group(caf::actor_system& sys, balance_group_options opts);

/// A clean leave: withdraws this replica's announcement, then shuts every
/// runner of the group down. True when all of that answered within `timeout`.
bool leave_group(caf::actor_system& sys, const caf::actor& group,
                 caf::timespan timeout = std::chrono::seconds(30));

/// yield_atom, lease, to -> yield_result ("": the rendezvous runner-up;
/// docs/balance.md, 'Yield of one lease: the yield hold'). nullopt when no
/// answer came within `timeout`. Blocking: never call it from an actor's handler.
std::optional<yield_result> yield_lease(caf::actor_system& sys, const caf::actor& group,
                                        const std::string& lease, std::string to = {},
                                        caf::timespan timeout = std::chrono::seconds(30));

struct balance_status;

/// The group's status (get_status_atom); nullopt when it did not answer
/// within `timeout`. Blocking: never call it from an actor's handler.
std::optional<balance_status> group_status(caf::actor_system& sys, const caf::actor& group,
                                           caf::timespan timeout = std::chrono::seconds(5));

/// What the group actor answers to get_status_atom.
struct balance_status {
  std::vector<std::string> members;            // settled members, in join order
  std::vector<std::string> differing;          // members listing other leases (not counted)
  std::vector<std::string> assigned;           // the leases assigned to this replica
  std::vector<std::string> competing;          // the leases this replica competes for
  std::int64_t moves = 0;                      // leases this replica was told to hand over
  std::int64_t settle_ms = 0;                  // the group's settle time (options::settle)
};

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::balance_status)
