// exec: runs a command while the module is active. Its settings, and how a
// leader-only child is fenced: cmd/leasehold/README.md, 'Fenced exec children'.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

// Every 25 ms the actor forwards the fence's valid_until to the keeper. It is
// detached, and on every exit path, kill included, SIGKILLs the child's group
// and joins the reader: no zombie, orphan or thread remains.
struct exec_settings {
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::int64_t grace_ms = 2000;
  std::optional<std::string> workdir;

  bool operator==(const exec_settings& o) const {
    return command == o.command && env == o.env && grace_ms == o.grace_ms && workdir == o.workdir;
  }
};

parsed<exec_settings> parse_exec_settings(const nlohmann::json& settings);

/// Why the command cannot be started ("" when it can): a name without "/"
/// not found on $PATH, or a path (relative to workdir) that is not an
/// executable file. Part of the type's validation, not of parsing.
std::string command_error(const exec_settings& s);

/// The "exec" module type (leader-only by default; may run on every replica).
module_type exec_module();

} // namespace leasehold::modules
