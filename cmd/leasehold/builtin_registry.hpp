// The module types the agent offers (modules/builtin.hpp) and the view the
// leader_endpoint module publishes into, served by the health server.
#pragma once

#include <memory>

#include "leasehold/modules.hpp"
#include "modules/leader_endpoint.hpp"

namespace leasehold::agent {

struct builtin_modules {
  std::shared_ptr<module_registry> registry;
  std::shared_ptr<modules::leader_view> leader;
};

builtin_modules make_builtin_modules();

} // namespace leasehold::agent
