// exec: runs a command while the module is active.
//
// settings: {"command": [argv...] (required, non-empty array of strings),
//            "env": {K: V} (optional), "grace_ms": int >= 0 (default 2000),
//            "workdir": string (optional)}
// Validation (not parsing) rejects a command not found on $PATH, and the
// agent rejects grace_ms >= timings.module_stop_timeout (the supervisor
// kills the module then): no setting is ever cut short silently.
//
// The command runs in its own process group under a fence keeper; how it
// is fenced, stopped and restarted is said at exec_settings below.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

// The command runs in its own process group under a fence keeper
// (fence_keeper.hpp, child_process.hpp) with stdin from /dev/null; each
// stdout/stderr line is reported as a module_output event (detail: the line,
// reason: "stdout" / "stderr"). Its environment is ours plus `env`; a
// leader-only instance also gets the fencing token: LEASEHOLD_TERM,
// LEASEHOLD_IDENTITY, LEASEHOLD_LEASE (ns/name), LEASEHOLD_FENCE_FILE, which
// override `env`.
//
// Every exec child dies with this process, however it dies (the keeper
// SIGKILLs its group when its socket to us closes). A leader-only child also
// never runs past its fence: it starts only while the fence is valid, every
// 25 ms the actor forwards the fence's valid_until to the keeper (so each
// renew extends the deadline; 0, the term's end, makes the fence file say
// "not valid"), and the keeper SIGKILLs the group when the deadline passes
// without extension -- a stuck or paused agent included. Such a kill is
// reported at once as a module_output line with reason "fence_kill" (counted
// as leasehold_fence_kills_total, logged as a warning); the actor then waits,
// without a child, for the stop that follows the lost term (or a valid fence).
//
// Stop (exit message): SIGTERM to the group, SIGKILL after grace_ms, reap,
// then quit with the exit message's reason. If the command ends by itself the
// actor quits: normally on status 0, else with a sec::runtime_error, so the
// supervisor restarts it by policy. New settings (module_settings) restart
// the command the same way (TERM, grace, KILL, start). The actor is detached
// (its own thread), and on every exit path -- kill included -- its state
// SIGKILLs the group and joins the reader: no zombie, orphan or thread remains.
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
