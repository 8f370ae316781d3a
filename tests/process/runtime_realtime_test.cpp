// Real time, real HTTP: runners in one process against leasehold-apiserver
// on 127.0.0.1. Short lease timings; bounds asserted with margin.
#include <doctest/doctest.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/policy/work_sharing.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <httplib.h>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "leasehold/runtime.hpp"
#include "tests/support/timings.hpp"
#include "tests/support/wait.hpp"
#include "tests/support/work_log.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using leasehold::test::eventually;
using leasehold::test::load_slack;
using leasehold::test::short_timings;
using leasehold::test::work_log;
using leasehold::test::work_registry;

namespace {

/// A runner for `lease` whose one module is an instance of `work_registry`'s "work".
runner_options work_runner(const std::string& identity, lease_key lease, election_timings t,
                           lease_backend backend,
                           std::shared_ptr<module_registry> reg) {
  runner_options o;
  o.identity = identity;
  o.lease = std::move(lease);
  o.timings = t;
  o.backend = std::move(backend);
  o.registry = std::move(reg);
  module_spec m;
  m.name = "work";
  m.type = "work";
  o.modules.modules = {m};
  return o;
}

void set_fault(int control_port, const std::string& body) {
  httplib::Client c("127.0.0.1", control_port);
  auto r = c.Post("/_leasehold/faults", body, "application/json");
  REQUIRE(r);
  REQUIRE(r->status == 200);
}

} // namespace

TEST_CASE("two runners in one process: API down for 5 s and back, a leader again") {
  local_api_server server;
  auto started = server.start();
  REQUIRE(started.error.empty());

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  work_log iv;
  auto reg = work_registry(iv);

  auto t = short_timings();
  std::vector<runner_actor> runners;
  std::vector<lease_transport_actor> transports;
  for (auto id : {"rt-a", "rt-b"}) {
    connection_config conn;
    conn.server = "http://127.0.0.1:" + std::to_string(server.port());
    conn.user_agent = std::string("leasehold-test/") + id;
    auto o = work_runner(id, {"default", "realtime"}, t,
                         spawn_http_backend(sys, bounded_by(conn, t)), reg);
    auto r = spawn_runner(sys, o);
    REQUIRE(r.errors.empty());
    runners.push_back(r.runner);
    transports.push_back(o.backend.transport);
  }

  REQUIRE(eventually([&] { return iv.running() == 1; }, 5s));
  std::this_thread::sleep_for(1s);
  CHECK(iv.running() == 1);

  set_fault(server.control_port(), R"({"mode":"down"})");
  auto down_at = steady::now();
  // renew_deadline + module_stop_timeout (+ load_slack) later, nobody runs.
  auto stop_bound = std::chrono::duration_cast<std::chrono::milliseconds>(
    t.renew_deadline + t.module_stop_timeout) + load_slack;
  REQUIRE(eventually([&] { return iv.running() == 0; }, stop_bound));
  std::this_thread::sleep_for(5s - (steady::now() - down_at));
  CHECK(iv.running() == 0);

  set_fault(server.control_port(), R"({"mode":"recover"})");
  auto up_at = steady::now();
  // lease expiry by a follower's clock + retry + respawn backoff cap, with margin.
  REQUIRE(eventually([&] { return iv.running() == 1; }, 8s + load_slack));
  MESSAGE("leader again " << std::chrono::duration_cast<std::chrono::milliseconds>(
            steady::now() - up_at).count() << " ms after the API came back");
  std::this_thread::sleep_for(1s);
  CHECK(iv.running() == 1);
  CHECK(iv.overlaps() == 0);

  for (auto& r : runners)
    CHECK(shutdown(sys, r, 5s));
  CHECK(iv.running() == 0);
  for (auto& tr : transports)
    caf::anon_send_exit(tr, caf::exit_reason::user_shutdown);
}

