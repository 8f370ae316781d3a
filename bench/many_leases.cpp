// many_leases: one process, N independent leases (N runners, one elector
// each), sharing a small pool of HTTP transport actors (each one is a
// detached thread), each with a trivial leader-only module.
//
//   many_leases --server http://127.0.0.1:PORT [--leases 1000] [--transports 8]
//               [--timeout 60] [--hold 5]
//   many_leases --etcd http://127.0.0.1:PORT ...   (the etcd backend instead)
//
// Reports, as one JSON line on stdout: leaders reached, the time until all
// leases were led, RSS before the runners and after every lease is led, RSS
// per election, CPU seconds while holding every lease for --hold seconds,
// and the process's threads once every lease is led.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/runtime.hpp"

using namespace std::chrono_literals;

namespace {

struct options {
  std::string server;
  bool etcd = false;   // --etcd: server is an etcd endpoint
  int leases = 1000;
  int transports = 8;
  int timeout_s = 60;
  int hold_s = 5;
};

/// A field of /proc/self/status ("VmRSS:", "Threads:"); -1 when absent.
long proc_status(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == field) {
      in >> value;
      return value;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

/// The trivial leader-only module: an actor that waits for its exit message.
caf::behavior idle_module(caf::event_based_actor*) {
  return {[](leasehold::module_settings&) {}};
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--server") o.server = v;
    else if (k == "--etcd") { o.server = v; o.etcd = true; }
    else if (k == "--leases") o.leases = std::stoi(v);
    else if (k == "--transports") o.transports = std::stoi(v);
    else if (k == "--timeout") o.timeout_s = std::stoi(v);
    else if (k == "--hold") o.hold_s = std::stoi(v);
    else return false;
  }
  return !o.server.empty() && o.leases > 0 && o.transports > 0 && (argc % 2) == 1;
}

} // namespace

int main(int argc, char** argv) {
  options opt;
  if (!parse(argc, argv, opt)) {
    std::cerr << "usage: many_leases --server URL | --etcd URL [--leases N] [--transports K] [--timeout S]"
                 " [--hold S]\n";
    return 2;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  auto registry = std::make_shared<leasehold::module_registry>();
  registry->add({"idle", /*default_leader_only*/ true,
                 [](caf::actor_system& s, const leasehold::module_context&) {
                   return s.spawn(idle_module);
                 },
                 nullptr});

  // Agent default timings: 1,000 leases renewed every 2 s is 500 PUT/s.
  leasehold::election_timings timings;
  leasehold::connection_config conn;
  conn.server = opt.server;
  conn = leasehold::bounded_by(conn, timings);

  std::atomic<int> leading{0};
  leasehold::event_sink sink = [&leading](const leasehold::runtime_event& e) {
    if (e.type == leasehold::event_type::term_acquired)
      ++leading;
    else if (e.type == leasehold::event_type::term_lost)
      --leading;
  };

  long rss_before = proc_status("VmRSS:");
  std::vector<leasehold::lease_transport_actor> pool;
  leasehold::etcd_config ec;
  ec.endpoints = {opt.server};
  ec.http = conn;
  for (int i = 0; i < opt.transports; ++i)
    pool.push_back(opt.etcd ? leasehold::spawn_etcd_transport(sys, ec)
                            : leasehold::spawn_http_transport(sys, conn));

  auto start = std::chrono::steady_clock::now();
  std::vector<leasehold::runner_actor> runners;
  for (int i = 0; i < opt.leases; ++i) {
    leasehold::runner_options o;
    o.identity = "many-leases";
    o.lease = {"default", "bench-lease-" + std::to_string(i)};
    o.timings = timings;
    o.transport = pool[static_cast<size_t>(i % opt.transports)];
    o.backend.server_expiry = opt.etcd;
    o.registry = registry;
    leasehold::module_spec m;
    m.name = "idle";
    m.type = "idle";
    o.modules.modules = {m};
    o.events = sink;
    auto spawned = leasehold::spawn_runner(sys, o);
    if (!spawned.errors.empty()) {
      std::cerr << "spawn_runner: " << spawned.errors.front() << "\n";
      return 1;
    }
    runners.push_back(spawned.runner);
  }

  auto deadline = start + std::chrono::seconds(opt.timeout_s);
  while (leading.load() < opt.leases && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  auto all_led_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  int reached = leading.load();
  long rss_after = proc_status("VmRSS:");
  long threads = proc_status("Threads:");

  double cpu0 = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(opt.hold_s));
  double hold_cpu = cpu_seconds() - cpu0;
  int held = leading.load();

  // Graceful stop of every runner at once, bounded.
  caf::scoped_actor self{sys};
  for (auto& r : runners)
    self->send(r, leasehold::shutdown_atom::value);
  int confirmed = 0;
  bool timed_out = false;
  for (size_t i = 0; i < runners.size() && !timed_out; ++i)
    self->receive([&](bool) { ++confirmed; },
                  caf::after(std::chrono::seconds(10)) >> [&] { timed_out = true; });
  for (auto& t : pool)
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  for (auto& r : runners)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);

  std::printf("{\"leases\":%d,\"transports\":%d,\"leaders_reached\":%d,\"all_led_ms\":%lld,"
              "\"leaders_after_hold\":%d,\"rss_before_kib\":%ld,\"rss_after_kib\":%ld,"
              "\"kib_per_election\":%.2f,\"hold_s\":%d,\"hold_cpu_s\":%.3f,"
              "\"released\":%d,\"backend\":\"%s\",\"threads\":%ld}\n",
              opt.leases, opt.transports, reached, static_cast<long long>(all_led_ms), held,
              rss_before, rss_after,
              static_cast<double>(rss_after - rss_before) / opt.leases, opt.hold_s, hold_cpu,
              confirmed, opt.etcd ? "etcd" : "kubernetes", threads);
  std::fflush(stdout);
  return reached == opt.leases ? 0 : 1;
}
