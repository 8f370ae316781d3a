// The lease transport backed by etcd v3 (its JSON gateway, etcd 3.4 API):
// the same typed interface as the Kubernetes backend. A lease is the key
// <prefix>/<namespace>/<name>, bound to the transport's session lease
// (etcd_session.hpp); its term is the key's create_revision. How each
// request maps onto ranges, txns and keepalives, how requests batch, and the
// namespace's one watch stream: docs/design.md ("etcd"). The pieces:
// etcd_wire.hpp (the gateway's answers parsed), etcd_client.hpp (endpoints,
// failover, auth, the mapping), etcd_watch.hpp (the watch),
// etcd_transport.cpp (the actor). etcd ends a term itself (the key dies
// with its lease), so spawn_etcd_backend returns the transport with etcd's
// evidence (etcd_evidence.hpp) and names requests by their keys.
#pragma once

#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/etcd/etcd_watch.hpp"
#include "transport/etcd/etcd_wire.hpp"
