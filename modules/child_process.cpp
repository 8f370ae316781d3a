#include "modules/child_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace leasehold::modules {

namespace {

constexpr int poll_interval_ms = 20;
constexpr int max_chunks_per_poll = 16;
constexpr int max_drain_chunks = 64; // after exit: what is left in the pipes

std::vector<char*> c_strings(const std::vector<std::string>& xs) {
  std::vector<char*> out;
  for (auto& x : xs)
    out.push_back(const_cast<char*>(x.c_str()));
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

/// Splits a byte stream into lines; flush() hands out a final partial line.
class line_splitter {
public:
  template <class F>
  void feed(const char* data, std::size_t n, F&& emit) {
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        flush(emit);
        continue;
      }
      buf_.push_back(data[i]);
      if (buf_.size() >= child_process::max_line)
        flush(emit);
    }
  }
  template <class F>
  void flush(F&& emit) {
    if (!buf_.empty() && buf_.back() == '\r')
      buf_.pop_back();
    if (!buf_.empty())
      emit(std::move(buf_));
    buf_.clear();
  }

private:
  std::string buf_;
};

// RAII for the posix_spawn attribute objects.
struct spawn_setup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  spawn_setup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~spawn_setup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

} // namespace

child_process::start_result child_process::start(const command& cmd, line_handler on_line,
                                                 exit_handler on_exit) {
  if (cmd.argv.empty())
    return {nullptr, "empty command"};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    auto e = std::string{"pipe: "} + std::strerror(errno);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]})
      close_fd(*fd);
    return {nullptr, e};
  }
  spawn_setup s;
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&s.actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&s.actions, err[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);
  if (cmd.workdir)
    posix_spawn_file_actions_addchdir_np(&s.actions, cmd.workdir->c_str());
  // Own process group (pgid = pid), default signal dispositions, empty mask:
  // the command must not inherit our ignored SIGPIPE or blocked signals.
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setpgroup(&s.attr, 0);
  posix_spawnattr_setsigdefault(&s.attr, &all);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF
                                        | POSIX_SPAWN_SETSIGMASK);
  auto argv = c_strings(cmd.argv);
  auto envp = c_strings(cmd.env);
  pid_t pid = -1;
  auto rc = ::posix_spawnp(&pid, argv[0], &s.actions, &s.attr, argv.data(), envp.data());
  close_fd(out[1]);
  close_fd(err[1]);
  if (rc != 0) {
    close_fd(out[0]);
    close_fd(err[0]);
    return {nullptr, "cannot run " + cmd.argv[0] + ": " + std::strerror(rc)};
  }
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);
  std::unique_ptr<child_process> child{
    new child_process(pid, out[0], err[0], std::move(on_line), std::move(on_exit))};
  child->watcher_ = std::thread{[c = child.get()] { c->watch(); }};
  return {std::move(child), {}};
}

child_process::child_process(pid_t pid, int out_fd, int err_fd, line_handler on_line,
                             exit_handler on_exit)
  : pid_(pid), fds_{out_fd, err_fd}, on_line_(std::move(on_line)), on_exit_(std::move(on_exit)) {
}

child_process::~child_process() {
  signal_group(SIGKILL);
  if (watcher_.joinable())
    watcher_.join();
}

void child_process::signal_group(int sig) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!reaped_)
    ::kill(-pid_, sig);
}

bool child_process::reap_if_exited() {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  // WNOWAIT: look without reaping, so the pid stays ours until we hold mtx_.
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0
      || info.si_pid != pid_)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  ::kill(-pid_, SIGKILL); // whatever the command left behind in its group
  while (::waitpid(pid_, &wait_status_, 0) < 0 && errno == EINTR)
    ;
  reaped_ = true;
  return true;
}

void child_process::watch() {
  line_splitter splitters[2];
  auto emit_to = [this](int i) {
    return [this, i](std::string line) {
      on_line_(i == 0 ? stream::out : stream::err, std::move(line));
    };
  };
  // Reads at most max_chunks, so a flood of output cannot starve the exit check.
  auto read_available = [&](int i, int max_chunks) {
    char buf[4096];
    for (int chunk = 0; chunk < max_chunks && fds_[i] >= 0;) {
      auto n = ::read(fds_[i], buf, sizeof(buf));
      if (n > 0) {
        splitters[i].feed(buf, static_cast<std::size_t>(n), emit_to(i));
        ++chunk;
      } else if (n == 0 || errno != EINTR) {
        if (n == 0 || errno != EAGAIN)
          close_fd(fds_[i]);
        return;
      }
    }
  };
  for (auto exited = false; !exited;) {
    pollfd pfds[2];
    nfds_t count = 0;
    for (int i = 0; i < 2; ++i)
      if (fds_[i] >= 0)
        pfds[count++] = pollfd{fds_[i], POLLIN, 0};
    ::poll(pfds, count, poll_interval_ms);
    exited = reap_if_exited();
    for (int i = 0; i < 2; ++i)
      read_available(i, exited ? max_drain_chunks : max_chunks_per_poll);
  }
  for (int i = 0; i < 2; ++i) {
    splitters[i].flush(emit_to(i));
    close_fd(fds_[i]);
  }
  on_exit_(wait_status_);
}

std::string child_process::describe(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return "killed by signal " + std::to_string(WTERMSIG(wait_status));
  return "ended with wait status " + std::to_string(wait_status);
}

} // namespace leasehold::modules
