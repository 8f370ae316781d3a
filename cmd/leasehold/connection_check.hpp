// Start-up checks of the credentials a connection_config names: a bad CA file
// is a clear error, not an endless series of TLS or 401 failures.
#pragma once

#include <string>
#include <vector>

#include "leasehold/transports.hpp"

namespace leasehold::agent {

/// The settings that name each file, for the messages (defaults: the
/// kubeconfig's fields; the etcd config's are etcd_file_names()).
struct connection_file_names {
  std::string ca_file = "certificate-authority";
  std::string token_file = "tokenFile";
  std::string client_cert_file = "client-certificate";
  std::string client_key_file = "client-key";
};

inline connection_file_names etcd_file_names() {
  return {"etcd.ca_file", "token_file", "etcd.cert_file", "etcd.key_file"};
}

/// One message per problem, naming the setting, the file and the OS's reason.
std::vector<std::string> check_connection_files(const connection_config& cfg,
                                                const connection_file_names& names = {});

} // namespace leasehold::agent
