// The fence keeper: a tiny process between the agent and a child it runs, so
// that the child cannot outlive the agent nor run past its fence.
//
//   agent --(socket, fd 3)--> keeper --(fork, exec)--> child (own process group)
//
// The keeper is not in the agent's process group (a stopped agent group does
// not stop it) and is single-threaded, with no heap use after its start and
// no CAF. It SIGKILLs the child's whole group at once when
//   - the deadline passes without an extension (a stuck, paused or slow agent:
//     a leader-only child never runs past its fence's valid_until),
//   - the control socket closes (the agent died, however it died),
//   - the keeper gets SIGTERM/SIGINT/SIGHUP,
// and when the child exits by itself (what it left in its group). It reaps
// the child, reports its wait status and exits. The control protocol, the
// fence file and the command line are described at run_fence_keeper below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace leasehold::modules {

/// argv[0] under which a program linking the exec module runs as the keeper.
constexpr const char* fence_keeper_argv0 = "leasehold-fence-keeper";

// The keeper forks the child into a new process group, with
// PR_SET_PDEATHSIG=SIGKILL (set in the child before exec; the race with the
// keeper's death is closed by checking getppid() after prctl; the keeper is
// single-threaded, so the "parent" PDEATHSIG watches is the whole keeper).
//
// Control protocol (text lines on the control socket):
//   agent -> keeper   "D <ns>"   extend the deadline to <ns> (CLOCK_MONOTONIC);
//                                 never moves it backwards
//                     "E"        the term ended: the fence file says not valid;
//                                 the kill deadline stays (a graceful stop may
//                                 use the time left, never more)
//                     "S <sig>"  send <sig> to the child's group
//   keeper -> agent   "P <pid>"  the child runs (its pid = its process group)
//                     "K <why> <now_ns> <deadline_ns>"  the keeper killed the group
//                                 (why: fence_expired, keeper_signal)
//                     "X <wait_status>"  the child is reaped; last line
//
// Fence file (--fence-file): rewritten atomically (tmp + rename) at start,
// on every extension and when the fence ends; one JSON line:
//   {"term":3,"valid_until_mono_ns":N,"valid_until_wall":"2024-05-01T10:00:00.123456Z"}
// valid_until_mono_ns is 0 once the fence ended or the keeper killed the
// group. `leasehold fence check` (fence_check below) reads it.
//
// Invocation: `leasehold fence-keeper ARGS`, or any program that links the
// exec module executed with argv[0] == "leasehold-fence-keeper" (the exec
// module re-executes /proc/self/exe that way, so an embedding program needs
// no extra binary):
//   [--control-fd N (default 3)] [--deadline-ns NS] [--term N]
//   [--fence-file PATH [--remove-fence-dir]] [--workdir DIR] -- COMMAND...
// Without --deadline-ns there is no deadline (every-replica children: they
// only die with the agent). The child gets the keeper's environment, stdin,
// stdout and stderr.

/// Runs the keeper; `argv[0]` is ignored, the rest as above. Returns the
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
