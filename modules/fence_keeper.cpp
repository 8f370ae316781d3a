#include "modules/fence_keeper.hpp"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace leasehold::modules {

namespace {

constexpr std::int64_t ns_per_s = 1000000000;

struct keeper_args {
  int control_fd = 3;
  bool has_deadline = false;
  std::int64_t deadline_ns = 0;
  std::int64_t term = 0;
  const char* fence_file = nullptr;
  bool remove_fence_dir = false;
  const char* workdir = nullptr;
  char** command = nullptr;   // null-terminated: the tail of argv
};

bool parse_i64(const char* s, std::int64_t& out) {
  if (s == nullptr || *s == '\0')
    return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}

bool parse_args(int argc, char** argv, keeper_args& a) {
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    std::int64_t n = 0;
    if (std::strcmp(flag, "--") == 0) {
      if (i + 1 >= argc)
        return false;
      a.command = argv + i + 1;
      return true;
    } else if (std::strcmp(flag, "--control-fd") == 0) {
      if (!parse_i64(value(), n) || n < 0 || n > INT_MAX)
        return false;
      a.control_fd = static_cast<int>(n);
    } else if (std::strcmp(flag, "--deadline-ns") == 0) {
      if (!parse_i64(value(), a.deadline_ns))
        return false;
      a.has_deadline = true;
    } else if (std::strcmp(flag, "--term") == 0) {
      if (!parse_i64(value(), a.term))
        return false;
    } else if (std::strcmp(flag, "--fence-file") == 0) {
      if ((a.fence_file = value()) == nullptr)
        return false;
    } else if (std::strcmp(flag, "--remove-fence-dir") == 0) {
      a.remove_fence_dir = true;
    } else if (std::strcmp(flag, "--workdir") == 0) {
      if ((a.workdir = value()) == nullptr)
        return false;
    } else {
      return false;
    }
  }
  return false;   // no "-- COMMAND"
}

std::int64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * ns_per_s + ts.tv_nsec;
}

/// One line to the agent; never blocks, never raises SIGPIPE. A full or
/// closed socket loses the line: the agent is gone or not reading.
void report(int fd, const char* line, int n) {
  if (fd < 0 || n <= 0)
    return;
  if (::send(fd, line, static_cast<std::size_t>(n), MSG_NOSIGNAL | MSG_DONTWAIT) < 0
      && errno == ENOTSOCK)
    (void)!::write(fd, line, static_cast<std::size_t>(n));
}

/// Rewrites the fence file (tmp + rename: a reader sees the old or the new
/// line). valid_until 0: not valid.
void write_fence(const keeper_args& a, std::int64_t valid_until) {
  if (a.fence_file == nullptr)
    return;
  char wall[64] = "";
  if (valid_until > 0) {
    std::int64_t real = clock_ns(CLOCK_REALTIME) + (valid_until - clock_ns(CLOCK_MONOTONIC));
    time_t secs = static_cast<time_t>(real / ns_per_s);
    tm utc{};
    ::gmtime_r(&secs, &utc);
    std::size_t n = std::strftime(wall, sizeof wall, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(wall + n, sizeof wall - n, ".%06lldZ",
                  static_cast<long long>((real % ns_per_s) / 1000));
  }
  char line[256];
  int n = std::snprintf(line, sizeof line,
                        "{\"term\":%lld,\"valid_until_mono_ns\":%lld,\"valid_until_wall\":\"%s\"}\n",
                        static_cast<long long>(a.term), static_cast<long long>(valid_until), wall);
  char tmp[PATH_MAX + 8];
  std::snprintf(tmp, sizeof tmp, "%s.tmp", a.fence_file);
  int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  bool ok = ::write(fd, line, static_cast<std::size_t>(n)) == n;
  ok = ::close(fd) == 0 && ok;
  if (ok)
    ::rename(tmp, a.fence_file);
}

void remove_fence(const keeper_args& a) {
  if (a.fence_file == nullptr)
    return;
  char tmp[PATH_MAX + 8];
  std::snprintf(tmp, sizeof tmp, "%s.tmp", a.fence_file);
  ::unlink(a.fence_file);
  ::unlink(tmp);
  if (!a.remove_fence_dir)
    return;
  std::snprintf(tmp, sizeof tmp, "%s", a.fence_file);
  if (char* slash = std::strrchr(tmp, '/'); slash != nullptr && slash != tmp) {
    *slash = '\0';
    ::rmdir(tmp);
  }
}

[[noreturn]] void exec_child(const keeper_args& a, pid_t keeper) {
  ::setpgid(0, 0);
  // Dies with the keeper. If the keeper died before prctl, our parent is
  // already someone else: the signal would never come, so give up now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != keeper)
    ::_exit(127);
  for (int s = 1; s < NSIG; ++s)
    ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (a.workdir != nullptr && ::chdir(a.workdir) != 0) {
    ::dprintf(2, "%s: cannot change to %s: %s\n", fence_keeper_argv0, a.workdir,
              std::strerror(errno));
    ::_exit(127);
  }
  ::execvp(a.command[0], a.command);
  ::dprintf(2, "%s: cannot run %s: %s\n", fence_keeper_argv0, a.command[0], std::strerror(errno));
  ::_exit(127);
}

/// Splits the control stream into lines; a line too long for the buffer is
/// dropped (the protocol's lines are short).
class control_reader {
public:
  /// Reads what is there; calls on_line for each complete line. Returns
  /// false once the peer closed the socket or it failed.
  template <class F>
  bool read(int fd, F&& on_line) {
    for (int chunk = 0; chunk < 64; ++chunk) {
      auto n = ::read(fd, buf_ + used_, sizeof buf_ - used_);
      if (n == 0)
        return false;
      if (n < 0)
        return errno == EAGAIN || errno == EINTR;
      used_ += static_cast<std::size_t>(n);
      std::size_t start = 0;
      for (std::size_t i = 0; i < used_; ++i)
        if (buf_[i] == '\n') {
          buf_[i] = '\0';
          on_line(buf_ + start);
          start = i + 1;
        }
      std::memmove(buf_, buf_ + start, used_ - start);
      used_ -= start;
      if (used_ == sizeof buf_)
        used_ = 0;
    }
    return true;
  }

private:
  char buf_[512];
  std::size_t used_ = 0;
};

} // namespace

