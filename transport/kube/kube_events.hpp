// Kubernetes Events (core/v1), apart from the lease transport: etcd has
// nothing to answer them with. The agent spawns it, with its event poster
// (cmd/leasehold/event_poster.hpp), only on Kubernetes.
#pragma once

#include <caf/all.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"

namespace leasehold {


/// A detached actor (its client blocks) with one keep-alive connection of
/// its own, one request at a time: requesters bound their requests by
/// max_request_time(cfg) plus a margin.
event_transport_actor spawn_kube_event_transport(caf::actor_system& sys, connection_config cfg);

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::kube_event)
