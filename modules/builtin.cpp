#include "modules/builtin.hpp"

#include "modules/exec.hpp"
#include "modules/ticker.hpp"
#include "modules/webhook.hpp"

namespace leasehold::modules {

void register_builtin_modules(module_registry& reg, const builtin_options& opts) {
  reg.add(ticker_module());
  reg.add(exec_module());
  reg.add(webhook_module());
  if (opts.leader)
    reg.add(leader_endpoint_module(opts.leader));
}

} // namespace leasehold::modules
