// The Kubernetes Lease and Event REST calls over one http_client: the
// request paths of the coordination.k8s.io/v1 Lease API and of core/v1
// Events, and the Lease JSON each way. Blocking, as http_client is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/transports.hpp"
#include "transport/http/http_client.hpp"
#include "transport/watch_echoes.hpp"

namespace leasehold {

std::string lease_path(const lease_key& k);             // .../namespaces/{ns}/leases/{name}
std::string leases_path(const std::string& ns);         // .../namespaces/{ns}/leases
std::string events_path(const std::string& ns);         // /api/v1/namespaces/{ns}/events

/// What a request of `verb` on lease `k` is named in errors: a POST its
/// Lease collection, the others the Lease's own path.
std::string kube_request_path(const std::string& verb, const lease_key& k);

/// One Lease request as kube_client sends it: `error` set (kind not
/// none) when it cannot be sent (its JSON could not be written).
struct kube_lease_request {
  std::string verb;
  std::string path;
  std::optional<std::string> body;
  /// The Lease whose successful answer is noted in the watch echoes (a
  /// renew that asked; its flight is registered before it is sent); "" none.
  std::string echo_of;
  api_error error;
};

class kube_client {
public:
  /// `echoes`: where a renew that asks (lease::skip_watch_echo) notes its
  /// answer for the transport's watch stream.
  explicit kube_client(connection_config cfg, std::shared_ptr<watch_echoes> echoes = {})
    : http_(std::move(cfg)), echoes_(std::move(echoes)) {}

  api_result<lease> get_lease(const lease_key& k);
  api_result<lease> create_lease(const lease& l);
  api_result<lease> update_lease(const lease& l);   // PUT with l.resource_version
  api_result<bool> create_event(const kube_event& e);
  /// GET of the Leases of `ns` labelled `selector` ("k=v"): no
  /// resourceVersion, so the API reads its store at one point after the send.
  api_result<std::vector<lease>> list_leases(const std::string& ns, const std::string& selector);

  /// Batches: one result per lease, in order, each judged as alone; two or
  /// more go pipelined (http_client::send_all).
  std::vector<api_result<lease>> get_leases(const std::vector<lease_key>& ks);
  std::vector<api_result<lease>> create_leases(const std::vector<lease>& ls);
  std::vector<api_result<lease>> renew_leases(const std::vector<lease>& ls);
  /// Releases and new terms: PUTs, as update_lease sends them.
  std::vector<api_result<lease>> write_leases(const std::vector<lease>& ls);

  const connection_config& config() const { return http_.config(); }

private:
  /// `reqs` sent (one alone, more pipelined) and their answers judged:
  /// status, Lease body, echo noted.
  std::vector<api_result<lease>> lease_calls(const std::vector<kube_lease_request>& reqs);
  api_result<lease> lease_answer(const kube_lease_request& r,
                                 const api_result<http_response>& reply);

  http_client http_;
  std::shared_ptr<watch_echoes> echoes_;
};

} // namespace leasehold
