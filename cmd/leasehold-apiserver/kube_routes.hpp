// Reading a Kubernetes API request: which verb on which resource, and the
// query parameters and headers that change how it is answered.
#pragma once

#include <optional>
#include <string>

#include <httplib.h>

#include "cmd/leasehold-apiserver/resources.hpp"

namespace leasehold::apiserver {

struct kube_route {
  std::string verb;                         // get, list, create, update, patch, delete, discovery
  const resource_type* resource = nullptr;  // null for discovery
  std::string ns;                           // empty: every namespace (list only)
  std::string name;                         // empty: the collection
};

/// Maps method and path to a route; nullopt for paths that do not exist.
/// An unsupported method on an existing path gets verb "" (405).
std::optional<kube_route> parse_route(const std::string& method, const std::string& path);

/// Go's strconv.ParseBool, as the API server reads ?watch= and friends.
std::optional<bool> parse_bool(const std::string& text);

/// Accept: application/json;as=Table;g=meta.k8s.io;v=v1 (kubectl get).
bool wants_table(const httplib::Request& req);

} // namespace leasehold::apiserver
