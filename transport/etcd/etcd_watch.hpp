// The etcd watch of one namespace's keys, shared by a transport's subscribers
// in it, on the loop every lease watch shares (transport/lease_watch.hpp).
#pragma once

#include <memory>
#include <string>

#include "leasehold/transports.hpp"
#include "transport/lease_watch.hpp"

namespace leasehold {

/// The stream of namespace `ns`, with a client of its own; it runs until
/// destroyed.
std::unique_ptr<lease_watch_loop> make_etcd_watch(etcd_config cfg, const std::string& ns,
                                                  caf::timespan idle_timeout,
                                                  std::shared_ptr<watch_fanout> fanout);

} // namespace leasehold
