// The etcd watch of one lease key (POST /v3/watch on the gateway), on the
// loop every lease watch shares (transport/lease_watch.hpp).
#pragma once

#include <memory>

#include "leasehold/transports.hpp"
#include "transport/lease_watch.hpp"

namespace leasehold {

/// The watch of req.lease's key, with a client of its own (own connections,
/// own endpoint failover); it runs until destroyed.
std::unique_ptr<lease_watch_loop> make_etcd_lease_watch(etcd_config cfg, lease_watch_request req);

} // namespace leasehold
