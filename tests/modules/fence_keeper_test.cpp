// The fence keeper alone (modules/fence_keeper.hpp): this test binary links
// the keeper, so it runs as one when executed as "leasehold-fence-keeper".
// Real processes, real time; every bound asserted with margin.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modules/fence_keeper.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

using namespace leasehold::modules;
using namespace std::chrono_literals;
using leasehold::test::eventually;
using leasehold::test::group_alive;
using leasehold::test::load_slack;
using leasehold::test::pid_alive;
using leasehold::test::temp_dir;

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t ms_ns = 1000000;

/// One keeper process with its control socket, as the exec module runs it.
struct keeper {
  pid_t pid = -1;
  int control = -1;
  std::string reports;   // everything the keeper wrote back
  int status = -1;       // the keeper's own wait status once reaped

  keeper(std::vector<std::string> args, const std::string& script) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::vector<std::string> all{fence_keeper_argv0};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--", "sh", "-c", script});
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    REQUIRE(::posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    control = sv[0];
  }
  ~keeper() {
    if (control >= 0)
      ::close(control);
    if (status == -1) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

  void send(const std::string& line) {
    REQUIRE(::send(control, line.data(), line.size(), MSG_NOSIGNAL) == (ssize_t)line.size());
  }
  void close_control() {
    ::close(control);
    control = -1;
  }
  /// Appends what the keeper wrote within `wait` ms; false at end of stream.
  bool read_reports(int wait) {
    pollfd p{control, POLLIN, 0};
    if (::poll(&p, 1, wait) <= 0)
      return true;
    char buf[512];
    auto n = ::read(control, buf, sizeof buf);
    if (n > 0)
      reports.append(buf, static_cast<std::size_t>(n));
    return n > 0;
  }
  /// Reads reports until the keeper exits (at most `timeout`); true if it
  /// did. After the exit, drains the socket: the last lines ("X ...") may
  /// arrive between a read and the waitpid that sees the exit.
  bool wait_exit(std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (control >= 0)
        read_reports(5);
      else
        std::this_thread::sleep_for(5ms);
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        for (int i = 0; control >= 0 && i < 64 && read_reports(0); ++i)
          ;
        return true;
      }
    }
    return false;
  }
  /// The number after "<kind> " in the reports (the first field), or -1.
  long long field(const std::string& kind, int index = 0) const {
    auto at = reports.find(kind + " ");
    if (at == std::string::npos)
      return -1;
    std::istringstream in{reports.substr(at + kind.size() + 1)};
    std::string word;
    for (int i = 0; i <= index; ++i)
      in >> word;
    try {
      return std::stoll(word);
    } catch (...) {
      return -1;
    }
  }
};

/// A pid the command wrote into `file` (waits for it).
pid_t read_pid(const fs::path& file, int nth = 0) {
  pid_t out = -1;
  REQUIRE(eventually(
    [&] {
      std::ifstream in{file};
      std::vector<long> pids;
      for (long p = 0; in >> p;)
        pids.push_back(p);
      if (static_cast<int>(pids.size()) <= nth)
        return false;
      out = static_cast<pid_t>(pids[static_cast<std::size_t>(nth)]);
      return true;
    },
    5000ms));
  return out;
}

std::string deadline_in(std::int64_t ms) {
  return std::to_string(monotonic_ns() + ms * ms_ns);
}

} // namespace

TEST_CASE("keeper: an extended deadline holds; the group dies at the last one") {
  temp_dir dir;
  auto fence = (dir / "fence").string();
  // The first deadline leaves load_slack for the extension to arrive.
  auto slack_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(load_slack).count();
  keeper k({"--deadline-ns", std::to_string(monotonic_ns() + slack_ns), "--term", "4",
            "--fence-file", fence},
           "echo $$ > " + (dir / "pids").string() + "; sleep 30");
  auto child = read_pid(dir / "pids");
  std::string error;
  auto first = read_fence_file(fence, error);
  REQUIRE(first);
  CHECK(first->term == 4);
  CHECK(fence_check(fence, 0, true) == 0);
  auto extended = first->valid_until_mono_ns + 500 * ms_ns;
  k.send("D " + std::to_string(extended) + "\n");
  REQUIRE(eventually([&] {
    auto s = read_fence_file(fence, error);
    return s && s->valid_until_mono_ns == extended;
  }, 1000ms));
  k.send("D " + std::to_string(extended - 400 * ms_ns) + "\n");   // never backwards
  CHECK(fence_check(fence, 0, true) == 0);
  CHECK(fence_check(fence, 10000 * ms_ns, true) == 1);   // not 10 s left
  REQUIRE(k.wait_exit());
  CHECK(eventually([&] { return !group_alive(child); }, load_slack));
  CHECK(k.reports.find("K fence_expired") != std::string::npos);
  // The deadline it enforced is the extended one: not the first, not the
  // one that went backwards.
  CHECK(k.field("K", 2) == extended);
  auto killed_at = k.field("K", 1);
  MESSAGE("killed " << (killed_at - extended) / 1e6 << " ms after the deadline");
  CHECK(killed_at >= extended);
  CHECK(killed_at - extended < slack_ns);
  CHECK(k.field("X") == SIGKILL);   // wait status: killed by signal 9
  CHECK(!fs::exists(fence));        // removed once the child is gone
}

