// The lease transport: the one interface electors talk to, by message. A
// reply is always an api_result: errors are values.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/lease_evidence.hpp"
#include "leasehold/protocol.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

/// Whether a shared write sent at `sent` (an etcd keepalive, a Kubernetes
/// session renew) serves a renew begun at `began` (lease::renew_max_age);
/// one rule for the transports and the simulated stores, whatever their clocks.
template <class TimePoint, class Duration>
constexpr bool keepalive_serves_renew(TimePoint sent, Duration max_age, TimePoint began) {
  return max_age > Duration{0} && sent + max_age >= began;
}

/// One change seen by a watch, or a change of the watch's own health.
/// `up`: a stream is open and events flow; `down`: there is none (reason
/// says why) and the subscriber must poll until the next `up`.
struct lease_watch_event {
  enum class kind { record, deleted, up, down };
  kind what = kind::down;
  std::optional<lease> record;    // kind::record: the Lease as written (ADDED/MODIFIED)
  std::string reason;             // kind::down: why (names the request)
};


/// Streams one Lease's changes to `subscriber` until it terminates
/// (docs/design.md, 'Watch streams per backend'). A transport without watch
/// support sends one `down` event and nothing else.
struct lease_watch_request {
  lease_key lease;
  std::string resource_version;   // deliver changes after this version ("" = current state first)
  caf::timespan idle_timeout{0};  // a stream silent this long is restarted (0: never)
  lease_watch_subscriber subscriber;
};
} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_key)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::leases_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::event_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_watch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::lease_watch_event)

namespace leasehold {


/// A lease transport and its store's evidence, made together by one factory
/// so that no elector runs a store with another store's evidence.
struct lease_backend {
  lease_transport_actor transport;
  /// One lease's evidence (lease_evidence.hpp), made once per runner and
  /// kept across its electors. Unset: the base, which judges by the clock.
  std::function<std::shared_ptr<lease_evidence>(const election_timings&, std::uint64_t seed)>
    evidence;
  /// How the store names a request `verb` ("GET", "POST", "PUT") on a
  /// lease, in the errors an elector makes itself (a request that timed
  /// out): Kubernetes its REST path, etcd its key. Unset: "namespace/name".
  std::function<std::string(const std::string& verb, const lease_key&)> request_path;

  std::string path_of(const std::string& verb, const lease_key& k) const {
    return request_path ? request_path(verb, k) : k.to_string();
  }
};

} // namespace leasehold
