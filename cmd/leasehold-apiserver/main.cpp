// leasehold-apiserver: the local Kubernetes Lease API server; its flags,
// first stdout line and log: docs/apiserver.md, 'Running it'.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"

int main(int argc, char** argv) {
  leasehold::api_server_options opts;
  std::string kubeconfig_out;
  CLI::App app{"leasehold-apiserver: a local Kubernetes API server for Leases, Events and "
               "ConfigMaps, with fault injection on a control port"};
  app.set_version_flag("--version", "leasehold-apiserver " LEASEHOLD_VERSION);
  app.add_option("--host", opts.host, "Listen address")->capture_default_str();
  app.add_option("--port", opts.port, "Kubernetes API port (0: a free port)")
    ->check(CLI::Range(0, 65535))
    ->capture_default_str();
  app.add_option("--control-port", opts.control_port,
                 "/_leasehold/* control port, never faulted (0: a free port)")
    ->check(CLI::Range(0, 65535))
    ->capture_default_str();
  app.add_option("--snapshot", opts.snapshot_file,
                 "Load objects from FILE at start, save them after changes");
  auto* cert = app.add_option("--tls-cert", opts.tls_cert_file,
                              "Serve HTTPS on the API port with this certificate (with --tls-key)");
  auto* key = app.add_option("--tls-key", opts.tls_key_file, "Private key for --tls-cert");
  cert->needs(key);
  key->needs(cert);
  app.add_option("--max-threads", opts.worker_threads,
                 "API port threads at most, started on demand: one per open connection or "
                 "watch stream; watches beyond this - 16 get 429")
    ->check(CLI::Range(17, 1000000))
    ->capture_default_str();
  app.add_option("--watch-history", opts.watch_history,
                 "Events kept for resuming watches (older versions: 410 Gone)")
    ->check(CLI::Range(1, 10000000))
    ->capture_default_str();
  app.add_flag("--log-requests", opts.log_requests, "One JSON log line per API request on stderr");
  app.add_option("--kubeconfig-out", kubeconfig_out,
                 "Once listening, write a kubeconfig to FILE whose current context reaches this "
                 "server (kubectl --kubeconfig FILE, or KUBECONFIG=FILE)");
  CLI11_PARSE(app, argc, argv);

  static std::mutex log_mutex;
  opts.log = [](const nlohmann::json& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    // Every line has time and level (docs/apiserver.md), whoever wrote it.
    auto out = line;
    if (!out.contains("time"))
      out["time"] = leasehold::format_log_time(std::chrono::system_clock::now());
    if (!out.contains("level"))
      out["level"] = "info";
    std::cerr << out.dump() << std::endl;
  };

  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  leasehold::local_api_server server(opts);
  auto started = server.start();
  if (!started.ok()) {
    opts.log({{"msg", "start failed"}, {"level", "error"}, {"error", started.error}});
    return 1;
  }
  if (!kubeconfig_out.empty()) {   // written before the first stdout line
    auto host = opts.host == "0.0.0.0" ? std::string("127.0.0.1")
                : opts.host.find(':') != std::string::npos ? "[" + opts.host + "]"
                                                           : opts.host;
    char* ca = server.tls() ? ::realpath(opts.tls_cert_file.c_str(), nullptr) : nullptr;
    std::ofstream out(kubeconfig_out, std::ios::trunc);   // no credentials: the server asks for none
    out << "apiVersion: v1\nkind: Config\ncurrent-context: local\nclusters:\n- name: local\n"
        << "  cluster:\n    server: " << (server.tls() ? "https://" : "http://") << host << ':'
        << server.port() << '\n' << (ca ? "    certificate-authority: " + std::string(ca) + "\n" : "")
        << "contexts:\n- name: local\n  context: {cluster: local, user: local, namespace: default}\n"
        << "users:\n- name: local\n  user: {}\n";
    std::free(ca);
    if (!out.flush()) {
      opts.log({{"msg", "start failed"}, {"level", "error"},
                {"error", "--kubeconfig-out: cannot write " + kubeconfig_out}});
      server.stop();
      return 1;
    }
  }
  std::cout << nlohmann::json{{"port", server.port()},
                              {"control_port", server.control_port()},
                              {"pid", static_cast<int>(getpid())},
                              {"tls", server.tls()}}.dump()
            << std::endl;

  int sig = 0;
  sigwait(&stop_signals, &sig);
  opts.log({{"msg", "stopping"}, {"signal", sig}});
  server.stop();
  return 0;
}
