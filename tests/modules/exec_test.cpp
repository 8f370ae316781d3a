// exec on a real actor system: real processes, short timings.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <atomic>
#include <memory>
#include <thread>

#include <sys/wait.h>

#include <caf/all.hpp>

#include "tests/support/event_log.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/wait.hpp"
#include "modules/exec.hpp"

using namespace leasehold;
using namespace leasehold::modules;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using leasehold::test::eventually;
using leasehold::test::group_alive;
using leasehold::test::load_slack;

namespace {

/// True when no process of group `pgid` is alive, polling for at most
/// `timeout`: the module SIGKILLs what is left of the group as it reaps the
/// leader, and the kernel finishes those deaths asynchronously.
bool group_gone(pid_t pgid, std::chrono::milliseconds timeout = 2s) {
  return eventually([&] { return !group_alive(pgid); }, timeout);
}

/// True when this process has no child at all (neither running nor zombie).
bool no_children() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  leasehold::test::event_log log;

  /// The fence every spawned leader-only exec shares (valid for an hour).
  std::shared_ptr<std::atomic<std::int64_t>> valid_until
    = std::make_shared<std::atomic<std::int64_t>>((steady::now() + 1h).time_since_epoch().count());

  caf::actor spawn_exec(nlohmann::json settings, bool leader_only = true) {
    REQUIRE(parse_exec_settings(settings).errors.empty());
    module_context ctx;
    ctx.name = "job";
    ctx.type = "exec";
    ctx.leader_only = leader_only;
    ctx.settings = std::move(settings);
    ctx.fence.lease = {"ns", "lease"};
    ctx.fence.identity = "me";
    ctx.fence.term = 3;
    ctx.fence.valid_until = valid_until;   // actor clock = CLOCK_MONOTONIC here
    ctx.identity = "me";
    ctx.events = log.sink();
    auto a = exec_module().factory(sys, ctx);
    self->monitor(a);
    return a;
  }

  /// The pid from the "started pid N" line of the n-th start.
  pid_t started_pid(std::size_t nth = 0) {
    REQUIRE(log.wait_for("started pid"));
    auto deadline = steady::now() + 5s;
    std::vector<std::string> lines;
    while (steady::now() < deadline) {
      lines.clear();
      for (auto& d : log.details())
        if (d.rfind("started pid ", 0) == 0)
          lines.push_back(d);
      if (lines.size() > nth)
        return static_cast<pid_t>(std::stol(lines[nth].substr(12)));
      std::this_thread::sleep_for(10ms);
    }
    FAIL("no start #" << nth);
    return -1;
  }

  /// The exit reason of the monitored actor, waiting at most `timeout`.
  caf::error wait_down(std::chrono::milliseconds timeout = 5s) {
    caf::error reason = caf::make_error(caf::sec::request_timeout);
    self->receive([&](caf::down_msg& d) { reason = d.reason; },
                  caf::after(timeout) >> [] { FAIL("module did not stop"); });
    return reason;
  }

  ~fixture() { CHECK(no_children()); }
};

nlohmann::json sh(const std::string& script, int grace_ms = 2000) {
  return {{"command", {"sh", "-c", script}}, {"grace_ms", grace_ms}};
}

} // namespace

TEST_CASE_FIXTURE(fixture, "exec reports output with the fencing token and stops on exit message") {
  auto a = spawn_exec(sh("echo hello; echo term=$LEASEHOLD_TERM $LEASEHOLD_IDENTITY "
                         "$LEASEHOLD_LEASE; echo oops >&2; sleep 30"));
  auto pid = started_pid();
  auto hello = log.wait_for("hello");
  REQUIRE(hello);
  CHECK(hello->detail == "hello");
  CHECK(hello->reason == "stdout");
  CHECK(hello->type == event_type::module_output);
  CHECK(hello->module == "job");
  CHECK(log.wait_for("term=3 me ns/lease"));
  auto oops = log.wait_for("oops");
  REQUIRE(oops);
  CHECK(oops->reason == "stderr");
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(group_gone(pid));
  CHECK(log.count("SIGKILL") == 0);   // SIGTERM sufficed, no kill at grace_ms
}

TEST_CASE_FIXTURE(fixture, "exec: a child that ends of the stop's SIGTERM stopped, it was not killed") {
  auto a = spawn_exec(sh("echo ready; sleep 30"));
  auto pid = started_pid();
  REQUIRE(log.wait_for("ready"));
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(group_gone(pid));
  CHECK(log.wait_for("stopped by the SIGTERM sent to stop it"));
  CHECK(log.count("killed by signal") == 0);
}

TEST_CASE_FIXTURE(fixture, "exec SIGKILLs a command that ignores SIGTERM after grace_ms") {
  auto a = spawn_exec(sh("trap '' TERM; echo ready; sleep 30", 300));
  auto pid = started_pid();
  REQUIRE(log.wait_for("ready"));
  auto t0 = steady::now();
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  auto took = steady::now() - t0;
  CHECK(took >= 300ms);               // not before grace_ms
  CHECK(took < 300ms + load_slack);
  CHECK(log.count("SIGKILL") == 1);
  CHECK(group_gone(pid));
}

