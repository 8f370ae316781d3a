// A balance group: this replica's share of M leases, spread over the
// replicas that run the same group (docs/balance.md).
//
// The group actor announces this replica through a membership backend,
// learns the members, follows the holder of each lease through its runner
// (leadership_changed), computes the assignment (actors/balance.hpp: every
// member leads floor or ceil of M/N; a join moves at most ceil(M/(N+1)); a
// leave moves only the leaver's) and tells each runner to compete or to
// stand by (compete_atom). A runner told to stand by while it leads hands
// over through its step-down path: modules down, then release; the assignee
// takes the lease through its watch. Safety is each lease's own: the
// group only decides who competes.
// How a program uses it is shown at balance_group_options below.
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

// Use:
//   leasehold::balance_group_options g;
//   g.identity = "agent-1"; g.ns = "default"; g.group = "workers";
//   g.leases = {{"workers-0", runner0}, ...};   // runners spawned with compete = false
//   g.membership = membership; g.timings = timings;
//   auto group = leasehold::spawn_balance_group(sys, std::move(g));
//   ...
//   leasehold::leave_group(sys, group);   // withdraw, then shut the runners down
struct balance_group_options {
  std::string identity;
  std::string ns;
  std::string group;
  /// The group's leases (the same names on every member) and this
  /// replica's runner of each, spawned with runner_options::compete = false
  /// (the group decides).
  std::vector<std::pair<std::string, runner_actor>> leases;
  membership_actor membership;
  /// retry_period: how often this replica announces itself and recomputes;
  /// lease_duration: the announcement's ttl, and how long a free lease may
  /// stay free before every member competes for it (members whose views of
  /// the group differ must not leave it unowned).
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

/// Spawns the group actor; it ends after leave_group or when killed.
caf::actor spawn_balance_group(caf::actor_system& sys, balance_group_options opts);

/// A clean leave: withdraws this replica's announcement (so the others take
/// its leases at once), then shuts every runner of the group down (each
/// stops its modules and releases its lease). True when all of that
/// answered within `timeout`.
bool leave_group(caf::actor_system& sys, const caf::actor& group,
                 caf::timespan timeout = std::chrono::seconds(30));

/// Hands one lease of the group over (yield_atom, lease, to -> yield_result):
/// to `to`, or with "" to the settled member other than this replica that
/// ranks the lease highest (rendezvous runner-up). The lease's runner
/// yields naming it as preferredHolder; every member that sees that pins
/// the lease to it for a lease duration (the yield hold), so it does not
/// come straight back: the group rebalances around it (docs/balance.md).
/// A yield sent to a grouped lease's runner instead names no successor, and
/// the assignment gives the lease back. nullopt when no answer came within
/// `timeout`. Blocking: never call it from an actor's handler.
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
