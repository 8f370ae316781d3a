// Kubernetes: leases bound to one session Lease per process and namespace,
// so one write per retry_period renews every lease a process holds there.
// The rule and its proof: docs/safety.md, "Kubernetes leases bound to a session".
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "leasehold/lease_transport.hpp"
#include "leasehold/timings.hpp"
#include "transport/kube/kube_binding.hpp"

namespace leasehold {

struct session_options {
  std::string identity;
  election_timings timings;
  /// true: the leases this replica takes are bound to its session; false:
  /// it takes plain leases (it still judges bound records of others).
  bool bind = false;
  /// The least leaseDurationSeconds a bound Lease carries: what a reader that
  /// is not leasehold waits (docs/safety.md). At least 4 lease durations.
  std::chrono::seconds min_bound_duration{600};
  /// Bound Leases are rewritten at most this often in all (per second).
  double refresh_per_second = 1.0;
};

/// `inner` (a Kubernetes lease transport: the HTTP pool or a simulated one)
/// behind the session actor: bound renews ride on the session, takes of a
/// bound lease end a dead session first, and the evidence judges bound
/// records by their session.
lease_backend bind_to_session(caf::actor_system& sys, lease_backend inner, session_options opts);

} // namespace leasehold
