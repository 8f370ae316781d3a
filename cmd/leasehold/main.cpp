// leasehold: runs leader-only modules under a lease. Its subcommands: cmd/leasehold/README.md;
// `leasehold fence-keeper` is run by the exec module (modules/fence_keeper.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cmd/leasehold/agent.hpp"
#include "cmd/leasehold/signals.hpp"
#include "cmd/leasehold/status_command.hpp"
#include "cmd/leasehold/yield_command.hpp"
#include "modules/fence_keeper.hpp"

namespace {

using leasehold::agent::run_options;

/// --config (`help`) and the flags that override the config file's common fields.
void add_config_flags(CLI::App& cmd, run_options& o, const char* help) {
  cmd.add_option("--config", o.config_path, help)->envname("LEASEHOLD_CONFIG");
  auto& v = o.overrides;
  auto opt = [&](const char* name, std::optional<std::string>& dst, const char* help) {
    return cmd.add_option_function<std::string>(name, [&dst](const std::string& s) { dst = s; },
                                                help);
  };
  opt("--identity", v.identity,
      "Replica identity, 1-253 characters (default: $POD_NAME, else the hostname plus \"_\" and "
      "a 12-hex-digit per-process suffix; env LEASEHOLD_IDENTITY, else POD_NAME)");
  opt("--namespace", v.ns,
      "Lease namespace (default: $POD_NAMESPACE, else the service-account namespace, else the "
      "kubeconfig context's namespace, else \"default\"; env LEASEHOLD_NAMESPACE, else "
      "POD_NAMESPACE)");
  opt("--lease-name", v.lease_name, "Name of the Lease object (default \"leasehold\")");
  opt("--server", v.server, "API server URL without credentials, e.g. http://127.0.0.1:8001");
  opt("--kubeconfig", v.kubeconfig,
      "kubeconfig file (default: in-cluster when KUBERNETES_SERVICE_HOST is set)");
  opt("--lease-duration", v.lease_duration, "Lease duration, e.g. 15s");
  opt("--renew-deadline", v.renew_deadline, "A leader gives up after failing to renew this long, e.g. 10s");
  opt("--retry-period", v.retry_period, "Time between acquire/renew attempts, e.g. 2s");
  opt("--module-stop-timeout", v.module_stop_timeout,
      "How long a stopped module may take before it is killed, e.g. 4s");
  opt("--health-addr", v.health_addr, "host:port of the health/metrics server (default 127.0.0.1:8080)");
  opt("--journal", v.journal, "Append a JSON-lines journal of leadership and module events to FILE");
  opt("--fence-dir", v.fence_dir,
      "Directory for leader-only exec children's fence files (default: $TMPDIR, else /tmp); "
      "must be writable (a memory emptyDir under a read-only root)");
  opt("--log-level", v.log_level, "debug, info, warn or error (default info)");
  opt("--log-format", v.log_format,
      "json (default: one JSON object a line, for a log pipeline) or text (for a person)");
  opt("--backend", v.backend, "Lease store: kubernetes (default) or etcd");
  opt("--etcd-endpoints", v.etcd_endpoints,
      "Comma-separated etcd endpoints, e.g. http://127.0.0.1:2379,http://127.0.0.1:22379");
  opt("--session", v.session,
      "Kubernetes: bind held leases to one session Lease per process: auto (default: when "
      "running 2 or more leases), on or off");
}

} // namespace

