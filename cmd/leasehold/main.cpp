// leasehold: runs leader-only modules under a Kubernetes Lease.
//   leasehold run --config FILE [flags]
//   leasehold validate --config FILE
//   leasehold version
#include <iostream>

#include <CLI/CLI.hpp>

#include "cmd/leasehold/agent.hpp"
#include "cmd/leasehold/signals.hpp"

namespace {

using leasehold::agent::run_options;

/// Flags that override the config file's common fields.
void add_override_flags(CLI::App& cmd, run_options& o) {
  auto& v = o.overrides;
  auto opt = [&](const char* name, std::optional<std::string>& dst, const char* help) {
    return cmd.add_option_function<std::string>(name, [&dst](const std::string& s) { dst = s; },
                                                help);
  };
  opt("--identity", v.identity, "Replica identity (default: $POD_NAME, else the hostname)")
    ->envname("POD_NAME");
  opt("--namespace", v.ns,
      "Lease namespace (default: $POD_NAMESPACE, else the service-account namespace, else "
      "\"default\")")
    ->envname("POD_NAMESPACE");
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
  opt("--log-level", v.log_level, "debug, info, warn or error (default info)");
}

} // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask.
  leasehold::agent::block_shutdown_signals();

  CLI::App app{"leasehold: runs leader-only modules under a Kubernetes Lease"};
  app.require_subcommand(1);

  run_options run_opts;
  auto* run = app.add_subcommand("run", "Run the agent until SIGTERM/SIGINT");
  run->add_option("--config", run_opts.config_path, "JSON config file (watched for changes)")
    ->required();
  add_override_flags(*run, run_opts);

  run_options validate_opts;
  auto* validate = app.add_subcommand("validate",
                                      "Check a config file; print every error with its JSON path");
  validate->add_option("--config", validate_opts.config_path, "JSON config file")->required();
  add_override_flags(*validate, validate_opts);

  auto* version = app.add_subcommand("version", "Print the version");

  CLI11_PARSE(app, argc, argv);

  if (*run)
    return leasehold::agent::run(run_opts);
  if (*validate)
    return leasehold::agent::validate_file(validate_opts, std::cout, std::cerr);
  if (*version) {
    std::cout << "leasehold " << LEASEHOLD_VERSION << '\n';
    return 0;
  }
  return 2;
}