std::int64_t monotonic_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

int run_fence_keeper(int argc, char** argv) {
  keeper_args a;
  bool help = argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0);
  if (help || !parse_args(argc, argv, a)) {
    // --help is a question: the answer on stdout, exit 0; a misuse exits 2.
    std::fprintf(help ? stdout : stderr,
                 "usage: %s [--control-fd N] [--deadline-ns NS] [--term N] [--fence-file PATH "
                 "[--remove-fence-dir]] [--workdir DIR] -- COMMAND...\n%s",
                 fence_keeper_argv0,
                 help ? "Runs COMMAND in a process group of its own and kills the group when the "
                        "fence (--deadline-ns, CLOCK_MONOTONIC) runs out; run by the exec module "
                        "for leader-only children (cmd/leasehold/README.md).\n"
                      : "");
    return help ? 0 : 2;
  }
  int control = a.control_fd;
  if (::fcntl(control, F_GETFD) < 0) {
    std::fprintf(stderr, "%s: control fd %d is not open\n", fence_keeper_argv0, control);
    return 2;
  }
  ::fcntl(control, F_SETFD, FD_CLOEXEC);
  ::fcntl(control, F_SETFL, ::fcntl(control, F_GETFL) | O_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);
  if (::getpgrp() != ::getpid())
    ::setpgid(0, 0);   // never in the agent's process group
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
    sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  char line[160];
  std::int64_t valid_until = a.has_deadline ? a.deadline_ns : 0;
  auto kill_report = [&](const char* why, pid_t group) {
    if (group > 0)
      ::kill(-group, SIGKILL);
    int n = std::snprintf(line, sizeof line, "K %s %lld %lld\n", why,
                          static_cast<long long>(monotonic_ns()),
                          static_cast<long long>(valid_until));
    report(control, line, n);
  };
  if (a.has_deadline && monotonic_ns() >= valid_until) {
    // Expired before it started: nothing runs.
    kill_report("fence_expired", 0);
    int n = std::snprintf(line, sizeof line, "X %d\n", SIGKILL);
    report(control, line, n);
    return 0;
  }
  write_fence(a, valid_until);
  pid_t keeper = ::getpid();
  pid_t child = ::fork();
  if (child == 0)
    exec_child(a, keeper);
  if (child < 0) {
    std::fprintf(stderr, "%s: fork: %s\n", fence_keeper_argv0, std::strerror(errno));
    remove_fence(a);
    return 1;
  }
  ::setpgid(child, child);   // also here: the group exists before any kill of ours
  report(control, line, std::snprintf(line, sizeof line, "P %d\n", static_cast<int>(child)));

  control_reader reader;
  bool killed = false;
  bool ended = false;
  int wait_status = 0;
  auto kill_once = [&](const char* why) {
    if (killed)
      return;
    killed = true;
    kill_report(why, child);
    if (!ended)
      write_fence(a, 0);
  };
  for (;;) {
    if (a.has_deadline && monotonic_ns() >= valid_until)
      kill_once("fence_expired");
    pollfd fds[2] = {{sfd, POLLIN, 0}, {control, POLLIN, 0}};
    timespec timeout{};
    timespec* wait = nullptr;
    if (a.has_deadline && !killed) {
      std::int64_t left = std::max<std::int64_t>(0, valid_until - monotonic_ns());
      timeout.tv_sec = static_cast<time_t>(left / ns_per_s);
      timeout.tv_nsec = static_cast<long>(left % ns_per_s);
      wait = &timeout;
    }
    if (::ppoll(fds, 2, wait, nullptr) < 0 && errno != EINTR) {
      kill_once("keeper_signal");   // cannot wait for anything: end the child now
      wait = nullptr;
    }
    signalfd_siginfo si{};
    while (sfd >= 0 && ::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
      if (si.ssi_signo != SIGCHLD)
        kill_once("keeper_signal");
    if (control >= 0 && fds[1].revents != 0) {
      bool open = reader.read(control, [&](const char* l) {
        std::int64_t v = 0;
        if (l[0] == 'D' && l[1] == ' ' && parse_i64(l + 2, v)) {
          if (!killed && !ended && v > valid_until) {
            valid_until = v;
            write_fence(a, valid_until);
          }
        } else if (l[0] == 'E' && l[1] == '\0') {
          if (!ended && !killed)
            write_fence(a, 0);
          ended = true;
        } else if (l[0] == 'S' && l[1] == ' ' && parse_i64(l + 2, v) && v > 0 && v < NSIG) {
          ::kill(-child, static_cast<int>(v));
        }
      });
      if (!open) {
        // The agent is gone (or closed us): nothing may run without it.
        ::close(control);
        control = -1;
        kill_once("agent_gone");
      }
    }
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid == child) {
      // The leader is a zombie, so its group id is still ours: kill what it
      // left behind, then reap.
      ::kill(-child, SIGKILL);
      while (::waitpid(child, &wait_status, 0) < 0 && errno == EINTR)
        ;
      break;
    }
  }
  remove_fence(a);
  report(control, line, std::snprintf(line, sizeof line, "X %d\n", wait_status));
  return 0;
}

