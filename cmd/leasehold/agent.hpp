// The agent process: `leasehold run` and `leasehold validate`.
#pragma once

#include <iosfwd>
#include <string>

#include "leasehold/modules.hpp"
#include "cmd/leasehold/agent_config.hpp"

namespace leasehold::agent {

struct run_options {
  std::string config_path;
  config_overrides overrides;
};

/// Runs until SIGTERM/SIGINT (the caller has called block_shutdown_signals()
/// before starting any thread). Returns the process exit code.
int run(const run_options& opts);

/// Checks a config file; prints every error (with its JSON path) to `err`,
/// or a short summary to `out`. Returns the exit code (1 if any error).
int validate_file(const run_options& opts, std::ostream& out, std::ostream& err);

} // namespace leasehold::agent
