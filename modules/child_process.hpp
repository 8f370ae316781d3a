// A command running in its own process group, watched by one thread.
//
// The watcher thread reads stdout and stderr line by line and is the only
// code that reaps the child: when the group leader exits it SIGKILLs what is
// left of the group (no orphans), reaps the leader (no zombie), delivers the
// remaining output, then calls on_exit once with the wait status.
// Destroying a child_process SIGKILLs the group if it still runs and joins
// the watcher, so no process or thread outlives the object.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace leasehold::modules {

class child_process {
public:
  struct command {
    std::vector<std::string> argv;          // argv[0] is looked up in PATH
    std::vector<std::string> env;           // the complete environment, "K=V"
    std::optional<std::string> workdir;
  };
  enum class stream { out, err };
  /// Called on the watcher thread for each line (without the newline;
  /// lines longer than max_line are split).
  using line_handler = std::function<void(stream, std::string line)>;
  /// Called on the watcher thread once, after the child is reaped.
  using exit_handler = std::function<void(int wait_status)>;

  static constexpr std::size_t max_line = 4096;

  struct start_result {
    std::unique_ptr<child_process> child;
    std::string error;                      // set when child is null
  };
  static start_result start(const command& cmd, line_handler on_line, exit_handler on_exit);

  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  /// Sends `sig` to the whole process group; does nothing once reaped.
  void signal_group(int sig);

  /// "exited with status 1", "killed by signal 9".
  static std::string describe(int wait_status);

private:
  child_process(pid_t pid, int out_fd, int err_fd, line_handler on_line, exit_handler on_exit);
  void watch();
  bool reap_if_exited();

  pid_t pid_;
  int fds_[2];
  line_handler on_line_;
  exit_handler on_exit_;
  std::mutex mtx_;       // guards reaped_ against signal_group: no signal to a reused pid
  bool reaped_ = false;
  int wait_status_ = 0;
  std::thread watcher_;
};

} // namespace leasehold::modules
