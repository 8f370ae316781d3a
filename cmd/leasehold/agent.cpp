#include "cmd/leasehold/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
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
#include "transport/thread_name.hpp"
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
                  const run_options& opts, config_environment env, agent_config running,
                  json_logger& log)
    : sys_(sys), runner_(std::move(runner)), reg_(reg), opts_(opts), env_(std::move(env)),
      running_(std::move(running)), log_(log) {}

  void on_change(const std::string& content) {
    agent_config next;
    auto errs = parse_config(content, reg_, opts_.overrides, env_, next);
    if (!errs.empty()) {
      log_.log(log_level::error, "config file rejected, the running config stays",
               {{"path", opts_.config_path}, {"errors", errors_json(errs)}});
      rejected_ = true;
      return;
    }
    if (next.ns_defaulted)
      next.ns = running_.ns;   // resolved from the connection at start-up
    auto changed = running_.restart_fields_changed(next);
    if (!changed.empty())
      log_.log(log_level::warn, "config fields changed that only take effect after a restart",
               {{"path", opts_.config_path}, {"fields", errors_json(changed)}});
    if (next.modules.modules == running_.modules.modules) {
      accepted();
      return;
    }
    auto result = apply_config(sys_, runner_, next.modules);
    if (!result.accepted) {
      log_.log(log_level::error, "config file rejected by the runner, the running config stays",
               {{"path", opts_.config_path}, {"errors", errors_json(result.errors)}});
      rejected_ = true;
      return;
    }
    running_.modules = next.modules;
    accepted();
    log_.log(log_level::info, "config file reloaded",
             {{"path", opts_.config_path}, {"modules", running_.modules.modules.size()}});
  }

private:
  /// A good file after a rejected one: said once.
  void accepted() {
    if (!rejected_)
      return;
    rejected_ = false;
    log_.log(log_level::info, "config accepted", {{"path", opts_.config_path}});
  }

  caf::actor_system& sys_;
  caf::actor runner_;
  const module_registry& reg_;
  const run_options& opts_;
  config_environment env_;   // the start's: the default identity stays
  agent_config running_;
  json_logger& log_;
  bool rejected_ = false;   // the last file read was rejected
};

/// After the first signal the process ends by `deadline` whatever happens
/// (a transport blocked in a request must not hold the exit).
void exit_by(std::chrono::steady_clock::time_point deadline, json_logger& log) {
  std::thread([deadline, &log] {
    name_this_thread("lh.exit-by");
    std::this_thread::sleep_until(deadline);
    log.log(log_level::warn, "shutdown took too long, exiting now");
    _exit(0);
  }).detach();
}

/// A file the run appends to: it exists and is writable, or its directory is.
std::string writable_error(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0)
    return access(path.c_str(), W_OK) == 0 ? "" : "not writable";
  auto slash = path.rfind('/');
  auto dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash + 1);
  return access(dir.c_str(), W_OK) == 0 ? "" : "directory " + dir + " does not exist or is not writable";
}

/// The agent's process-wide settings as `run` uses them: the config (file,
/// flags, environment, defaults), the connection to the API server with
/// every file it names checked, the namespace the run uses, the journal.
/// `validate` prints the same; there is no other copy of these steps.
struct resolved_run {
  agent_config cfg;
  connection_config conn;
  std::vector<std::string> errors;
};

resolved_run resolve_run(const run_options& opts, const config_environment& env,
                         const module_registry& reg) {
  resolved_run out;
  out.errors = load_config(opts.config_path, reg, opts.overrides, env, out.cfg);
  if (!out.errors.empty())
    return out;
  auto& cfg = out.cfg;
  if (cfg.backend == "etcd") {
    out.errors = check_connection_files(cfg.etcd.http);
  } else if (auto r = load_connection_config(cfg.server, cfg.kubeconfig); !r.ok()) {
    out.errors.push_back(r.error);
  } else {
    out.conn = *r.config;
    out.errors = check_connection_files(out.conn);
    if (cfg.ns_defaulted && !r.ns.empty())
      cfg.ns = r.ns;
  }
  if (!cfg.journal.empty())
    if (auto e = writable_error(cfg.journal); !e.empty())
      out.errors.push_back("journal: " + cfg.journal + ": " + e);
  out.conn.identity = cfg.identity;
  return out;
}

