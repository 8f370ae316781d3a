#include "cmd/leasehold/agent.hpp"

#include <unistd.h>

#include <csignal>
#include <ostream>
#include <thread>

#include <caf/all.hpp>

#include "cmd/leasehold/builtin_registry.hpp"
#include "cmd/leasehold/config_watcher.hpp"
#include "cmd/leasehold/connection_check.hpp"
#include "cmd/leasehold/event_poster.hpp"
#include "cmd/leasehold/health_server.hpp"
#include "cmd/leasehold/journal.hpp"
#include "cmd/leasehold/json_log.hpp"
#include "cmd/leasehold/metrics.hpp"
#include "cmd/leasehold/probes.hpp"
#include "cmd/leasehold/signals.hpp"
#include "include/leasehold/runtime.hpp"
#include "transport/kube_config.hpp"

namespace leasehold::agent {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::chrono::milliseconds config_poll_interval{1000};
constexpr std::chrono::milliseconds event_flush_bound{300};
constexpr std::chrono::milliseconds status_timeout{2000};

std::int64_t to_ms(caf::timespan d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

ojson errors_json(const std::vector<std::string>& errs) {
  ojson a = ojson::array();
  for (auto& e : errs)
    a.push_back(e);
  return a;
}

/// Applies a changed config file to the running agent: only `modules` is
/// live; other changed fields are reported as needing a restart.
class config_reloader {
public:
  config_reloader(caf::actor_system& sys, caf::actor runner, const module_registry& reg,
                  const run_options& opts, agent_config running, json_logger& log)
    : sys_(sys), runner_(std::move(runner)), reg_(reg), opts_(opts),
      running_(std::move(running)), log_(log) {}

  void on_change(const std::string& content) {
    agent_config next;
    auto errs = parse_config(content, reg_, opts_.overrides, config_environment::from_process(),
                             next);
    if (!errs.empty()) {
      log_.log(log_level::error, "config file rejected, the running config stays",
               {{"path", opts_.config_path}, {"errors", errors_json(errs)}});
      return;
    }
    if (next.ns_defaulted)
      next.ns = running_.ns;   // resolved from the connection at start-up
    auto changed = running_.restart_fields_changed(next);
    if (!changed.empty())
      log_.log(log_level::warn, "config fields changed that only take effect after a restart",
               {{"path", opts_.config_path}, {"fields", errors_json(changed)}});
    if (next.modules.modules == running_.modules.modules)
      return;
    auto result = apply_config(sys_, runner_, next.modules);
    if (!result.accepted) {
      log_.log(log_level::error, "config file rejected by the runner, the running config stays",
               {{"path", opts_.config_path}, {"errors", errors_json(result.errors)}});
      return;
    }
    running_.modules = next.modules;
    log_.log(log_level::info, "config file reloaded",
             {{"path", opts_.config_path}, {"modules", running_.modules.modules.size()}});
  }

private:
  caf::actor_system& sys_;
  caf::actor runner_;
  const module_registry& reg_;
  const run_options& opts_;
  agent_config running_;
  json_logger& log_;
};

/// After the first signal the process ends by `deadline` whatever happens
/// (a transport blocked in a request must not hold the exit).
void exit_by(std::chrono::steady_clock::time_point deadline, json_logger& log) {
  std::thread([deadline, &log] {
    std::this_thread::sleep_until(deadline);
    log.log(log_level::warn, "shutdown took too long, exiting now");
    _exit(0);
  }).detach();
}

struct connection_setup {
  connection_config conn;
  std::string ns;
  std::vector<std::string> errors;
};

connection_setup load_connection(const agent_config& cfg) {
  connection_setup out;
  auto r = load_connection_config(cfg.server, cfg.kubeconfig);
  if (!r.ok()) {
    out.errors.push_back(r.error);
    return out;
  }
  out.conn = *r.config;
  out.ns = r.ns;
  out.errors = check_connection_files(out.conn);
  return out;
}

} // namespace

int validate_file(const run_options& opts, std::ostream& out, std::ostream& err) {
  auto modules = make_builtin_modules();
  agent_config cfg;
  auto errs = load_config(opts.config_path, *modules.registry, opts.overrides,
                          config_environment::from_process(), cfg);
  for (auto& e : errs)
    err << e << '\n';
  if (!errs.empty()) {
    err << opts.config_path << ": " << errs.size() << (errs.size() == 1 ? " error" : " errors")
        << '\n';
    return 1;
  }
  out << opts.config_path << ": ok (" << cfg.modules.modules.size() << " modules, lease "
      << cfg.ns << "/" << cfg.lease_name << ", identity " << cfg.identity << ")\n";
  return 0;
}

int run(const run_options& opts) {
  auto env = config_environment::from_process();
  auto modules = make_builtin_modules();
  agent_config cfg;
  auto errs = load_config(opts.config_path, *modules.registry, opts.overrides, env, cfg);
  if (!errs.empty()) {
    json_logger boot(log_level::info, env.pod_name.empty() ? env.hostname : env.pod_name, "");
    for (auto& e : errs)
      boot.log(log_level::error, "invalid config", {{"path", opts.config_path}, {"error", e}});
    return 1;
  }
  bool on_etcd = cfg.backend == "etcd";
  connection_setup conn;
  if (!on_etcd)
    conn = load_connection(cfg);
  else
    conn.errors = check_connection_files(cfg.etcd.http);
  if (cfg.ns_defaulted && !conn.ns.empty())
    cfg.ns = conn.ns;
  lease_key lease{cfg.ns, cfg.lease_name};
  json_logger log(*parse_log_level(cfg.log_level), cfg.identity, lease.to_string());
  if (!conn.errors.empty()) {
    for (auto& e : conn.errors)
      log.log(log_level::error, "cannot connect to the API server", {{"error", e}});
    return 1;
  }

  std::unique_ptr<journal> jrn;
  if (!cfg.journal.empty()) {
    jrn = std::make_unique<journal>(cfg.journal, cfg.identity);
    if (!jrn->ok()) {
      log.log(log_level::error, "cannot open the journal", {{"path", cfg.journal}});
      return 1;
    }
  }

  // The sinks' targets outlive the actor system; every actor handle is
  // declared after it (a handle kept past the system would keep a detached
  // transport alive and block the system's destructor).
  metrics counters;
  api_health api;
  caf::actor_system_config sys_cfg;
  tune_for_idle(sys_cfg);
  caf::actor_system sys{sys_cfg};
  caf::actor runner;
  health_sources sources;
  sources.timings = cfg.timings;
  sources.counters = &counters;
  sources.api = &api;
  sources.leader = [view = modules.leader](const std::string& path) {
    return view->respond(path);
  };
  sources.status = [&sys, &runner]() { return status(sys, runner, status_timeout); };
  health_server health(sources);
  int health_port = health.bind(cfg.health_addr);
  if (health_port < 0) {
    log.log(log_level::error, "cannot start the health server", {{"error", health.error()}});
    return 1;
  }

  conn.conn.identity = cfg.identity;
  auto event_conn = conn.conn;
  event_conn.user_agent = "leasehold-events/" LEASEHOLD_VERSION;
  event_poster_options poster_opts;
  poster_opts.request_timeout
    = std::chrono::duration_cast<caf::timespan>(max_request_time(event_conn))
      + std::chrono::milliseconds(500);
  // etcd keeps no Events: the poster then talks to an etcd transport, whose
  // post_event is a no-op.
  auto poster = spawn_event_poster(sys, on_etcd ? spawn_etcd_transport(sys, cfg.etcd)
                                                 : spawn_http_transport(sys, event_conn),
                                   poster_opts);

  std::vector<event_sink> sinks{log.sink(), counters.sink(), api.sink(),
                                event_poster_sink(poster, lease)};
  if (jrn)
    sinks.push_back(jrn->sink());
  runner_options ropts;
  ropts.identity = cfg.identity;
  ropts.lease = lease;
  ropts.timings = cfg.timings;
  if (on_etcd)
    use_etcd(sys, ropts, cfg.etcd);
  else
    ropts.transport = spawn_http_transport(sys, bounded_by(conn.conn, cfg.timings));
  ropts.registry = modules.registry;
  ropts.modules = cfg.modules;
  ropts.events = fan_out(std::move(sinks));
  auto spawned = spawn_runner(sys, ropts);
  if (!spawned.errors.empty()) {
    for (auto& e : spawned.errors)
      log.log(log_level::error, "invalid config", {{"path", opts.config_path}, {"error", e}});
    caf::anon_send_exit(poster, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ropts.transport, caf::exit_reason::user_shutdown);
    return 1;
  }
  runner = spawned.runner;
  health.serve();
  log.log(log_level::info, "agent started",
          {{"version", LEASEHOLD_VERSION},
           {"backend", cfg.backend},
           {"server", on_etcd ? cfg.etcd.endpoints.front() : conn.conn.server},
           {"health_addr", cfg.health_addr.substr(0, cfg.health_addr.rfind(':') + 1)
                             + std::to_string(health_port)},
           {"modules", cfg.modules.modules.size()},
           {"lease_duration_ms", to_ms(cfg.timings.lease_duration)},
           {"renew_deadline_ms", to_ms(cfg.timings.renew_deadline)},
           {"retry_period_ms", to_ms(cfg.timings.retry_period)},
           {"module_stop_timeout_ms", to_ms(cfg.timings.module_stop_timeout)}});

  config_reloader reloader(sys, runner, *modules.registry, opts, cfg, log);
  std::unique_ptr<config_watcher> watcher;
  if (auto text = read_text_file(opts.config_path))
    watcher = std::make_unique<config_watcher>(
      opts.config_path, *text, config_poll_interval,
      [&reloader](const std::string& content) { reloader.on_change(content); });

  start_signal_thread();
  int sig = wait_for_shutdown_signal();
  auto budget = cfg.timings.module_stop_timeout + std::chrono::seconds(2);
  exit_by(std::chrono::steady_clock::now()
            + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget)
            - std::chrono::milliseconds(100),
          log);
  log.log(log_level::info, "shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  if (watcher)
    watcher->stop();
  auto bound = cfg.timings.module_stop_timeout + cfg.timings.release_timeout
               + std::chrono::milliseconds(200);
  bool released = shutdown(sys, runner, bound);
  if (!released)
    log.log(log_level::warn, "the runner did not confirm the shutdown in time",
            {{"bound_ms", to_ms(bound)}});
  if (!flush_events(sys, poster, event_flush_bound))
    log.log(log_level::warn, "dropping Kubernetes Events that could not be posted in time");
  health.stop();
  caf::anon_send_exit(poster, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(ropts.transport, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  log.log(log_level::info, "stopped");
  return 0;
}

} // namespace leasehold::agent
