// The lease transport: the one interface electors talk to, by message.
//
// A backend (HTTP to a Kubernetes API server, a simulated store in scripted
// tests, etcd) is an actor with this typed interface.
// Electors `request(...)` it with a timeout; a reply is always an
// api_result (errors are values), a timeout arrives as sec::request_timeout.
#pragma once

#include <memory>
#include <string>

#include <caf/all.hpp>

#include "transport/api_result.hpp"
#include "transport/lease.hpp"

namespace leasehold {
using lease_reply = api_result<lease>;
using event_reply = api_result<bool>;
} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_key)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::event_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::kube_event)

namespace leasehold {

// Atom texts are at most 10 characters (CAF 0.17).
using get_lease_atom = caf::atom_constant<caf::atom("lh_get")>;
using create_lease_atom = caf::atom_constant<caf::atom("lh_create")>;
using update_lease_atom = caf::atom_constant<caf::atom("lh_update")>;
using post_event_atom = caf::atom_constant<caf::atom("lh_event")>;

/// GET returns the Lease or not_found; POST creates (already_exists when
/// taken); PUT replaces with optimistic concurrency on
/// lease.resource_version (conflict when stale).
using lease_transport_actor = caf::typed_actor<
  caf::replies_to<get_lease_atom, lease_key>::with<lease_reply>,
  caf::replies_to<create_lease_atom, lease>::with<lease_reply>,
  caf::replies_to<update_lease_atom, lease>::with<lease_reply>,
  caf::replies_to<post_event_atom, kube_event>::with<event_reply>>;

/// What an elector must know about the store behind a transport.
struct backend_traits {
  /// The store itself ends a term when its TTL runs out (etcd: the key dies
  /// with its lease). Followers then never judge expiry by their clock:
  /// only an absent record lets them acquire; a leader whose record is gone
  /// has lost its term; a created record starts its term at once.
  /// false (Kubernetes): expiry judged by each follower's own clock.
  bool server_expiry = false;
};

} // namespace leasehold
