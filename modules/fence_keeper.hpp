// The fence keeper: a tiny single-threaded process between the agent and a
// child, so that the child can outlive neither the agent nor its fence. It
// SIGKILLs the child's group when the deadline passes unextended, the control
// socket closes, or on SIGTERM/SIGINT/SIGHUP (docs/design.md, 'The fence
// keeper').
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace leasehold::modules {

/// argv[0] under which a program linking the exec module runs as the keeper.
constexpr const char* fence_keeper_argv0 = "leasehold-fence-keeper";

// Its control protocol, fence file and command line: docs/design.md,
// 'The fence keeper'.

/// Runs the keeper; `argv[0]` is ignored. Returns the
/// process exit status: 0 after the child was reaped, 2 on bad arguments.
int run_fence_keeper(int argc, char** argv);

/// CLOCK_MONOTONIC in ns (the clock of the fence, the journal, the keeper).
std::int64_t monotonic_ns();

/// A fence file as read back.
struct fence_state {
  std::int64_t term = 0;
  std::int64_t valid_until_mono_ns = 0;
  std::string valid_until_wall;
};

/// Reads a fence file; nullopt (and `error` set) when absent or malformed.
std::optional<fence_state> read_fence_file(const std::string& path, std::string& error);

/// `leasehold fence check`: 0 when the fence in `path` is valid for at least
/// `margin_ns` more (now + margin < valid_until), else 1. Writes one line
/// saying why to `out` unless quiet.
int fence_check(const std::string& path, std::int64_t margin_ns, bool quiet);

} // namespace leasehold::modules
