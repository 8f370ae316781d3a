// `leasehold yield [--lease NAME] [--to IDENTITY] [--health-addr HOST:PORT]
// [--timeout-ms N]`: asks a running agent, through POST /yield on its health
// port, to hand one of its leases (default its own) over (docs/operations.md, "Handing leadership over").
#pragma once

#include <ostream>
#include <string>

namespace leasehold::agent {

struct yield_options {
  std::string to;                              // "" : any replica
  std::string lease;                           // "" : the agent's own lease
  std::string health_addr = "127.0.0.1:8080";  // the agent's health_addr (0.0.0.0 means this host)
  long long timeout_ms = 60000;                // for the agent's answer
};

/// Exit code: 0 handed over (to the target, when one was named); 1 any
/// other outcome (not the leader, unknown target, nobody took it, the
/// agent unreachable or no answer in time), with the reason on `err`; 2 a
/// usage error (a bad --health-addr, a --lease the agent does not have).
int yield_command(const yield_options& o, std::ostream& out, std::ostream& err);

} // namespace leasehold::agent
