#include "cmd/leasehold/process_metrics.hpp"

#include "transport/transport_pool.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace leasehold::agent {

namespace {

/// The fields of /proc/self/stat after the command name (which may hold
/// spaces and parentheses: it ends at the last ')'). fields[0] is field 3.
std::vector<std::string> stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> out;
  for (std::string f; rest >> f;)
    out.push_back(f);
  return out;
}

/// The boot time (btime in /proc/stat), seconds since the epoch; 0 if unknown.
long long boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("btime ", 0) == 0)
      return std::stoll(line.substr(6));
  return 0;
}

std::int64_t count_open_fds() {
  std::int64_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (auto* e = readdir(d))
      n += e->d_name[0] != '.';
    closedir(d);
    --n;   // the directory stream's own descriptor
  }
  return n;
}

void gauge(std::ostringstream& out, const char* name, const char* type, const char* help,
           double v) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << v << '\n';
}

} // namespace

std::optional<process_sample> sample_process() {
  // Fields (man 5 proc): utime 14, stime 15, starttime 22, vsize 23, rss 24.
  auto f = stat_fields();
  if (f.size() < 22)
    return std::nullopt;
  auto field = [&](int n) { return std::stod(f[static_cast<size_t>(n - 3)]); };
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  process_sample s;
  s.cpu_seconds = (field(14) + field(15)) / ticks;
  s.start_time_seconds = static_cast<double>(boot_time()) + field(22) / ticks;
  s.virtual_bytes = static_cast<std::int64_t>(field(23));
  s.resident_bytes = static_cast<std::int64_t>(field(24)) * sysconf(_SC_PAGESIZE);
  s.open_fds = count_open_fds();
  s.threads = static_cast<std::int64_t>(field(20));   // num_threads
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    s.max_fds = lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<std::int64_t>(lim.rlim_cur);
  return s;
}

std::string render_process_metrics(const process_sample& s) {
  std::ostringstream out;
  out.precision(15);
  gauge(out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
        s.cpu_seconds);
  gauge(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
        s.resident_bytes);
  gauge(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
        s.virtual_bytes);
  gauge(out, "process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds);
  gauge(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.", s.max_fds);
  gauge(out, "process_start_time_seconds", "gauge",
        "Start time of the process since unix epoch in seconds.", s.start_time_seconds);
  gauge(out, "process_threads", "gauge", "Number of threads of the process.", s.threads);
  auto c = current_transport_census();
  gauge(out, "leasehold_transport_pools", "gauge", "Lease transports (dispatchers) running.",
        c.pools);
  gauge(out, "leasehold_transport_workers", "gauge",
        "Transport workers: one thread and one keep-alive connection each.",
        c.workers);
  gauge(out, "leasehold_transport_busy_workers", "gauge", "Transport workers serving a request.",
        c.busy_workers);
  gauge(out, "leasehold_transport_queued_requests", "gauge",
        "Lease API requests waiting for a transport worker.", c.queued);
  gauge(out, "leasehold_watch_streams", "gauge",
        "Lease watch streams open or reconnecting: one thread and one stream each.",
        c.watch_streams);
  gauge(out, "leasehold_transport_requests_total", "counter",
        "Lease API requests answered by a transport worker.", c.requests);
  gauge(out, "leasehold_transport_expired_total", "counter",
        "Lease API requests answered timeout, unsent, after waiting too long for a worker.",
        c.expired);
  gauge(out, "leasehold_transport_batches_total", "counter",
        "Batch calls of a transport worker: 2 or more queued reads, creates or renews at "
        "once (on etcd one txn).",
        c.batches);
  gauge(out, "leasehold_transport_batched_requests_total", "counter",
        "Lease API requests answered by batch calls.", c.batched);
  return out.str();
}

nlohmann::json transport_state_json() {
  auto c = current_transport_census();
  auto p = sample_process();
  return {{"pools", c.pools},           {"workers", c.workers},
          {"busy_workers", c.busy_workers}, {"queued", c.queued},
          {"watch_streams", c.watch_streams}, {"requests", c.requests},
          {"expired", c.expired},       {"batches", c.batches},
          {"batched", c.batched},       {"threads", p ? p->threads : 0}};
}

} // namespace leasehold::agent
