#include "cmd/leasehold/yield_command.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace leasehold::agent {

int yield_command(const yield_options& o, std::ostream& out, std::ostream& err) {
  auto colon = o.health_addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == o.health_addr.size()) {
    err << "leasehold yield: --health-addr: expected host:port (is \"" << o.health_addr << "\")\n";
    return 2;
  }
  auto host = o.health_addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "0.0.0.0")
    host = "127.0.0.1";
  else if (host == "::")
    host = "::1";
  int port = 0;
  try {
    port = std::stoi(o.health_addr.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port <= 0 || port > 65535) {
    err << "leasehold yield: --health-addr: bad port in \"" << o.health_addr << "\"\n";
    return 2;
  }
  httplib::Client cli(host, port);
  cli.set_connection_timeout(std::chrono::seconds(2));
  cli.set_read_timeout(std::chrono::milliseconds(o.timeout_ms));
  nlohmann::json body = nlohmann::json::object();
  if (!o.to.empty())
    body["to"] = o.to;
  if (!o.lease.empty())
    body["lease"] = o.lease;
  auto res = cli.Post("/yield", body.dump(), "application/json");
  if (!res) {
    err << "leasehold yield: no answer from the agent at " << host << ":" << port << " ("
        << (res.error() == httplib::Error::Connection
              ? std::string("cannot connect: is the agent running with this health_addr?")
              : httplib::to_string(res.error()))
        << ")\n";
    return 1;
  }
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    err << "leasehold yield: the agent answered " << res->status << " with a body that is not JSON\n";
    return 1;
  }
  if (res->status == 404 && j.contains("error")) {   // no such lease: a usage error
    err << "leasehold yield: --lease: " << j.value("error", "") << "\n";
    return 2;
  }
  if (res->status == 200) {
    out << (o.lease.empty() ? "" : "lease " + o.lease + ": ") << "handed over to "
        << j.value("successor", "") << ": " << j.value("reason", "") << "\n";
    return 0;
  }
  if (j.contains("status"))
    err << "leasehold yield: " << j.value("status", "") << ": " << j.value("reason", "") << "\n";
  else
    err << "leasehold yield: " << j.value("error", "the agent answered " + std::to_string(res->status))
        << "\n";
  return 1;
}

} // namespace leasehold::agent