TEST_CASE("tune_for_idle: CAF's work-sharing scheduler with the given number of workers") {
  using sharing = caf::scheduler::coordinator<caf::policy::work_sharing>;
  for (auto [asked, workers] : {std::pair<size_t, size_t>{2, 2}, {3, 3}, {0, 1}}) {
    caf::actor_system_config cfg;
    if (asked == 2)
      tune_for_idle(cfg);   // the default: what `leasehold run` uses
    else
      tune_for_idle(cfg, asked);
    caf::actor_system sys{cfg};
    CHECK(dynamic_cast<sharing*>(&sys.scheduler()) != nullptr);
    CHECK(sys.scheduler().num_workers() == workers);
    // Actors run on it: a request and its answer.
    auto inc = sys.spawn([]() -> caf::behavior { return {[](int x) { return x + 1; }}; });
    int got = 0;
    caf::scoped_actor self{sys};
    self->request(inc, caf::timespan{5s}, 41).receive([&](int r) { got = r; }, [](caf::error&) {});
    CHECK(got == 42);
    caf::anon_send_exit(inc, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("the embedding example runs, leads, and releases its lease on exit") {
  local_api_server server;
  REQUIRE(server.start().error.empty());
  // LEASEHOLD_EXAMPLE_BIN: the example as built elsewhere (tests/install
  // builds it from an installed prefix with pkg-config alone).
  std::string bin;
  if (auto b = std::getenv("LEASEHOLD_EXAMPLE_BIN"))
    bin = b;
  else if (auto build = std::getenv("LEASEHOLD_BUILD_ROOT"))
    bin = std::string(build) + "/examples/embedded-agent";
  REQUIRE(!bin.empty());
  MESSAGE("example: " << bin);
  auto cmd = bin + " --server http://127.0.0.1:" + std::to_string(server.port())
             + " --identity example-1 --seconds 5 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr)
    out += buf.data();
  int rc = pclose(p);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("became leader (holder \"example-1\"") != std::string::npos);
  CHECK(out.find("hello 2 from the leader") != std::string::npos);
  CHECK(out.find("greeter stopped") != std::string::npos);
  CHECK(out.find("released") != std::string::npos);
  // The example sets no event sink: the default one says what happened.
  CHECK(out.find("leasehold [example-1 default/embedded-example] became leader (term ")
        != std::string::npos);
  CHECK(out.find("leasehold [example-1 default/embedded-example] module started (greeter, term ")
        != std::string::npos);
  CHECK(out.find("leasehold [example-1 default/embedded-example] lease released (term ")
        != std::string::npos);
  // What the API saw: the Lease is released (holder empty, duration 1).
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/embedded-example");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto j = nlohmann::json::parse(r->body);
  CHECK(j["spec"].value("holderIdentity", "") == "");
  CHECK(j["spec"]["leaseDurationSeconds"] == 1);
}

TEST_CASE("the embedding example releases its lease on SIGTERM, then exits 0") {
  local_api_server server;
  REQUIRE(server.start().error.empty());
  std::string bin;
  if (auto b = std::getenv("LEASEHOLD_EXAMPLE_BIN"))
    bin = b;
  else if (auto build = std::getenv("LEASEHOLD_BUILD_ROOT"))
    bin = std::string(build) + "/examples/embedded-agent";
  REQUIRE(!bin.empty());
  char out_path[] = "/tmp/leasehold-example-out-XXXXXX";
  int out_fd = mkstemp(out_path);
  REQUIRE(out_fd >= 0);
  auto port = std::to_string(server.port());
  std::vector<std::string> args{bin, "--server", "http://127.0.0.1:" + port, "--identity",
                                "example-term", "--seconds", "0"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out_fd);
  auto output = [&] {
    std::ifstream in(out_path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  int status = 0;
  auto exited = [&] { return waitpid(pid, &status, WNOHANG) == pid; };
  bool greeted = eventually([&] { return output().find("hello 1 from the leader") != std::string::npos; },
                            10s);
  kill(pid, SIGTERM);
  bool ended = eventually(exited, 10s);   // module_stop_timeout + the release, with room
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  auto out = output();
  unlink(out_path);
  INFO(out);
  REQUIRE(greeted);
  REQUIRE(ended);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out.find("SIGTERM: stopping") != std::string::npos);
  CHECK(out.find("greeter stopped") != std::string::npos);
  CHECK(out.find("released") != std::string::npos);
  // What the API saw: the Lease is released, not left to expire.
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/embedded-example");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto j = nlohmann::json::parse(r->body);
  CHECK(j["spec"].value("holderIdentity", "") == "");
}

TEST_CASE("many leases in one process: watches the server refuses do not starve the requests") {
  // A server with room for one watch stream and 16 other connections; 20
  // leases, each runner's follower watch refused (429) but the first. Before,
  // each refused watch kept its connection (keep-alive) through its backoff,
  // holding a server worker: the 16 were taken, the renews queued behind
  // them, and no lease was ever led.
  leasehold::api_server_options so;
  so.worker_threads = 17;
  local_api_server server(so);
  REQUIRE(server.start().error.empty());
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  work_log iv;
  auto reg = work_registry(iv);
  auto t = short_timings();
  connection_config conn;
  conn.server = "http://127.0.0.1:" + std::to_string(server.port());
  auto backend = spawn_http_backend(sys, bounded_by(conn, t));
  std::vector<runner_actor> runners;
  for (int i = 0; i < 20; ++i) {
    auto o = work_runner("many", {"default", "many-" + std::to_string(i)}, t, backend, reg);
    o.events = [](const runtime_event&) {};
    auto r = spawn_runner(sys, o);
    REQUIRE(r.errors.empty());
    runners.push_back(r.runner);
  }
  // Each created lease is led a lease duration after its create.
  CHECK(eventually([&] { return iv.running() == 20; }, 8s));   // 4 lease durations
  MESSAGE(iv.running() << " of 20 leases led");
  // One watch stream for the 20 leases of the namespace: the
  // server saw one watch request, not one per lease (or per elector).
  httplib::Client control("127.0.0.1", server.control_port());
  auto stats = control.Get("/_leasehold/stats");
  REQUIRE(stats);
  auto watches = nlohmann::json::parse(stats->body)["total"]["by_verb"].value("watch", 0);
  MESSAGE(watches << " watch requests for 20 leases");
  CHECK(watches >= 1);
  CHECK(watches <= 2);
  for (auto& r : runners)
    CHECK(shutdown(sys, r, 5s));
  caf::anon_send_exit(backend.transport, caf::exit_reason::user_shutdown);
}