TEST_CASE_FIXTURE(fixture, "exec quits with an error when the command fails, normally on status 0") {
  SUBCASE("status 1") {
    spawn_exec(sh("exit 1"));
    auto reason = wait_down();
    CHECK(reason == caf::sec::runtime_error);
    CHECK(log.wait_for("exited with status 1"));
  }
  SUBCASE("status 0") {
    spawn_exec(sh("exit 0"));
    CHECK(wait_down() == caf::exit_reason::normal);
  }
  SUBCASE("killed by a signal") {
    spawn_exec(sh("kill -9 $$"));
    CHECK(wait_down() == caf::sec::runtime_error);
    CHECK(log.wait_for("killed by signal 9"));
  }
  SUBCASE("command not found") {
    spawn_exec({{"command", {"/nonexistent/leasehold-no-such-binary"}}});
    CHECK(wait_down() == caf::sec::runtime_error);
    CHECK(log.wait_for("cannot run /nonexistent/leasehold-no-such-binary"));
  }
}

TEST_CASE_FIXTURE(fixture, "exec leaves no process behind when killed") {
  auto a = spawn_exec(sh("trap '' TERM; echo ready; sleep 30 & sleep 30"));
  auto pid = started_pid();
  REQUIRE(log.wait_for("ready"));
  caf::anon_send_exit(a, caf::exit_reason::kill);
  CHECK(wait_down() == caf::exit_reason::kill);
  CHECK(group_gone(pid));
}

TEST_CASE_FIXTURE(fixture, "exec kills what the command left in its group when it exits") {
  auto a = spawn_exec(sh("sleep 30 & echo bg=$!; exit 0"));
  auto pid = started_pid();
  CHECK(wait_down() == caf::exit_reason::normal);
  CHECK(group_gone(pid));
}

TEST_CASE_FIXTURE(fixture, "exec applies env, workdir, and omits the token when not leader-only") {
  auto settings = sh("echo foo=$FOO; pwd; echo term=${LEASEHOLD_TERM:-none}; sleep 30");
  settings["env"] = {{"FOO", "bar"}};
  settings["workdir"] = "/";
  auto a = spawn_exec(settings, false);
  started_pid();
  CHECK(log.wait_for("foo=bar"));
  CHECK(log.wait_for("term=none"));
  CHECK(log.count("/") >= 1);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(fixture, "exec restarts the command on new settings") {
  auto a = spawn_exec(sh("echo one; sleep 30"));
  auto first = started_pid(0);
  REQUIRE(log.wait_for("one"));
  caf::anon_send(a, module_settings{"job", sh("echo two; sleep 30")});
  REQUIRE(log.wait_for("two"));
  CHECK(group_gone(first));
  auto second = started_pid(1);
  CHECK(second != first);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(group_gone(second));
}

TEST_CASE_FIXTURE(fixture, "exec: a fenced child sees its fence and dies when it is not renewed") {
  using clock = std::chrono::steady_clock;
  auto ns = [](clock::time_point t) { return t.time_since_epoch().count(); };
  auto first = clock::now() + load_slack;
  valid_until->store(ns(first));
  auto a = spawn_exec(sh("echo file=$LEASEHOLD_FENCE_FILE; cat $LEASEHOLD_FENCE_FILE; echo; "
                         "trap '' TERM; sleep 30"));
  auto pid = started_pid();
  REQUIRE(log.wait_for("valid_until_mono_ns"));
  // Renewed: the keeper's deadline follows the fence (within the poll
  // interval; the first deadline leaves load_slack for it). The kill names
  // the deadline it enforced: the renewed one, not the first.
  auto renewed = first + 500ms;
  valid_until->store(ns(renewed));
  auto kill = log.wait_for("fence expired", 2 * load_slack);
  REQUIRE(kill);
  CHECK(kill->reason == "fence_kill");
  CHECK(kill->detail.find("(valid until " + std::to_string(ns(renewed)) + " ") != std::string::npos);
  // Killed after the deadline, never before it (late by scheduling only).
  auto late = kill->detail.find(" ms after it)");
  REQUIRE(late != std::string::npos);
  auto late_ms = std::stod(kill->detail.substr(kill->detail.rfind("killed ", late) + 7));
  CHECK(late_ms >= 0);
  CHECK(late_ms < std::chrono::duration<double, std::milli>(load_slack).count());
  CHECK(group_gone(pid, load_slack));
  CHECK(log.wait_for("killed by signal 9"));
  // Not a crash, no new child: the actor waits for its stop without one.
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(log.count("started pid") == 1);
}

TEST_CASE_FIXTURE(fixture, "exec: no leader-only child starts on an invalid fence; an ended fence "
                           "reads not valid at once") {
  valid_until->store(0);
  auto a = spawn_exec(sh("echo should-not-run; sleep 30"));
  REQUIRE(log.wait_for("fence not valid"));
  // Once the actor is down nothing of it can start: no child was.
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(log.count("started pid") == 0);
  CHECK(log.count("should-not-run") == 0);

  valid_until->store((steady::now() + 1h).time_since_epoch().count());
  auto b = spawn_exec(sh("while cat $LEASEHOLD_FENCE_FILE; do echo; sleep 0.02; done; sleep 30"));
  auto pid = started_pid(0);
  REQUIRE(log.wait_for("valid_until_mono_ns"));
  valid_until->store(0);   // the term ended: the file says so, the child lives on its grace
  REQUIRE(log.wait_for("\"valid_until_mono_ns\":0,"));
  CHECK(group_alive(pid));
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  CHECK(wait_down() == caf::exit_reason::user_shutdown);
  CHECK(group_gone(pid));
}
