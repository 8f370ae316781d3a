// spawn_runner: the options checked (each error names its field), then the
// runner spawned (actors/runner.cpp); and the default fatal handler.
#include <cstdio>
#include <cstdlib>

#include "actors/runner.hpp"

namespace leasehold {

void default_fatal_handler(const std::string& reason) {
  std::fprintf(stderr, "leasehold: fatal: %s\n", reason.c_str());
  std::fflush(stderr);
  std::_Exit(70);
}

spawn_result spawn_runner(caf::actor_system& sys, runner_options opts) {
  spawn_result r;
  r.errors = validate(opts.timings);
  if (opts.identity.empty())
    r.errors.push_back("identity: must not be empty");
  // The names `leasehold run` accepts (lease_name, namespace): a name the
  // API rejects would fail every write of the runner's life.
  if (auto e = lease_name_error(opts.lease.name); !e.empty())
    r.errors.push_back("lease.name: " + e);
  if (auto e = namespace_error(opts.lease.ns); !e.empty())
    r.errors.push_back("lease.namespace: " + e);
  if (!opts.backend.transport)
    r.errors.push_back("backend.transport: no lease transport actor");
  if (!opts.registry)
    r.errors.push_back("registry: no module registry");
  else
    for (auto& e : validate(opts.modules, *opts.registry))
      r.errors.push_back(e);
  for (auto& e : check_leases(opts.modules, opts.lease.name))
    r.errors.push_back(e);
  if (!opts.events)
    opts.events = default_event_sink();
  if (r.errors.empty())
    r.runner = spawn_runner_actor(sys, std::move(opts));
  return r;
}

} // namespace leasehold
