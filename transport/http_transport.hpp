// The lease transport backed by the Kubernetes API over HTTP(S).
#pragma once

#include <caf/all.hpp>

#include "transport/kube_client.hpp"
#include "transport/lease_transport.hpp"

namespace leasehold {

/// Spawns a detached actor (its own thread: kube_client blocks) that
/// implements lease_transport_actor with one kube_client. Requests are served
/// one at a time in arrival order; each takes at most
/// max_request_time(cfg), so requesters should use a larger timeout.
lease_transport_actor spawn_http_transport(caf::actor_system& sys, connection_config cfg);

} // namespace leasehold
