#include "cmd/leasehold-apiserver/kube_routes.hpp"

#include <cstddef>
#include <vector>

namespace leasehold::apiserver {

std::optional<kube_route> parse_route(const std::string& method, const std::string& path) {
  std::vector<std::string> parts;   // the non-empty segments between slashes
  for (std::size_t start = 0; start < path.size();) {
    auto end = path.find('/', start);
    if (end == std::string::npos)
      end = path.size();
    if (end > start)
      parts.emplace_back(path, start, end - start);
    start = end + 1;
  }
  std::size_t prefix = 0;
  std::string group, version;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    prefix = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    prefix = 3;
  }
  kube_route route;
  if (prefix == 0 || parts.size() == prefix) {
    route.verb = method == "GET" ? "discovery" : "";
    return route;
  }
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(prefix), parts.end());
  std::string plural;
  if (rest.size() == 1) {
    plural = rest[0];
  } else if ((rest.size() == 3 || rest.size() == 4) && rest[0] == "namespaces") {
    route.ns = rest[1];
    plural = rest[2];
    route.name = rest.size() == 4 ? rest[3] : "";
  } else {
    return std::nullopt;
  }
  route.resource = find_resource(group, version, plural);
  if (route.resource == nullptr)
    return std::nullopt;
  bool collection = route.name.empty();
  if (method == "GET")
    route.verb = collection ? "list" : "get";
  else if (method == "POST" && collection && !route.ns.empty())
    route.verb = "create";
  else if (method == "PUT" && !collection)
    route.verb = "update";
  else if (method == "PATCH" && !collection)
    route.verb = "patch";
  else if (method == "DELETE" && !collection)
    route.verb = "delete";
  return route;
}

std::optional<bool> parse_bool(const std::string& text) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (text == t)
      return true;
  for (const char* f : {"", "0", "f", "F", "FALSE", "false", "False"})
    if (text == f)
      return false;
  return std::nullopt;
}

bool wants_table(const httplib::Request& req) {
  return req.get_header_value("Accept").find("as=Table") != std::string::npos;
}

} // namespace leasehold::apiserver
