#include "modules/child_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modules/fence_keeper.hpp"

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

/// Moves `fd` to a number >= 10 (close-on-exec): the spawn's dup2 onto 1, 2
/// and 3 then never meets an fd that already has that number.
bool raise_fd(int& fd) {
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (high < 0)
    return false;
  ::close(fd);
  fd = high;
  return true;
}

constexpr std::int64_t keeper_kill_bound_ns = 2000000000;   // then the keeper itself is SIGKILLed

} // namespace

child_process::start_result child_process::start(const command& cmd, const std::optional<fence>& f,
                                                 handlers h) {
  if (cmd.argv.empty())
    return {nullptr, "empty command"};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int ctl[2] = {-1, -1};
  auto fail = [&](const std::string& what) -> start_result {
    auto e = what + ": " + std::strerror(errno);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &ctl[0], &ctl[1]})
      close_fd(*fd);
    return {nullptr, e};
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    return fail("pipe");
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0)
    return fail("socketpair");
  if (!raise_fd(out[1]) || !raise_fd(err[1]) || !raise_fd(ctl[1]))
    return fail("fcntl");
  // The keeper: this program again, recognised by argv[0] before main().
  std::vector<std::string> args{fence_keeper_argv0, "--control-fd", "3"};
  if (f) {
    args.insert(args.end(), {"--deadline-ns", std::to_string(f->valid_until_ns), "--term",
                             std::to_string(f->term)});
    if (!f->file.empty())
      args.insert(args.end(), {"--fence-file", f->file, "--remove-fence-dir"});
  }
  if (cmd.workdir)
    args.insert(args.end(), {"--workdir", *cmd.workdir});
  args.emplace_back("--");
  args.insert(args.end(), cmd.argv.begin(), cmd.argv.end());
  spawn_setup s;
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&s.actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&s.actions, err[1], 2);
  posix_spawn_file_actions_adddup2(&s.actions, ctl[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 4);
  // The keeper: its own process group, default signals, empty mask. No
  // parent-death signal: it would follow the spawning *thread*.
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setpgroup(&s.attr, 0);
  posix_spawnattr_setsigdefault(&s.attr, &all);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF
                                        | POSIX_SPAWN_SETSIGMASK);
  auto argv = c_strings(args);
  auto envp = c_strings(cmd.env);
  pid_t pid = -1;
  auto rc = ::posix_spawn(&pid, "/proc/self/exe", &s.actions, &s.attr, argv.data(), envp.data());
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(ctl[1]);
  int watch_ctl = rc == 0 ? ::fcntl(ctl[0], F_DUPFD_CLOEXEC, 0) : -1;
  if (rc != 0 || watch_ctl < 0) {
    if (rc == 0) {   // cannot watch it: do not leave it running
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR)
        ;
    } else {
      errno = rc;
    }
    return fail("cannot start the fence keeper for " + cmd.argv[0]);
  }
  for (int fd : {out[0], err[0], watch_ctl})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::unique_ptr<child_process> child{
    new child_process(pid, out[0], err[0], ctl[0], std::move(h))};
  child->fds_[2] = watch_ctl;
  child->watcher_ = std::thread{[c = child.get()] { c->watch(); }};
  return {std::move(child), {}};
}

child_process::child_process(pid_t pid, int out_fd, int err_fd, int control_fd, handlers h)
  : pid_(pid), fds_{out_fd, err_fd, -1}, control_(control_fd), h_(std::move(h)) {
}

child_process::~child_process() {
  signal_group(SIGKILL);
  if (watcher_.joinable())
    watcher_.join();
  close_fd(control_);
}

void child_process::send_control(const std::string& line) {
  // Never blocks: a keeper that does not read (stopped) loses the line.
  if (control_ >= 0)
    ::send(control_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void child_process::signal_group(int sig) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (reaped_)
    return;
  send_control("S " + std::to_string(sig) + "\n");
  if (sig == SIGKILL && kill_requested_ns_ == 0)
    kill_requested_ns_ = monotonic_ns();
}

void child_process::extend(std::int64_t valid_until_ns) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!reaped_)
    send_control("D " + std::to_string(valid_until_ns) + "\n");
}

void child_process::end_fence() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!reaped_)
    send_control("E\n");
}

void child_process::on_report(const std::string& line) {
  std::istringstream in{line};
  char kind = 0;
  in >> kind;
  if (kind == 'P') {
    long pid = 0;
    if (in >> pid) {
      child_pid_ = static_cast<pid_t>(pid);
      if (h_.on_started)
        h_.on_started(static_cast<pid_t>(pid));
    }
  } else if (kind == 'X') {
    int status = 0;
    if (in >> status)
      reported_status_ = status;
  } else if (kind == 'K') {
    std::string why;
    long long at = 0;
    long long deadline = 0;
    in >> why >> at >> deadline;
    auto pid = std::to_string(child_pid_.load());
    if (why == "fence_expired") {
      auto late_ms = static_cast<double>(at - deadline) / 1e6;
      std::ostringstream text;
      text.precision(3);
      text << std::fixed << "fence keeper killed process group " << pid
           << ": the fence expired without renewal (valid until " << deadline
           << " CLOCK_MONOTONIC ns, killed " << late_ms << " ms after it)";
      fence_kill_ = text.str();
      if (h_.on_fence_kill)
        h_.on_fence_kill(fence_kill_);
    } else {
      h_.on_line(stream::err, "fence keeper killed process group " + pid + ": " + why);
    }
  }
}

bool child_process::reap_if_exited() {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  {
    std::lock_guard<std::mutex> guard{mtx_};
    // A keeper that does not carry out a SIGKILL in time (stopped, stuck)
    // is killed itself: the command then dies of PR_SET_PDEATHSIG.
    if (kill_requested_ns_ != 0 && monotonic_ns() - kill_requested_ns_ > keeper_kill_bound_ns)
      ::kill(pid_, SIGKILL);
  }
  // WNOWAIT: look without reaping, so the pid stays ours until we hold mtx_.
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0
      || info.si_pid != pid_)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  while (::waitpid(pid_, &wait_status_, 0) < 0 && errno == EINTR)
    ;
  reaped_ = true;
  return true;
}

void child_process::watch() {
  line_splitter splitters[3];
  auto emit_to = [this](int i) {
    return [this, i](std::string line) {
      if (i == 2)
        on_report(line);
      else
        h_.on_line(i == 0 ? stream::out : stream::err, std::move(line));
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
    pollfd pfds[3];
    nfds_t count = 0;
    for (int i = 0; i < 3; ++i)
      if (fds_[i] >= 0)
        pfds[count++] = pollfd{fds_[i], POLLIN, 0};
    ::poll(pfds, count, poll_interval_ms);
    exited = reap_if_exited();
    for (int i = 0; i < 3; ++i)
      read_available(i, exited ? max_drain_chunks : max_chunks_per_poll);
  }
  for (int i = 0; i < 3; ++i) {
    splitters[i].flush(emit_to(i));
    close_fd(fds_[i]);
  }
  // A keeper that died without its report: kill what its command left.
  if (!reported_status_ && child_pid_.load() > 0)
    ::kill(-child_pid_.load(), SIGKILL);
  h_.on_exit(reported_status_.value_or(wait_status_), fence_kill_);
}

std::string child_process::describe(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return "killed by signal " + std::to_string(WTERMSIG(wait_status));
  return "ended with wait status " + std::to_string(wait_status);
}

} // namespace leasehold::modules
