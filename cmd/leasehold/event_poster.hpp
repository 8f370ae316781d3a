// Kubernetes Events about leadership, best-effort (cmd/leasehold/README.md,
// 'Logs, journal, Kubernetes Events'); its own transport, so event POSTs
// never queue in front of lease requests.
#pragma once

#include <cstddef>

#include <caf/all.hpp>

#include "leasehold/events.hpp"
#include "leasehold/lease.hpp"
#include "transport/kube/kube_events.hpp"

namespace leasehold::agent {

struct event_poster_options {
  size_t capacity = 32;
  int max_attempts = 3;
  caf::timespan request_timeout = std::chrono::seconds(4);
  caf::timespan retry_delay = std::chrono::seconds(1);
};

/// Spawns the poster actor in front of `transport` (which it owns: the
/// transport is stopped with it). Kubernetes only: etcd keeps no Events.
caf::actor spawn_event_poster(caf::actor_system& sys, event_transport_actor transport,
                              event_poster_options opts);

/// The sink that turns leadership events into Kubernetes Events for `poster`.
event_sink event_poster_sink(caf::actor poster, lease_key lease);

/// Waits (at most `bound`) until the poster has nothing queued or in flight; false on timeout.
bool flush_events(caf::actor_system& sys, const caf::actor& poster, caf::timespan bound);

} // namespace leasehold::agent
