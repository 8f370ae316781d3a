#include "cmd/leasehold/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <csignal>
#include <ostream>
#include <thread>

#include <caf/all.hpp>

#include "transport/etcd/etcd_evidence.hpp"
#include "transport/kube/kube_session.hpp"
#include "cmd/leasehold/builtin_registry.hpp"
#include "cmd/leasehold/config_watcher.hpp"
#include "cmd/leasehold/connection_check.hpp"
#include "cmd/leasehold/event_poster.hpp"
#include "cmd/leasehold/health_server.hpp"
#include "cmd/leasehold/journal.hpp"
#include "cmd/leasehold/lease_set.hpp"
#include "cmd/leasehold/json_log.hpp"
#include "cmd/leasehold/metrics.hpp"
#include "cmd/leasehold/probes.hpp"
#include "cmd/leasehold/signals.hpp"
#include "cmd/leasehold/yield_route.hpp"
#include "leasehold/blocking_request.hpp"
#include "leasehold/runtime.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/thread_name.hpp"
#include "transport/http/http_client.hpp"
#include "transport/kube/kube_config.hpp"

namespace leasehold::agent {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::chrono::milliseconds config_poll_interval{1000};
constexpr std::chrono::milliseconds event_flush_bound{300};
constexpr std::chrono::milliseconds status_timeout{2000};

std::int64_t to_ms(caf::timespan d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

/// Applies a changed config file to the running agent: only `modules` is
/// live (each lease's runner gets its modules); other changed fields, and
/// modules moved to other leases or groups, are reported as needing a
/// restart.
class config_reloader {
public:
  config_reloader(caf::actor_system& sys, lease_set& leases, const module_registry& reg,
                  const run_options& opts, config_environment env, agent_config running,
                  json_logger& log)
    : sys_(sys), leases_(leases), reg_(reg), opts_(opts), env_(std::move(env)),
      running_(std::move(running)), log_(log) {}

  void on_change(const std::string& content) {
    agent_config next;
    auto errs = parse_config(content, reg_, opts_.overrides, env_, next);
    if (!errs.empty()) {
      log_.log(log_level::error, "config file rejected, the running config stays",
               {{"path", opts_.config_path}, {"errors", errs}});
      rejected_ = true;
      return;
    }
    if (next.ns_defaulted)
      next.ns = running_.ns;   // resolved from the connection at start-up
    auto changed = running_.restart_fields_changed(next);
    if (!changed.empty())
      log_.log(log_level::warn, "config fields changed that only take effect after a restart",
               {{"path", opts_.config_path}, {"fields", changed}});
    if (next.modules.modules == running_.modules.modules) {
      accepted();
      return;
    }
    if (!running_.leases.same_leases(next.leases)) {
      log_.log(log_level::error,
               "config file changes which leases or balance groups the modules run under, which "
               "takes a restart; the running modules stay",
               {{"path", opts_.config_path}});
      rejected_ = true;
      return;
    }
    auto refused = leases_.apply(sys_, next.leases, std::chrono::seconds(5));
    if (!refused.empty()) {
      log_.log(log_level::error, "config file rejected by the runner, the running config stays",
               {{"path", opts_.config_path}, {"errors", refused}});
      rejected_ = true;
      return;
    }
    running_.modules = next.modules;
    running_.leases = next.leases;
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
  lease_set& leases_;
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

/// Every etcd endpoint, comma-joined (the agent tries each in turn).
std::string join_endpoints(const std::vector<std::string>& endpoints) {
  std::string out;
  for (auto& e : endpoints)
    out += (out.empty() ? "" : ",") + e;
  return out;
}

/// Where leader-only exec children's fence files go: fence_dir, else
/// $TMPDIR, else /tmp.
std::string effective_fence_dir(const agent_config& cfg) {
  if (!cfg.fence_dir.empty())
    return cfg.fence_dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

/// A start-up error when an enabled leader-only exec module could not get a
/// fence file (a read-only root has no writable /tmp): its child would run
/// with an empty LEASEHOLD_FENCE_FILE and never pass `fence check`.
std::string fence_dir_error(const agent_config& cfg) {
  bool needed = false;
  for (auto& m : cfg.modules.modules)
    needed = needed || (m.type == "exec" && m.leader_only && m.enabled);
  if (!needed)
    return "";
  auto dir = effective_fence_dir(cfg);
  std::string probe = dir + "/leasehold-fence-XXXXXX";
  if (::mkdtemp(probe.data()) != nullptr) {
    ::rmdir(probe.c_str());
    return "";
  }
  return "fence_dir: cannot create a fence file in \"" + dir + "\" (" + std::strerror(errno)
         + "): leader-only exec modules need a writable directory; set fence_dir, --fence-dir "
           "or LEASEHOLD_FENCE_DIR (deploy/ mounts a memory emptyDir at /run/leasehold)";
}

resolved_run resolve_run(const run_options& opts, const config_environment& env,
                         const module_registry& reg) {
  resolved_run out;
  out.errors = load_config(opts.config_path, reg, opts.overrides, env, out.cfg);
  if (!out.errors.empty())
    return out;
  auto& cfg = out.cfg;
  if (cfg.backend == "etcd") {
    out.errors = check_connection_files(cfg.etcd.http, etcd_file_names());
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
  if (auto e = fence_dir_error(cfg); !e.empty())
    out.errors.push_back(e);
  out.conn.identity = cfg.identity;
  return out;
}

/// etcd: why failover after a crash will take two lease durations, or ""
/// when it takes one. A follower can tell a key that ran out (its holder
/// died) from one an operator deleted or revoked only when a TTL reading of
/// 0 s left proves the holder past its renew deadline (ttl_tells_expiry);
/// otherwise it holds every key it takes after a vanish one more lease
/// duration. Safe either way, so a warning, not an error.
std::string etcd_failover_warning(const agent_config& cfg) {
  if (cfg.backend != "etcd")
    return "";
  auto& t = cfg.timings;
  auto ttl = std::chrono::seconds(std::max(1, duration_seconds(t.lease_duration)));
  if (ttl_tells_expiry(t, ttl))
    return "";
  auto ms = [](caf::timespan d) { return std::to_string(to_ms(d)) + " ms"; };
  return "timings: on etcd renew_deadline + request_timeout + 1 s (" + ms(t.renew_deadline) + " + "
         + ms(t.effective_request_timeout()) + " + 1000 ms) exceeds the key's TTL ("
         + std::to_string(ttl.count())
         + " s): a follower cannot tell a crashed holder's key running out from an operator's "
           "delete, so a takeover after a crash waits two lease durations instead of one; "
           "shorten renew_deadline (or lengthen lease_duration) to take over in one";
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
  if (auto w = etcd_failover_warning(r.cfg); !w.empty())
    err << "warning: " << w << '\n';
  std::string leases;
  for (auto& p : r.cfg.leases.others)
    if (p.group.empty())
      leases += ", lease " + r.cfg.ns + "/" + p.lease;
  for (auto& [group, names] : r.cfg.leases.groups())
    leases += ", balance group " + group + " (" + std::to_string(names.size()) + " leases)";
  out << name << ": ok (" << r.cfg.modules.modules.size() << " modules, lease " << r.cfg.ns << "/"
      << r.cfg.lease_name << leases << ", identity " << r.cfg.identity << ", "
      << (r.cfg.backend == "etcd" ? "etcd " + join_endpoints(r.cfg.etcd.endpoints)
                                  : "server " + r.conn.server)
      << ")\n";
  return 0;
}

namespace {

/// Shutdown margins. After SIGTERM the runner stops the leader-only modules
/// (module_stop_timeout), releases the lease (release_timeout), then stops
/// the rest; its confirmation takes a few more actor messages:
constexpr std::chrono::milliseconds confirm_margin{200};
/// Then queued Kubernetes Events get event_flush_bound, and the actor system
/// ends (joining the detached transports). Should anything block past all
/// of that (a transport stuck in a request), the process exits anyway:
constexpr std::chrono::milliseconds exit_margin{400};

/// A balance group first withdraws its announcement (one request), then
/// its runners stop as above, all leases at once (lease_set::shut_down).
caf::timespan shutdown_bound(const election_timings& t, bool groups) {
  return t.module_stop_timeout + t.release_timeout + confirm_margin
         + (groups ? t.effective_request_timeout() : caf::timespan{0});
}

/// `leasehold run` from a resolved config to its exit code, one method per
/// phase. Members are declared in the order they are built and destroyed in
/// reverse: the sinks' targets (metrics, journal) outlive the
/// actor system, and every actor handle is declared after it (a handle kept
/// past the system would keep a detached transport alive and block the
/// system's destructor).
class agent_process {
public:
  agent_process(const run_options& opts, config_environment env, builtin_modules modules,
                resolved_run resolved)
    : opts_(opts), env_(std::move(env)), modules_(std::move(modules)),
      cfg_(std::move(resolved.cfg)), conn_(std::move(resolved.conn)),
      lease_{cfg_.ns, cfg_.lease_name},
      log_(*parse_log_level(cfg_.log_level), cfg_.identity, lease_.to_string()),
      sys_(tuned(sys_cfg_)) {
    log_.set_format(*parse_log_format(cfg_.log_format));
    counters_.set_build_info(LEASEHOLD_VERSION, cfg_.backend);
    counters_.set_timings(cfg_.timings);
  }

  /// Each start phase logs why it cannot go on and returns false.
  bool open_journal() {
    if (cfg_.journal.empty())
      return true;
    journal_ = std::make_unique<journal>(cfg_.journal, cfg_.identity);
    if (journal_->ok())
      return true;
    log_.log(log_level::error, "cannot open the journal", {{"path", cfg_.journal}});
    return false;
  }

  bool bind_health() {
    health_sources sources;
    sources.timings = cfg_.timings;
    sources.counters = &counters_;
    sources.leader = [view = modules_.leader](const std::string& path) {
      return view->respond(path);
    };
    sources.status = [this]() { return status(sys_, leases_.main(), status_timeout); };
    sources.leases = [this]() { return leases_.leases(sys_, status_timeout); };
    sources.groups = [this]() { return leases_.groups(sys_, status_timeout); };
    sources.lease_names = [this]() { return leases_.names(); };
    sources.yield = [this](const std::string& lease, const std::string& target) {
      auto& t = cfg_.timings;
      auto bound = t.module_stop_timeout + t.release_timeout + t.effective_request_timeout()
                   + yield_window(t, true) + preferred_holder_wait(t) + std::chrono::seconds(1);
      yield_route route;
      route.identity = cfg_.identity;
      route.lease = {lease_.ns, lease};
      route.local = [this, lease, bound](const std::string& to) {
        return leases_.yield(sys_, lease, to, bound);
      };
      route.status = [this, lease] { return leases_.status_of(sys_, lease, status_timeout); };
      auto key = route.lease;
      if (on_etcd()) {   // not through the transport: its writes bind a key to its own etcd lease
        route.read = [c = cfg_.etcd, key] { return etcd_client(c).get_lease(key); };
        route.write = [c = cfg_.etcd](const leasehold::lease& l) { return etcd_client(c).put_record(l); };
      } else {
        auto ask = [this, t = cfg_.timings.effective_request_timeout()](auto... xs) {
          return blocking_request<lease_reply>(sys_, transport_, t, xs...)
            .value_or(lease_reply::failure({error_kind::other, 0, "", "", "the transport did not answer"}));
        };
        route.read = [ask, key] { return ask(get_lease_atom::value, key); };
        route.write = [ask](const leasehold::lease& l) { return ask(update_lease_atom::value, l); };
      }
      route.timeout = bound;
      return yield_anywhere(route, target);
    };
    health_ = std::make_unique<health_server>(sources);
    health_port_ = health_->bind(cfg_.health_addr);
    if (health_port_ >= 0)
      return true;
    log_.log(log_level::error, "cannot start the health server", {{"error", health_->error()}});
    return false;
  }

  /// The transports, the Kubernetes Event poster, the runner of each lease
  /// and each balance group with its membership backend.
  bool spawn_runtime() {
    auto event_conn = conn_;
    event_conn.user_agent = "leasehold-events/" LEASEHOLD_VERSION;
    event_poster_options poster_opts;
    poster_opts.request_timeout
      = std::chrono::duration_cast<caf::timespan>(max_request_time(event_conn))
        + std::chrono::milliseconds(500);
    // etcd keeps no Events: there is no poster then.
    if (!on_etcd())
      poster_ = spawn_event_poster(sys_, spawn_kube_event_transport(sys_, event_conn), poster_opts);
    runner_options ropts;
    ropts.identity = cfg_.identity;
    ropts.lease = lease_;
    ropts.timings = cfg_.timings;
    ropts.watch = cfg_.watch;
    if (on_etcd())
      use_etcd(sys_, ropts, cfg_.etcd);
    else
      ropts.backend = bound_backend();
    transport_ = ropts.backend.transport;
    ropts.registry = modules_.registry;
    lease_set_options lopts;
    lopts.base = ropts;
    lopts.events = [this](const lease_key& lease) {
      std::vector<event_sink> sinks{log_.sink(), counters_.sink()};
      if (poster_)
        sinks.push_back(event_poster_sink(poster_, lease));
      sinks.push_back(fatal_on_invalid(log_));
      if (journal_)
        sinks.push_back(journal_->sink());
      return fan_out(std::move(sinks));
    };
    membership_ = lopts.membership
      = on_etcd() ? spawn_etcd_membership(sys_, cfg_.etcd)
                  : spawn_http_membership(sys_, bounded_by(conn_, cfg_.timings));
    auto errs = leases_.spawn(sys_, cfg_.leases, std::move(lopts));
    for (auto& e : errs)
      log_.log(log_level::error, "invalid config", {{"path", opts_.config_path}, {"error", e}});
    return errs.empty();
  }

  /// The Kubernetes backend behind the session actor, which binds held
  /// leases to this process's session when asked and judges others' bound
  /// leases either way (docs/operations.md, "Bound leases").
  lease_backend bound_backend() {
    session_options so;
    so.identity = cfg_.identity;
    so.timings = cfg_.timings;
    so.bind = cfg_.session == "on" || (cfg_.session == "auto" && !cfg_.leases.others.empty());
    so.min_bound_duration = std::chrono::seconds(cfg_.session_lease_seconds);
    log_.log(log_level::info, "leases bound to a session",
             {{"session", so.bind ? session_lease_name(so.identity) : std::string{}},
              {"bound", so.bind}, {"mode", cfg_.session}});
    return bind_to_session(sys_, spawn_http_backend(sys_, bounded_by(conn_, cfg_.timings)), so);
  }

  /// Serves probes, says "agent started", follows the config file.
  void serve() {
    health_->serve();
    log_.log(log_level::info, "agent started",
             {{"version", LEASEHOLD_VERSION},
              {"backend", cfg_.backend},
              {"server", on_etcd() ? join_endpoints(cfg_.etcd.endpoints) : conn_.server},
              {"health_addr", cfg_.health_addr.substr(0, cfg_.health_addr.rfind(':') + 1)
                                + std::to_string(health_port_)},
              {"modules", cfg_.modules.modules.size()},
              {"leases", 1 + cfg_.leases.others.size()},
              {"balance_groups", cfg_.leases.groups().size()},
              {"lease_duration_ms", to_ms(cfg_.timings.lease_duration)},
              {"renew_deadline_ms", to_ms(cfg_.timings.renew_deadline)},
              {"retry_period_ms", to_ms(cfg_.timings.retry_period)},
              {"module_stop_timeout_ms", to_ms(cfg_.timings.module_stop_timeout)}});
    if (auto w = etcd_failover_warning(cfg_); !w.empty())
      log_.log(log_level::warn, "slow failover after a crash", {{"detail", w}});
    reloader_ = std::make_unique<config_reloader>(sys_, leases_, *modules_.registry, opts_, env_,
                                                  cfg_, log_);
    if (auto text = read_text_file(opts_.config_path))
      watcher_ = std::make_unique<config_watcher>(
        opts_.config_path, *text, config_poll_interval,
        [this](const std::string& content) { reloader_->on_change(content); },
        [this] {
          log_.log(log_level::warn, "config file cannot be read (removed?), the running config stays",
                   {{"path", opts_.config_path}});
        });
  }

  /// After SIGTERM/SIGINT: the runner's graceful stop, the Events flushed,
  /// everything ended; the process exits by the bounds above regardless.
  int shut_down(int sig) {
    auto bound = shutdown_bound(cfg_.timings, !cfg_.leases.groups().empty());
    auto deadline = bound + event_flush_bound + exit_margin;
    exit_by(std::chrono::steady_clock::now()
              + std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline),
            log_);
    log_.log(log_level::info, "shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    if (watcher_)
      watcher_->stop();
    if (!leases_.shut_down(sys_, bound))
      log_.log(log_level::warn, "the runners did not confirm the shutdown in time",
               {{"bound_ms", to_ms(bound)}});
    if (poster_ && !flush_events(sys_, poster_, event_flush_bound))
      log_.log(log_level::warn, "dropping Kubernetes Events that could not be posted in time");
    log_.log(log_level::info, "stopped");
    return rejected_by_api ? 1 : 0;
  }

  ~agent_process() {
    if (health_)
      health_->stop();
    if (poster_)
      caf::anon_send_exit(poster_, caf::exit_reason::user_shutdown);
    if (transport_)
      caf::anon_send_exit(transport_, caf::exit_reason::user_shutdown);
    if (membership_)
      caf::anon_send_exit(membership_, caf::exit_reason::user_shutdown);
    leases_.kill_all();
  }

private:
  bool on_etcd() const { return cfg_.backend == "etcd"; }

  static caf::actor_system_config& tuned(caf::actor_system_config& cfg) {
    tune_for_idle(cfg);
    return cfg;
  }

  const run_options& opts_;
  config_environment env_;
  builtin_modules modules_;
  agent_config cfg_;
  connection_config conn_;
  lease_key lease_;
  json_logger log_;
  std::unique_ptr<journal> journal_;
  metrics counters_;
  caf::actor_system_config sys_cfg_;
  caf::actor_system sys_;
  std::unique_ptr<health_server> health_;
  int health_port_ = -1;
  lease_set leases_;
  caf::actor poster_;
  lease_transport_actor transport_;
  membership_actor membership_;
  std::unique_ptr<config_reloader> reloader_;
  std::unique_ptr<config_watcher> watcher_;
};

} // namespace

int run(const run_options& opts) {
  auto env = config_environment::from_process();
  auto modules = make_builtin_modules();
  auto resolved = resolve_run(opts, env, *modules.registry);
  if (!resolved.errors.empty()) {
    auto& cfg = resolved.cfg;
    json_logger boot(log_level::info, cfg.identity.empty() ? default_identity(env) : cfg.identity,
                     "");
    // The config did not parse: --log-format (or LEASEHOLD_LOG_FORMAT) still
    // says how a person wants to read why.
    if (auto f = parse_log_format(opts.overrides.log_format.value_or("")))
      boot.set_format(*f);
    for (auto& e : resolved.errors)
      boot.log(log_level::error, "invalid config", {{"path", opts.config_path}, {"error", e}});
    return 1;
  }
  // Before the actor system's threads exist: the exec module reads it.
  ::setenv("LEASEHOLD_FENCE_DIR", effective_fence_dir(resolved.cfg).c_str(), 1);
  agent_process agent(opts, env, std::move(modules), std::move(resolved));
  if (!agent.open_journal() || !agent.bind_health() || !agent.spawn_runtime())
    return 1;
  agent.serve();
  start_signal_thread();
  return agent.shut_down(wait_for_shutdown_signal());
}

} // namespace leasehold::agent
