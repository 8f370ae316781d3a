#include "transport/http/server_url.hpp"

#include <algorithm>
#include <cstdlib>

namespace leasehold {

std::optional<endpoint> parse_server_url(const std::string& url, std::string& err) {
  auto bad = [&](const std::string& what) -> std::optional<endpoint> {
    err = "server \"" + url + "\": " + what;
    return std::nullopt;
  };
  endpoint ep;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    ep.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return bad("expected http:// or https:// URL");
  }
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (authority.find('@') != std::string::npos) {   // the URL itself is not echoed: a password
    err = "server URL: user information (\"user:password@\") is not supported; put credentials "
          "in a kubeconfig";
    return std::nullopt;
  }
  if (slash != std::string::npos) {
    ep.prefix = rest.substr(slash);
    while (!ep.prefix.empty() && ep.prefix.back() == '/')
      ep.prefix.pop_back();
  }
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') { // [ipv6]:port
    auto close = authority.find(']');
    if (close == std::string::npos)
      return bad("unterminated IPv6 address");
    ep.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':')
        return bad("invalid authority");
      port_text = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    ep.host = authority.substr(0, colon);
    if (colon != std::string::npos)
      port_text = authority.substr(colon + 1);
  }
  if (ep.host.empty())
    return bad("missing host");
  ep.port = ep.tls ? 443 : 80;
  if (!port_text.empty()) {
    bool digits = port_text.size() <= 5 &&
                  std::all_of(port_text.begin(), port_text.end(),
                              [](char c) { return c >= '0' && c <= '9'; });
    int port = digits ? std::atoi(port_text.c_str()) : 0;
    if (port < 1 || port > 65535)
      return bad("invalid port \"" + port_text + "\"");
    ep.port = port;
  }
  return ep;
}

std::string server_url_error(const std::string& url) {
  std::string err;
  parse_server_url(url, err);
  return err;
}

} // namespace leasehold
