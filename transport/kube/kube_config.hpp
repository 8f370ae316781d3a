// Builds a connection_config from in-cluster service-account files, a
// kubeconfig file, or a plain --server URL. Errors are values naming the
// file and field; nothing throws.
#pragma once

#include <optional>
#include <string>

#include "leasehold/transports.hpp"
#include "transport/http/text_files.hpp"

namespace leasehold {

inline constexpr const char* default_service_account_dir =
  "/var/run/secrets/kubernetes.io/serviceaccount/";

struct kube_config_result {
  std::optional<connection_config> config;
  std::string ns;     // namespace of the service account or kubeconfig context; may be empty
  std::string error;  // e.g. "kubeconfig /x/config: users[0].user.client-key-data: invalid base64"
  bool ok() const { return config.has_value(); }
};

/// In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
/// `token` (re-read on rotation), `ca.crt` and `namespace` under `sa_dir`.
kube_config_result load_in_cluster_config(const std::string& sa_dir = default_service_account_dir);

/// A kubeconfig file; `context` empty means its current-context. Relative
/// file paths are resolved against the kubeconfig's directory.
kube_config_result load_kubeconfig(const std::string& path, const std::string& context = {});

/// A plain server URL without credentials (e.g. `kubectl proxy`).
kube_config_result server_config(const std::string& url);

/// $KUBECONFIG's first entry, else $HOME/.kube/config; empty when neither is set.
std::string default_kubeconfig_path();

/// Picks the source as client-go does: docs/tls.md, "Which setting wins".
kube_config_result load_connection_config(const std::string& server,
                                          const std::string& kubeconfig,
                                          const std::string& sa_dir = default_service_account_dir);

/// The trimmed `namespace` file under `sa_dir`; empty when absent.
std::string service_account_namespace(const std::string& sa_dir = default_service_account_dir);

} // namespace leasehold
