#include "cmd/leasehold/builtin_registry.hpp"

#include "modules/builtin.hpp"

namespace leasehold::agent {

builtin_modules make_builtin_modules() {
  builtin_modules out;
  out.registry = std::make_shared<module_registry>();
  out.leader = std::make_shared<modules::leader_view>();
  modules::builtin_options opts;
  opts.leader = out.leader;
  modules::register_builtin_modules(*out.registry, opts);
  return out;
}

} // namespace leasehold::agent
