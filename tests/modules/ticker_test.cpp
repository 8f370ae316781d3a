// ticker on CAF's test coordinator: simulated time makes tick counts exact.
#include <doctest/doctest.h>

#include <algorithm>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "tests/support/event_log.hpp"
#include "modules/ticker.hpp"

using namespace leasehold;
using namespace leasehold::modules;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  return cfg;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{testing_config(cfg)};
  caf::scheduler::test_coordinator& sched
    = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  leasehold::test::event_log log;

  /// The fence stays valid until `valid_for` of simulated time from now.
  caf::actor spawn_ticker(nlohmann::json settings, caf::timespan valid_for = 24h) {
    module_context ctx;
    ctx.name = "tick";
    ctx.type = "ticker";
    ctx.leader_only = true;
    ctx.settings = std::move(settings);
    ctx.fence.lease = {"ns", "lease"};
    ctx.fence.identity = "me";
    ctx.fence.term = 3;
    ctx.fence.valid_until->store((sys.clock().now() + valid_for).time_since_epoch().count());
    ctx.identity = "me";
    ctx.events = log.sink();
    auto a = ticker_module().factory(sys, ctx);
    sched.run();
    return a;
  }

  /// Advances simulated time by `d` in steps of at most 10 ms, running every
  /// due message after each step.
  void advance(caf::timespan d) {
    for (caf::timespan t{0}; t < d;) {
      auto step = std::min(caf::timespan{10ms}, d - t);
      sched.advance_time(step);
      sched.run();
      t += step;
    }
  }

  /// Tick lines ("tick N term T..."), not "tick skipped" lines.
  std::size_t ticks() const { return log.count(" term "); }

  ~fixture() { sched.run(); }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "ticker ticks exactly once per interval and reports term") {
  auto t = spawn_ticker({{"interval_ms", 1000}, {"message", "hi"}});
  advance(999ms);
  CHECK(ticks() == 0);
  advance(1ms);
  CHECK(ticks() == 1);
  advance(9s);
  CHECK(ticks() == 10);
  auto details = log.details();
  CHECK(details.front() == "tick 1 term 3: hi");
  CHECK(details.back() == "tick 10 term 3: hi");
  auto ev = log.events().front();
  CHECK(ev.type == event_type::module_output);
  CHECK(ev.module == "tick");
  CHECK(ev.term == 3);
  CHECK(ev.lease == "ns/lease");
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_FIXTURE(fixture, "ticker defaults to 1000 ms and stops ticking after an exit message") {
  auto t = spawn_ticker(nlohmann::json::object());
  advance(3s);
  CHECK(ticks() == 3);
  CHECK(log.details().back() == "tick 3 term 3");
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  sched.run();
  advance(5s);
  CHECK(ticks() == 3);
}

TEST_CASE_FIXTURE(fixture, "ticker applies a new interval from module_settings at once") {
  auto t = spawn_ticker({{"interval_ms", 1000}});
  advance(2500ms);
  CHECK(ticks() == 2);
  caf::anon_send(t, module_settings{"tick", {{"interval_ms", 250}}});
  sched.run();
  advance(1s);
  CHECK(ticks() == 6);
  SUBCASE("invalid settings are reported and ignored") {
    caf::anon_send(t, module_settings{"tick", {{"interval_ms", 0}}});
    sched.run();
    CHECK(log.count("settings rejected: interval_ms: must be an integer > 0") == 1);
    advance(1s);
    CHECK(ticks() == 10);
  }
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_FIXTURE(fixture, "a leader-only ticker does not tick in its fence's last 50 ms: its line would land past the fence") {
  // A demo run journaled a tick 67 us after its fence's valid_until: the
  // tick checked the fence just before the end, then wrote its line.
  auto t = spawn_ticker({{"interval_ms", 1000}}, 1000ms + 1ms);
  advance(1500ms);
  CHECK(ticks() == 0);
  CHECK(log.count("tick skipped") == 1);
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  sched.run();
  auto u = spawn_ticker({{"interval_ms", 1000}}, 1000ms + 60ms);   // 60 ms left: it ticks
  advance(1500ms);
  CHECK(ticks() == 1);
  caf::anon_send_exit(u, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE_FIXTURE(fixture, "a leader-only ticker skips ticks once its fence expires") {
  auto t = spawn_ticker({{"interval_ms", 1000}}, 2500ms);
  advance(4s);
  CHECK(ticks() == 2);
  CHECK(log.count("tick skipped") == 2);
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  sched.run();
}