int main(int argc, char** argv) {
  // The keeper is tiny and signal-driven: none of the agent's set-up.
  if (argc >= 2 && std::strcmp(argv[1], "fence-keeper") == 0)
    return leasehold::modules::run_fence_keeper(argc - 1, argv + 1);

  // Before any thread exists, so that every thread inherits the mask.
  leasehold::agent::block_shutdown_signals();

  CLI::App app{"leasehold: runs leader-only modules under a Kubernetes Lease"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "leasehold " LEASEHOLD_VERSION);

  run_options run_opts;
  auto* run = app.add_subcommand("run", "Run the agent until SIGTERM/SIGINT");
  add_config_flags(*run, run_opts,
                   "JSON or YAML config file, watched for changes (default: none; defaults and "
                   "flags; env LEASEHOLD_CONFIG)");

  run_options validate_opts;
  auto* validate = app.add_subcommand(
    "validate", "Check a config (and every file the run opens); print every error with its JSON path");
  add_config_flags(*validate, validate_opts,
                   "JSON or YAML config file (default: none; defaults and flags; env "
                   "LEASEHOLD_CONFIG)");

  leasehold::agent::yield_options yield_opts;
  auto* yield = app.add_subcommand(
    "yield", "Ask a running agent of the lease (through its health port; the holder's, or any "
             "other's, which carries it to the holder through the store) to hand leadership "
             "over; exit 0 once a successor took the lease, 1 when not (the reason is printed)");
  yield->add_option("--to", yield_opts.to,
                    "Identity of the replica that should take over (default: any replica)");
  yield->add_option("--lease", yield_opts.lease,
                    "Name of the lease to hand over, one of the agent's (default: its own); a "
                    "balanced lease goes to --to or the group's rendezvous runner-up");
  yield->add_option("--health-addr", yield_opts.health_addr,
                    "host:port of the agent's health server (default 127.0.0.1:8080; env "
                    "LEASEHOLD_HEALTH_ADDR)")
    ->envname("LEASEHOLD_HEALTH_ADDR");
  yield->add_option("--timeout-ms", yield_opts.timeout_ms,
                    "How long to wait for the agent's answer (default 60000)")
    ->check(CLI::PositiveNumber);

  auto* version = app.add_subcommand("version", "Print the version");

  auto* fence = app.add_subcommand("fence", "Inspect the fence of a leader-only exec child");
  fence->require_subcommand(1);
  auto* check = fence->add_subcommand(
    "check", "Exit 0 while the fence is valid, 1 when not (run it before each side effect)");
  std::string fence_file;
  long long margin_ms = 0;
  bool quiet = false;
  check->add_option("--file", fence_file, "Fence file (default: $LEASEHOLD_FENCE_FILE)")
    ->envname("LEASEHOLD_FENCE_FILE");
  check->add_option("--margin-ms", margin_ms,
                    "Valid only if at least this much of the fence is left (default 0)")
    ->check(CLI::NonNegativeNumber);
  check->add_flag("--quiet,-q", quiet, "Print nothing; only the exit status");

  app.add_subcommand("fence-keeper",
                     "Run a command under a fence keeper (used by the exec module; see "
                     "modules/fence_keeper.hpp)");

  run_options status_opts;
  std::string status_output = "text";
  auto* status = app.add_subcommand(
    "status", "Every lease of a config (or, without one, of the namespace): holder, term, time "
              "since renew; each balance group's members and whether it is balanced. Read from "
              "the store, not from the agents");
  add_config_flags(*status, status_opts,
                   "JSON or YAML config file: its leases and groups, namespace and server (env "
                   "LEASEHOLD_CONFIG)");
  status->add_option("--output,-o", status_output, "text (default) or json")
    ->check(CLI::IsMember({"text", "json"}));

  // CLI11 would only say "A subcommand is required" or "not expected".
  std::vector<std::string> commands;
  for (auto* sub : app.get_subcommands(std::function<bool(CLI::App*)>([](CLI::App*) { return true; })))
    commands.push_back(sub->get_name());
  if (argc >= 2 && argv[1][0] != '-'
      && std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    std::string valid;
    for (auto& c : commands)
      valid += (valid.empty() ? "" : ", ") + c;
    std::cerr << "leasehold: unknown command \"" << argv[1] << "\" (valid: " << valid
              << "; see leasehold --help)\n";
    return 2;
  }
  // Every misuse of the command line exits 2 (CLI11's own codes are 1xx per
  // kind of mistake); --help and --version exit 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  // Every other flag's LEASEHOLD_* variable (flag > env > file > default).
  auto getenv = [](const char* name) -> const char* { return std::getenv(name); };
  leasehold::agent::apply_environment(run_opts.overrides, getenv);
  leasehold::agent::apply_environment(validate_opts.overrides, getenv);
  leasehold::agent::apply_environment(status_opts.overrides, getenv);
  if (*run)
    return leasehold::agent::run(run_opts);
  if (*validate)
    return leasehold::agent::validate_file(validate_opts, std::cout, std::cerr);
  if (*yield)
    return leasehold::agent::yield_command(yield_opts, std::cout, std::cerr);
  if (*status)
    return leasehold::agent::status_command(status_opts, status_output == "json", std::cout,
                                            std::cerr);
  if (*check)
    return leasehold::modules::fence_check(fence_file, margin_ms * 1000000, quiet);
  if (*version) {
    std::cout << "leasehold " << LEASEHOLD_VERSION << '\n';
    return 0;
  }
  return 2;
}
