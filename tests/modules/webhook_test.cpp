// webhook against a real httplib::Server on 127.0.0.1.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <httplib.h>

#include <caf/all.hpp>

#include "tests/support/event_log.hpp"
#include "modules/webhook.hpp"
#include "leasehold/lease.hpp"
#include "tests/support/wait.hpp"

using namespace leasehold;
using namespace leasehold::modules;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/// Records every POST body; answers `status`, optionally holding requests
/// until release().
class hook_server {
public:
  hook_server() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock<std::mutex> lock{mtx_};
      bodies_.push_back(req.body);
      cv_.notify_all();
      cv_.wait_for(lock, 10s, [this] { return !hold_; });
      res.status = status_;
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread{[this] { server_.listen_after_bind(); }};
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(10ms);
    REQUIRE(server_.is_running());
  }
  ~hook_server() {
    release();
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  void respond_with(int status) {
    std::lock_guard<std::mutex> guard{mtx_};
    status_ = status;
  }
  void hold() {
    std::lock_guard<std::mutex> guard{mtx_};
    hold_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      hold_ = false;
    }
    cv_.notify_all();
  }
  /// Waits (bounded) until at least n bodies arrived; returns all of them.
  std::vector<std::string> wait_bodies(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, timeout, [&] { return bodies_.size() >= n; });
    return bodies_;
  }

private:
  httplib::Server server_;
  int port_ = 0;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::string> bodies_;
  int status_ = 200;
  bool hold_ = false;
  std::thread thread_;
};

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor runner{sys}; // stands in for the runner: receives (un)subscribe
  leasehold::test::event_log log;
  hook_server server;

  caf::actor spawn_webhook(nlohmann::json settings) {
    REQUIRE(parse_webhook_settings(settings).errors.empty());
    module_context ctx;
    ctx.name = "hook";
    ctx.type = "webhook";
    ctx.settings = std::move(settings);
    ctx.fence.lease = {"ns", "lease"};
    ctx.runner = caf::actor_cast<leadership_publisher>(runner);
    ctx.identity = "me";
    ctx.events = log.sink();
    auto a = webhook_module().factory(sys, ctx);
    runner->monitor(a);
    caf::actor subscribed;
    runner->receive([&](subscribe_atom, caf::actor who) { subscribed = who; },
                    caf::after(5s) >> [] { FAIL("no subscribe"); });
    CHECK(subscribed == a);
    return a;
  }

  /// Stops the module: it must unsubscribe and go down within `timeout`.
  void stop(const caf::actor& a, std::chrono::milliseconds timeout = 2s) {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    auto unsubscribed = false;
    auto down = false;
    auto deadline = steady::now() + timeout;
    while (!(unsubscribed && down) && steady::now() < deadline)
      runner->receive([&](unsubscribe_atom, caf::actor who) { unsubscribed = who == a; },
                      [&](caf::down_msg&) { down = true; },
                      caf::after(timeout) >> [] {});
    CHECK(unsubscribed);
    CHECK(down);
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "webhook POSTs each leadership change as JSON") {
  auto a = spawn_webhook({{"url", server.url()}, {"timeout_ms", 1000}});
  caf::anon_send(a, leadership_changed{true, "me", 4, "", {}});
  caf::anon_send(a, leadership_changed{false, "other", 5, "renew deadline", {}});
  auto bodies = server.wait_bodies(2);
  REQUIRE(bodies.size() == 2);
  auto first = nlohmann::json::parse(bodies[0]);
  CHECK(first["identity"] == "me");
  CHECK(first["leading"] == true);
  CHECK(first["holder"] == "me");
  CHECK(first["term"] == 4);
  CHECK(first["lease"] == "ns/lease");
  CHECK(parse_micro_time(first["time"].get<std::string>()));
  auto second = nlohmann::json::parse(bodies[1]);
  CHECK(second["leading"] == false);
  CHECK(second["holder"] == "other");
  CHECK(second["term"] == 5);
  stop(a);
  CHECK(log.count("failed") == 0);
}

TEST_CASE_FIXTURE(fixture, "webhook retries a failing endpoint max_retries times, then drops") {
  server.respond_with(500);
  auto a = spawn_webhook({{"url", server.url()}, {"max_retries", 2}, {"timeout_ms", 1000}});
  caf::anon_send(a, leadership_changed{true, "me", 1, "", {}});
  CHECK(log.wait_for("failed (status 500): notification dropped"));
  // No attempt of it after the drop: the sender delivers one notification at
  // a time, so the next one's request follows the last attempt of this one.
  server.respond_with(200);
  caf::anon_send(a, leadership_changed{false, "other", 2, "", {}});
  auto bodies = server.wait_bodies(4);
  REQUIRE(bodies.size() == 4);
  for (std::size_t i = 0; i < 3; ++i)   // 1 attempt + 2 retries
    CHECK(nlohmann::json::parse(bodies[i])["leading"] == true);
  CHECK(nlohmann::json::parse(bodies[3])["leading"] == false);
  stop(a);
}

TEST_CASE_FIXTURE(fixture, "webhook drops a refused connection after retries") {
  auto a = spawn_webhook({{"url", "http://127.0.0.1:1/hook"}, {"max_retries", 1}});
  caf::anon_send(a, leadership_changed{true, "me", 1, "", {}});
  CHECK(log.wait_for("notification dropped"));
  stop(a);
}

TEST_CASE_FIXTURE(fixture, "webhook never blocks: bounded queue while the endpoint hangs") {
  server.hold();
  auto a = spawn_webhook({{"url", server.url()}, {"timeout_ms", 5000}});
  caf::anon_send(a, leadership_changed{true, "me", 0, "", {}});
  REQUIRE(server.wait_bodies(1).size() == 1); // the sender is stuck in this request
  for (int i = 1; i <= 40; ++i)
    caf::anon_send(a, leadership_changed{i % 2 == 0, "me", i, "", {}});
  // 40 queued, 16 kept: 24 dropped, each reported.
  leasehold::test::eventually([&] { return log.count("dropped the oldest") >= 24; }, 5s);
  CHECK(log.count("dropped the oldest") == 24);
  // Stopping cancels the hung request: before timeout_ms (5 s) could end it.
  auto t0 = steady::now();
  stop(a);
  CHECK(steady::now() - t0 < 5s);
}

TEST_CASE_FIXTURE(fixture, "webhook takes new settings") {
  auto a = spawn_webhook({{"url", "http://127.0.0.1:1/nowhere"}, {"max_retries", 0}});
  caf::anon_send(a, module_settings{"hook", {{"url", server.url()}}});
  caf::anon_send(a, leadership_changed{true, "me", 7, "", {}});
  auto bodies = server.wait_bodies(1);
  REQUIRE(bodies.size() == 1);
  CHECK(nlohmann::json::parse(bodies[0])["term"] == 7);
  stop(a);
}