std::optional<fence_state> read_fence_file(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("valid_until_mono_ns")
      || !j["valid_until_mono_ns"].is_number_integer()) {
    error = path + ": not a fence file";
    return std::nullopt;
  }
  fence_state s;
  s.term = j.value("term", std::int64_t{0});
  s.valid_until_mono_ns = j["valid_until_mono_ns"].get<std::int64_t>();
  s.valid_until_wall = j.value("valid_until_wall", std::string{});
  return s;
}

int fence_check(const std::string& path, std::int64_t margin_ns, bool quiet) {
  std::string error;
  if (path.empty())
    error = "no fence file (set LEASEHOLD_FENCE_FILE or --file)";
  auto s = path.empty() ? std::nullopt : read_fence_file(path, error);
  auto say = [&](const std::string& text) {
    if (!quiet)
      std::printf("%s\n", text.c_str());
  };
  if (!s) {
    say("not valid: " + error);
    return 1;
  }
  auto now = monotonic_ns();
  auto term = "term " + std::to_string(s->term);
  if (s->valid_until_mono_ns == 0) {
    say("not valid: " + term + " ended");
    return 1;
  }
  auto left_ms = (s->valid_until_mono_ns - now) / 1000000;
  if (now + margin_ns >= s->valid_until_mono_ns) {
    say("not valid: " + term + (left_ms < 0 ? ", expired " + std::to_string(-left_ms) + " ms ago"
                                             : ", " + std::to_string(left_ms) + " ms left"));
    return 1;
  }
  say("valid: " + term + ", " + std::to_string(left_ms) + " ms left (until "
      + s->valid_until_wall + ")");
  return 0;
}

namespace {

// Any program linking this file can be its own fence keeper: executed with
// argv[0] == fence_keeper_argv0, it runs the keeper before main() and exits
// (glibc passes argc/argv to constructors of the executable).
__attribute__((constructor)) void fence_keeper_entry(int argc, char** argv, char**) {
  if (argc > 0 && argv != nullptr && argv[0] != nullptr
      && std::strcmp(argv[0], fence_keeper_argv0) == 0) {
    int rc = run_fence_keeper(argc, argv);
    std::fflush(nullptr);
    ::_exit(rc);
  }
}

} // namespace

} // namespace leasehold::modules