/// Set when the API rejects the lease itself as invalid (422/400): no retry
/// can fix that, so the agent stops and exits 1.
std::atomic<bool> rejected_by_api{false};

event_sink fatal_on_invalid(json_logger& log) {
  return [&log](const runtime_event& e) {
    if (e.type != event_type::api_error || e.error.kind != error_kind::invalid
        || rejected_by_api.exchange(true))
      return;
    log.log(log_level::error, "the API server rejects the lease as invalid: fix the config",
            {{"error", e.error.describe()}});
    kill(getpid(), SIGTERM);   // the signal thread starts the ordinary shutdown
  };
}

} // namespace

int validate_file(const run_options& opts, std::ostream& out, std::ostream& err) {
  auto modules = make_builtin_modules();
  auto name = opts.config_path.empty() ? std::string("(no config file)") : opts.config_path;
  auto r = resolve_run(opts, config_environment::from_process(), *modules.registry);
  for (auto& e : r.errors)
    err << e << '\n';
  if (!r.errors.empty()) {
    err << name << ": " << r.errors.size() << (r.errors.size() == 1 ? " error" : " errors") << '\n';
    return 1;
  }
  out << name << ": ok (" << r.cfg.modules.modules.size() << " modules, lease " << r.cfg.ns << "/"
      << r.cfg.lease_name << ", identity " << r.cfg.identity << ", "
      << (r.cfg.backend == "etcd" ? "etcd " + r.cfg.etcd.endpoints.front() : "server " + r.conn.server)
      << ")\n";
  return 0;
}

int run(const run_options& opts) {
  auto env = config_environment::from_process();
  auto modules = make_builtin_modules();
  auto resolved = resolve_run(opts, env, *modules.registry);
  auto& cfg = resolved.cfg;
  if (!resolved.errors.empty()) {
    json_logger boot(log_level::info, cfg.identity.empty() ? default_identity(env) : cfg.identity,
                     "");
    for (auto& e : resolved.errors)
      boot.log(log_level::error, "invalid config", {{"path", opts.config_path}, {"error", e}});
    return 1;
  }
  bool on_etcd = cfg.backend == "etcd";
  lease_key lease{cfg.ns, cfg.lease_name};
  json_logger log(*parse_log_level(cfg.log_level), cfg.identity, lease.to_string());
  auto& conn = resolved.conn;

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

  auto event_conn = conn;
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
                                event_poster_sink(poster, lease), fatal_on_invalid(log)};
  if (jrn)
    sinks.push_back(jrn->sink());
  runner_options ropts;
  ropts.identity = cfg.identity;
  ropts.lease = lease;
  ropts.timings = cfg.timings;
  ropts.watch = cfg.watch;
  if (on_etcd)
    use_etcd(sys, ropts, cfg.etcd);
  else
    ropts.transport = spawn_http_transport(sys, bounded_by(conn, cfg.timings));
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
           {"server", on_etcd ? cfg.etcd.endpoints.front() : conn.server},
           {"health_addr", cfg.health_addr.substr(0, cfg.health_addr.rfind(':') + 1)
                             + std::to_string(health_port)},
           {"modules", cfg.modules.modules.size()},
           {"lease_duration_ms", to_ms(cfg.timings.lease_duration)},
           {"renew_deadline_ms", to_ms(cfg.timings.renew_deadline)},
           {"retry_period_ms", to_ms(cfg.timings.retry_period)},
           {"module_stop_timeout_ms", to_ms(cfg.timings.module_stop_timeout)}});

  config_reloader reloader(sys, runner, *modules.registry, opts, env, cfg, log);
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
  return rejected_by_api ? 1 : 0;
}

} // namespace leasehold::agent
