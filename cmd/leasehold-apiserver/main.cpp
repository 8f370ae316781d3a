// leasehold-apiserver: the local Kubernetes Lease API server.
//
// The first line on stdout is {"port":N,"control_port":M,"pid":P,"tls":B},
// flushed at once, so a parent process can start it on port 0 without races;
// log lines are JSON on stderr. Exits 0 on SIGTERM or SIGINT.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "cmd/leasehold-apiserver/api_server.hpp"

namespace {

const char* usage =
  "usage: leasehold-apiserver [--host H] [--port N] [--control-port N] [--snapshot FILE]\n"
  "                           [--tls-cert FILE --tls-key FILE] [--log-requests]\n"
  "  --host H          listen address (default 127.0.0.1)\n"
  "  --port N          Kubernetes API port (0, the default: a free port)\n"
  "  --control-port N  /_leasehold/* control port, never faulted (0: a free port)\n"
  "  --snapshot FILE   load objects from FILE at start, save them after changes\n"
  "  --tls-cert FILE   serve HTTPS on the API port (with --tls-key)\n"
  "  --log-requests    one JSON log line per API request on stderr\n";

bool parse_port(const std::string& text, int& out) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 65535)
    return false;
  out = static_cast<int>(v);
  return true;
}

/// Fills opts from argv; returns an error text, "help", or "".
std::string parse_args(int argc, char** argv, leasehold::api_server_options& opts) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h")
      return "help";
    if (flag == "--log-requests") {
      opts.log_requests = true;
      continue;
    }
    if (i + 1 >= argc)
      return flag + ": missing value";
    std::string value = argv[++i];
    if (flag == "--host")
      opts.host = value;
    else if (flag == "--port" && parse_port(value, opts.port))
      continue;
    else if (flag == "--control-port" && parse_port(value, opts.control_port))
      continue;
    else if (flag == "--snapshot")
      opts.snapshot_file = value;
    else if (flag == "--tls-cert")
      opts.tls_cert_file = value;
    else if (flag == "--tls-key")
      opts.tls_key_file = value;
    else
      return flag + " " + value + ": unknown flag or bad value";
  }
  if (opts.tls_cert_file.empty() != opts.tls_key_file.empty())
    return "--tls-cert and --tls-key go together";
  return "";
}

} // namespace

int main(int argc, char** argv) {
  leasehold::api_server_options opts;
  if (auto error = parse_args(argc, argv, opts); !error.empty()) {
    bool help = error == "help";
    (help ? std::cout : std::cerr) << (help ? "" : "leasehold-apiserver: " + error + "\n") << usage;
    return help ? 0 : 2;
  }
  static std::mutex log_mutex;
  opts.log = [](const nlohmann::json& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::cerr << line.dump() << std::endl;
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
    opts.log({{"msg", "start failed"}, {"error", started.error}});
    return 1;
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
