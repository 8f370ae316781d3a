// many_leases: one process, N independent leases (N runners, one elector
// each), sharing one transport (its pool of --workers workers), each with a
// trivial leader-only module.
//
//   many_leases --server http://127.0.0.1:PORT [--leases 1000] [--timeout 60] [--hold 5]
//               [--workers 4] [--transports 1] [--watch 1]
//               [--scheduler stealing|sharing] [--scheduler-threads 2]
//   many_leases --backend etcd --server http://127.0.0.1:2379[,http://...] ...
//   many_leases --etcd http://127.0.0.1:2379 ...      (the same)
//   many_leases ... --session auto|on|off    (Kubernetes: bind the leases to one
//                                             session Lease; auto: on when more
//                                             than one lease)
//   many_leases ... --identity A --stay 1    (after the report, hold on until
//                                             SIGTERM/SIGINT, then release all)
//   many_leases ... --identity B --follow 5  (a second process: 3 s to settle, then
//                                             5 s as a follower, reported; then it
//                                             waits to lead)
// Reports one JSON line on stdout: described at struct options below.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/runtime.hpp"
#include "transport/kube/kube_session.hpp"
#include "transport/transport_pool.hpp"

using namespace std::chrono_literals;

/// --follow: the first reads and the watch's start are not the steady state.
constexpr auto follow_settle = 3s;

// Reports, as one JSON line on stdout: leaders reached, the time until all
// leases were led, RSS before the runners and after every lease is led, RSS
// per election, and over the --hold seconds while holding every lease: CPU
// seconds, terms lost, renewals, CPU per renewal, transport requests per
// second; the process's threads at the end of the hold; the wall-clock time
// (ms since the epoch) at which the last lease was led, to measure a
// takeover against the moment another process was killed or stopped.
// --follow S prints one line before: what the process sent and led while
// following for S seconds.
namespace {

struct options {
  std::string server;
  std::string backend = "kubernetes";
  int leases = 1000;
  int transports = 1;
  int workers = 4;
  int timeout_s = 60;
  int hold_s = 5;
  int follow_s = 0;     // > 0: report this long as a follower before leading
  bool stay = false;    // after the report, hold every lease until a signal
  std::string identity = "many-leases";
  bool watch = true;
  std::string scheduler = "stealing";   // CAF's default; "sharing": tune_for_idle()
  int scheduler_threads = 2;
  std::string session = "auto";   // resolved by parse() to "on" or "off"
};

/// A number field of /proc/self/status ("VmRSS:", "Threads:"); -1 if absent.
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

long rss_kib() { return proc_status("VmRSS:"); }

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
    else if (k == "--backend") o.backend = v;
    else if (k == "--etcd") { o.server = v; o.backend = "etcd"; }   // --backend etcd --server v
    else if (k == "--leases") o.leases = std::stoi(v);
    else if (k == "--transports") o.transports = std::stoi(v);
    else if (k == "--workers") o.workers = std::stoi(v);
    else if (k == "--watch") o.watch = v != "0";
    else if (k == "--scheduler") o.scheduler = v;
    else if (k == "--scheduler-threads") o.scheduler_threads = std::stoi(v);
    else if (k == "--timeout") o.timeout_s = std::stoi(v);
    else if (k == "--hold") o.hold_s = std::stoi(v);
    else if (k == "--follow") o.follow_s = std::stoi(v);
    else if (k == "--stay") o.stay = v != "0";
    else if (k == "--identity") o.identity = v;
    else if (k == "--session") o.session = v;
    else return false;
  }
  // One session per process: its Lease is named after the identity alone.
  if (o.session == "auto")
    o.session = o.backend == "kubernetes" && o.leases > 1 ? "on" : "off";
  if (o.session == "on" && (o.backend != "kubernetes" || o.transports != 1))
    return false;
  return !o.server.empty() && o.leases > 0 && o.transports > 0 && o.workers > 0
         && (o.backend == "kubernetes" || o.backend == "etcd")
         && (o.scheduler == "stealing" || o.scheduler == "sharing")
         && (o.session == "on" || o.session == "off") && (argc % 2) == 1;
}

} // namespace

