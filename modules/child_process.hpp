// A command running in its own process group under a fence keeper
// (modules/fence_keeper.hpp), watched by one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace leasehold::modules {

// The watcher thread alone reaps the keeper and calls on_exit once.
// Destroying a child_process SIGKILLs the group if it still runs and joins
// the watcher, so no process or thread outlives the object.
class child_process {
public:
  struct command {
    std::vector<std::string> argv;          // argv[0] is looked up in PATH
    std::vector<std::string> env;           // the complete environment, "K=V"
    std::optional<std::string> workdir;
  };
  enum class stream { out, err };

  /// A leader-only child: killed at valid_until_ns (CLOCK_MONOTONIC) unless
  /// extended. `file`: the fence file the keeper maintains (empty: none).
  struct fence {
    std::int64_t term = 0;
    std::int64_t valid_until_ns = 0;
    std::string file;
  };

  static constexpr std::size_t max_line = 4096;

  struct start_result {
    std::unique_ptr<child_process> child;
    std::string error;                      // set when child is null
  };
  /// Called on the watcher thread.
  struct handlers {
    /// Each line (without the newline; lines longer than max_line are split).
    std::function<void(stream, std::string line)> on_line;
    /// Once, after the child is reaped. `fence_kill` is empty unless the
    /// keeper killed the group because the fence deadline passed; then it
    /// says so ("fence expired 0.4 ms ago ...").
    std::function<void(int wait_status, const std::string& fence_kill)> on_exit;
    /// When the keeper started the command.
    std::function<void(pid_t command_pid)> on_started;
    /// When the keeper kills the group at the fence deadline (before the
    /// exit), with the same text; optional.
    std::function<void(const std::string& fence_kill)> on_fence_kill;
  };

  /// Without a fence the command only dies with this process (or its exit).
  static start_result start(const command& cmd, const std::optional<fence>& f, handlers h);

  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// The keeper's pid.
  pid_t pid() const { return pid_; }
  /// Sends `sig` to the command's whole process group (through the keeper);
  /// does nothing once reaped.
  void signal_group(int sig);
  /// Moves the fence deadline to `valid_until_ns` (never backwards).
  void extend(std::int64_t valid_until_ns);
  /// The term ended: the fence file says not valid at once; the kill
  /// deadline stays where it was.
  void end_fence();

  /// "exited with status 1", "killed by signal 9".
  static std::string describe(int wait_status);

private:
  child_process(pid_t pid, int out_fd, int err_fd, int control_fd, handlers h);
  void watch();
  bool reap_if_exited();
  void on_report(const std::string& line);
  void send_control(const std::string& line);

  pid_t pid_;
  int fds_[3];           // stdout, stderr, control socket (keeper reports)
  int control_;          // our end of the control socket (written by any thread under mtx_)
  handlers h_;
  std::atomic<pid_t> child_pid_{0};
  std::mutex mtx_;       // guards reaped_ and control_ writes
  bool reaped_ = false;
  int wait_status_ = 0;
  std::optional<int> reported_status_;   // the keeper's "X": the command's wait status
  std::string fence_kill_;
  std::int64_t kill_requested_ns_ = 0;   // under mtx_: SIGKILL asked; the keeper must be gone soon
  std::thread watcher_;
};

} // namespace leasehold::modules
