// Group membership for balance groups (docs/balance.md): each replica of a
// group announces itself and learns who else is there. A backend is an actor
// with this typed interface, requested with timeouts like a lease transport;
// the simulated one (tests/support/sim_membership.hpp) serves the scripted
// tests.
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"

namespace leasehold {

/// One replica's announcement in a group.
struct candidate {
  std::string ns;          // namespace of the group's objects
  std::string group;       // the balance group's name
  std::string identity;    // the replica
  /// How long an announcement lasts unless renewed: the store forgets (etcd
  /// TTL) or readers stop counting (a Kubernetes LeaseCandidate's renewTime)
  /// a member that has not announced itself for this long.
  caf::timespan ttl{std::chrono::seconds(15)};
  /// The group's leases as this replica's config lists them (a count and a
  /// hash): members whose lists differ do not count each other.
  std::string leases;
};

/// A member as the store lists it.
struct member_record {
  std::string identity;
  /// The order of joining, the same for every reader (etcd create_revision,
  /// a LeaseCandidate's creation order); smaller joined first.
  std::int64_t joined = 0;
  /// Changes with each announcement ("" where the store expires members
  /// itself): a reader counts a member live while it sees this change
  /// within the member's ttl by its own clock.
  std::string renewed;
  /// Its candidate's `leases` ("" from a store or version that has none:
  /// counted as equal).
  std::string leases;
};


} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::candidate)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::members_reply)

namespace leasehold {


/// Kubernetes: one LeaseCandidate (coordination.k8s.io/v1beta1) per replica
/// and group (transport/kube/lease_candidates.hpp). A detached actor: its client
/// blocks.
membership_actor spawn_http_membership(caf::actor_system& sys, connection_config cfg);

/// etcd: one key per replica and group under <prefix>/_members/, bound to an
/// etcd lease of the announcement's ttl (transport/etcd/etcd_members.hpp).
membership_actor spawn_etcd_membership(caf::actor_system& sys, etcd_config cfg);

} // namespace leasehold