TEST_CASE("keeper: expiry kills a child that ignores SIGTERM and all its grandchildren at once") {
  temp_dir dir;
  auto pids = (dir / "pids").string();
  keeper k({"--deadline-ns", deadline_in(400)},
           "trap '' TERM; echo $$ > " + pids + "; (trap '' TERM; sleep 30) & echo $! >> " + pids
             + "; sh -c 'trap \"\" TERM; sleep 30 & echo $! >> " + pids + "; wait' & wait");
  auto child = read_pid(pids, 0);
  auto grand = read_pid(pids, 1);
  auto great = read_pid(pids, 2);
  k.send("S 15\n");   // ignored by all of them
  REQUIRE(k.wait_exit());
  CHECK(k.field("X") == SIGKILL);   // the child outlived the SIGTERM: the expiry killed it
  CHECK(eventually([&] { return !group_alive(child); }, load_slack));
  CHECK(!pid_alive(grand));
  CHECK(!pid_alive(great));
  CHECK(k.reports.find("K fence_expired") != std::string::npos);
  CHECK(k.field("K", 1) >= k.field("K", 2));
  CHECK(k.field("K", 1) - k.field("K", 2)
        < std::chrono::duration_cast<std::chrono::nanoseconds>(load_slack).count());
}

TEST_CASE("keeper: the control socket closing kills the group at once") {
  temp_dir dir;
  auto pids = (dir / "pids").string();
  std::vector<std::string> args;
  SUBCASE("fenced") { args = {"--deadline-ns", deadline_in(60000)}; }
  SUBCASE("no deadline (an every-replica child)") {}
  keeper k(args, "echo $$ > " + pids + "; sleep 30 & echo $! >> " + pids + "; wait");
  auto child = read_pid(pids, 0);
  auto grand = read_pid(pids, 1);
  std::this_thread::sleep_for(50ms);
  auto t0 = std::chrono::steady_clock::now();
  k.close_control();
  CHECK(eventually([&] { return !group_alive(child); }, load_slack));
  auto took = std::chrono::steady_clock::now() - t0;
  MESSAGE("group gone " << std::chrono::duration<double, std::milli>(took).count()
                        << " ms after the socket closed");
  CHECK(!pid_alive(grand));
  REQUIRE(k.wait_exit());
  CHECK(WIFEXITED(k.status));
}

TEST_CASE("keeper: a command that exits leaves nothing in its group; the status is reported") {
  temp_dir dir;
  auto pids = (dir / "pids").string();
  keeper k({}, "sleep 30 & echo $! > " + pids + "; exit 3");
  auto grand = read_pid(pids);
  REQUIRE(k.wait_exit());
  CHECK(eventually([&] { return !pid_alive(grand); }, load_slack));
  auto x = k.field("X");
  CHECK(WIFEXITED(x));
  CHECK(WEXITSTATUS(x) == 3);
  CHECK(k.reports.find("K ") == std::string::npos);
}

TEST_CASE("keeper: SIGTERM to the keeper kills the group; an expired fence starts nothing") {
  temp_dir dir;
  auto pids = (dir / "pids").string();
  {
    keeper k({"--deadline-ns", deadline_in(60000)}, "echo $$ > " + pids + "; sleep 30");
    auto child = read_pid(pids);
    ::kill(k.pid, SIGTERM);
    REQUIRE(k.wait_exit());
    CHECK(eventually([&] { return !group_alive(child); }, load_slack));
    CHECK(k.reports.find("K keeper_signal") != std::string::npos);
  }
  {
    auto marker = dir / "ran";
    keeper k({"--deadline-ns", deadline_in(-1)}, "touch " + marker.string());
    REQUIRE(k.wait_exit());
    CHECK(k.reports.find("K fence_expired") != std::string::npos);
    CHECK(k.reports.find("P ") == std::string::npos);   // no process started
    CHECK(!fs::exists(marker));
  }
}

TEST_CASE("fence check: missing, malformed, ended and valid files") {
  temp_dir dir;
  auto f = (dir / "fence").string();
  CHECK(fence_check(f, 0, true) == 1);
  std::ofstream(f) << "{not json";
  CHECK(fence_check(f, 0, true) == 1);
  std::ofstream(f) << R"({"term":2,"valid_until_mono_ns":0,"valid_until_wall":""})";
  CHECK(fence_check(f, 0, true) == 1);
  std::ofstream(f) << R"({"term":2,"valid_until_mono_ns":)" << monotonic_ns() + 1000 * ms_ns
                   << R"(,"valid_until_wall":"x"})";
  CHECK(fence_check(f, 0, true) == 0);
  CHECK(fence_check(f, 2000 * ms_ns, true) == 1);
  CHECK(fence_check("", 0, true) == 1);
}
