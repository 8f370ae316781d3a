// The lease transport backed by etcd v3 (its JSON gateway, etcd 3.4 API), the
// same typed interface as the Kubernetes backend. Keys, terms, requests and
// batches: docs/design.md, "etcd". etcd ends a term itself, so
// spawn_etcd_backend returns the transport with etcd's evidence.
#pragma once

#include "leasehold/lease_transport.hpp"
#include "leasehold/transports.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/etcd/etcd_watch.hpp"
#include "transport/etcd/etcd_wire.hpp"