int main(int argc, char** argv) {
  options opt;
  if (!parse(argc, argv, opt)) {
    std::cerr << "usage: many_leases --server URL[,URL...] [--backend kubernetes|etcd]"
                 " [--leases N] [--transports K] [--workers W] [--timeout S] [--hold S]"
                 " [--watch 0|1] [--scheduler stealing|sharing] [--scheduler-threads N]"
                 " [--identity NAME] [--follow S] [--stay 0|1]"
                 " [--session auto|on|off (on: Kubernetes, one transport)]\n";
    return 2;
  }
  // SIGTERM and SIGINT are taken by sigwait (--stay), in every thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (opt.stay)
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  caf::actor_system_config cfg;
  if (opt.scheduler == "sharing")
    leasehold::tune_for_idle(cfg, static_cast<std::size_t>(opt.scheduler_threads));
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
  conn.workers = static_cast<std::size_t>(opt.workers);
  conn = leasehold::bounded_by(conn, timings);
  leasehold::etcd_config etcd;
  if (opt.backend == "etcd") {
    for (std::size_t at = 0; at != std::string::npos;) {
      auto comma = opt.server.find(',', at);
      etcd.endpoints.push_back(opt.server.substr(at, comma == std::string::npos ? comma : comma - at));
      at = comma == std::string::npos ? comma : comma + 1;
    }
    etcd.http = conn;
  }

  std::atomic<int> leading{0}, lost{0}, released{0};
  std::atomic<long> renewals{0};
  // LEASEHOLD_BENCH_TRACE=1: every event but renewals on stderr, stamped with
  // the wall clock (seconds since the epoch: two processes' traces line up),
  // to find why a lease was slow.
  const bool trace = std::getenv("LEASEHOLD_BENCH_TRACE") != nullptr;
  if (trace)   // buffered: a write per event slowed a 10,000-lease stop severalfold
    std::setvbuf(stderr, nullptr, _IOFBF, 1 << 20);
  leasehold::event_sink sink = [&](const leasehold::runtime_event& e) {
    if (trace && e.type != leasehold::event_type::renewed)
      std::fprintf(stderr, "%.3f %s %s %s %s %s\n",
                   std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
                   e.lease.c_str(), leasehold::to_string(e.type), e.holder.c_str(), e.reason.c_str(),
                   e.error.kind == leasehold::error_kind::none ? e.detail.c_str()
                                                              : e.error.describe().c_str());
    if (e.type == leasehold::event_type::term_acquired)
      ++leading;
    else if (e.type == leasehold::event_type::term_lost) {
      --leading;
      ++lost;
    } else if (e.type == leasehold::event_type::renewed)
      ++renewals;
    else if (e.type == leasehold::event_type::lease_released)
      ++released;
  };

  long rss_before = rss_kib();
  std::vector<leasehold::lease_backend> pool;   // each with its store's traits
  for (int i = 0; i < opt.transports; ++i)
    pool.push_back(opt.backend == "etcd" ? leasehold::spawn_etcd_backend(sys, etcd)
                                         : leasehold::spawn_http_backend(sys, conn));
  if (opt.session == "on") {
    leasehold::session_options so;
    so.identity = opt.identity;
    so.timings = timings;
    so.bind = true;
    pool[0] = leasehold::bind_to_session(sys, pool[0], so);
  }

  auto start = std::chrono::steady_clock::now();
  std::vector<leasehold::runner_actor> runners;
  for (int i = 0; i < opt.leases; ++i) {
    leasehold::runner_options o;
    o.identity = opt.identity;
    o.lease = {"default", "bench-lease-" + std::to_string(i)};
    o.timings = timings;
    o.backend = pool[static_cast<size_t>(i % opt.transports)];
    o.watch = opt.watch;
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

  if (opt.follow_s > 0) {
    // Steady state: after each elector's first read and the watch's start.
    std::this_thread::sleep_for(follow_settle);
    auto requests = leasehold::current_transport_census().requests;
    double cpu = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(opt.follow_s));
    auto census = leasehold::current_transport_census();
    std::printf("{\"phase\":\"following\",\"follow_s\":%d,\"leading\":%d,"
                "\"requests_per_s\":%.2f,\"cpu_s\":%.3f,\"threads\":%ld,\"watch_streams\":%lld}\n",
                opt.follow_s, leading.load(),
                static_cast<double>(census.requests - requests) / opt.follow_s, cpu_seconds() - cpu,
                proc_status("Threads:"), static_cast<long long>(census.watch_streams));
    std::fflush(stdout);
    start = std::chrono::steady_clock::now();
  }
  auto deadline = start + std::chrono::seconds(opt.timeout_s);
  while (leading.load() < opt.leases && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  auto all_led_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  auto all_led_epoch_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  int reached = leading.load();
  long rss_after = rss_kib();

  int lost0 = lost.load();
  long renewals0 = renewals.load();
  auto census0 = leasehold::current_transport_census();
  double cpu0 = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(opt.hold_s));
  double hold_cpu = cpu_seconds() - cpu0;
  int held = leading.load();
  int hold_lost = lost.load() - lost0;
  long hold_renewals = renewals.load() - renewals0;
  auto census = leasehold::current_transport_census();
  double requests_per_s = static_cast<double>(census.requests - census0.requests) / opt.hold_s;
  // How the hold's requests went: in batches (how many, of how many
  // requests), the rest alone.
  auto batches = census.batches - census0.batches;
  auto batched = census.batched - census0.batched;
  long threads = proc_status("Threads:");
  auto report = [&](int released_count) {
    std::printf("{\"backend\":\"%s\",\"session\":\"%s\",\"scheduler\":\"%s\",\"leases\":%d,"
                "\"transports\":%d,\"workers\":%d,"
                "\"leaders_reached\":%d,\"all_led_ms\":%lld,\"all_led_epoch_ms\":%lld,"
                "\"leaders_after_hold\":%d,\"terms_lost_in_hold\":%d,\"rss_before_kib\":%ld,"
                "\"rss_after_kib\":%ld,\"kib_per_election\":%.2f,\"hold_s\":%d,"
                "\"hold_cpu_s\":%.3f,\"renewals_in_hold\":%ld,\"cpu_ms_per_renewal\":%.4f,"
                "\"requests_per_s\":%.1f,\"threads\":%ld,\"transport_workers\":%lld,"
                "\"watch_streams\":%lld,\"expired_in_queue\":%llu,\"echoes_dropped\":%llu,"
                "\"batches_in_hold\":%llu,\"batched_in_hold\":%llu,\"released\":%d}\n",
                opt.backend.c_str(), opt.session.c_str(), opt.scheduler.c_str(), opt.leases,
                opt.transports, opt.workers,
                reached, static_cast<long long>(all_led_ms), static_cast<long long>(all_led_epoch_ms),
                held, hold_lost, rss_before, rss_after,
                static_cast<double>(rss_after - rss_before) / opt.leases, opt.hold_s, hold_cpu,
                hold_renewals, hold_renewals > 0 ? hold_cpu * 1000.0 / hold_renewals : 0.0,
                requests_per_s, threads, static_cast<long long>(census.workers),
                static_cast<long long>(census.watch_streams),
                static_cast<unsigned long long>(census.expired),
                static_cast<unsigned long long>(census.echoes_dropped),
                static_cast<unsigned long long>(batches), static_cast<unsigned long long>(batched),
                released_count);
    std::fflush(stdout);
  };
  if (opt.stay) {   // report now (released: -1), hold on until told to stop
    report(-1);
    int sig = 0;
    sigwait(&stop_signals, &sig);
  }
  auto stop_begun = std::chrono::steady_clock::now();

  // Graceful stop of every runner at once, bounded.
  caf::scoped_actor self{sys};
  for (auto& r : runners)
    self->send(r, leasehold::shutdown_atom::value);
  int confirmed = 0;
  bool timed_out = false;
  for (size_t i = 0; i < runners.size() && !timed_out; ++i)
    self->receive([&](bool) { ++confirmed; },
                  caf::after(std::chrono::seconds(10)) >> [&] { timed_out = true; });
  for (auto& b : pool)
    caf::anon_send_exit(b.transport, caf::exit_reason::user_shutdown);
  for (auto& r : runners)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);

  if (opt.stay) {   // how many runners stopped, how many released their lease (answered
                    // before their elector gave up), how long after the signal
    auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - stop_begun).count();
    std::printf("{\"phase\":\"stopped\",\"stopped\":%d,\"released\":%d,\"stop_ms\":%lld}\n",
                confirmed, released.load(), static_cast<long long>(stop_ms));
    std::fflush(stdout);
  } else {
    report(released.load());
  }
  return reached == opt.leases ? 0 : 1;
}
