#include "tests/agent/harness.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <httplib.h>

namespace leasehold::test {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

} // namespace

std::string build_root() {
  return env_or("LEASEHOLD_BUILD_ROOT", "build");
}

std::string source_root() {
  return env_or("LEASEHOLD_SOURCE_ROOT", ".");
}

void write_file(const std::string& path, const std::string& content) {
  // Write a sibling and rename: the agent's watcher never sees a half file.
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
  }
  std::filesystem::rename(tmp, path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}


child::child(const std::vector<std::string>& argv, const std::string& stdout_file,
             const std::string& stderr_file) {
  pid_ = fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // Child: default signal dispositions and mask, redirected output.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int out = open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

child::~child() {
  if (running()) {
    kill(pid_, SIGKILL);
    wait(5s);
  }
}

void child::signal(int sig) {
  if (!status_)
    kill(pid_, sig);
}

bool child::running() {
  return !wait(0ms).has_value();
}

std::optional<int> child::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!status_) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(10ms);
  }
  return status_;
}

api_server::api_server(const temp_dir& dir, std::vector<std::string> extra_args) {
  std::vector<std::string> argv{build_root() + "/cmd/leasehold-apiserver/leasehold-apiserver",
                                "--port", "0"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto out = dir.file("apiserver.out");
  proc_ = std::make_unique<child>(argv, out, dir.file("apiserver.log"));
  bool started = wait_until(
    [&] {
      auto text = read_file(out);
      auto nl = text.find('\n');
      if (nl == std::string::npos)
        return false;
      auto j = nlohmann::json::parse(text.substr(0, nl));
      port_ = j.at("port").get<int>();
      control_port_ = j.at("control_port").get<int>();
      tls_ = j.value("tls", false);
      return true;
    },
    10s);
  if (!started)
    throw std::runtime_error("leasehold-apiserver did not start: " + read_file(dir.file("apiserver.log")));
}

std::string api_server::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

bool api_server::fault(const nlohmann::json& body) {
  return http_post(control_port_, "/_leasehold/faults", body.dump()).status == 200;
}

std::optional<nlohmann::json> api_server::lease(const std::string& ns, const std::string& name) {
  auto path = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name;
  auto get = [&](auto& cli) {
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(2, 0);
    return cli.Get(path.c_str());
  };
  httplib::SSLClient tls_cli("127.0.0.1", port_);
  tls_cli.enable_server_certificate_verification(false);
  httplib::Client plain_cli("127.0.0.1", port_);
  auto res = tls_ ? get(tls_cli) : get(plain_cli);
  if (!res || res->status != 200)
    return std::nullopt;
  return nlohmann::json::parse(res->body);
}

etcd_server::etcd_server(const temp_dir& dir) {
  auto out = dir.file("etcd.out");
  proc_ = std::make_unique<child>(
    std::vector<std::string>{"/usr/bin/python3", source_root() + "/tests/faults/etcd_cluster.py",
                             "--members", "1"},
    out, dir.file("etcd.log"));
  wait_until(
    [&] {
      auto text = read_file(out);
      auto nl = text.find('\n');
      if (nl == std::string::npos)
        return !proc_->running();
      endpoint_ = nlohmann::json::parse(text.substr(0, nl)).at("endpoints").at(0).get<std::string>();
      return true;
    },
    20s);
}

etcd_server::~etcd_server() {
  proc_->signal(SIGTERM);   // the script stops its member and removes its data
  proc_->wait(10s);
}

nlohmann::json test_timings(const std::string& lease_duration, const std::string& renew_deadline,
                            const std::string& retry_period, const std::string& module_stop_timeout) {
  return {{"lease_duration", lease_duration},
          {"renew_deadline", renew_deadline},
          {"retry_period", retry_period},
          {"module_stop_timeout", module_stop_timeout},
          {"backoff_min", "200ms"},
          {"backoff_max", "1s"}};
}

nlohmann::json short_config(bool ticker_enabled) {
  return {{"lease_name", "agent-test"},
          {"timings", test_timings("2s", "1500ms", "300ms", "400ms")},
          {"modules",
           {{{"type", "ticker"},
             {"name", "tick"},
             {"enabled", ticker_enabled},
             {"settings", {{"interval_ms", 200}}}},
            {{"type", "leader_endpoint"}}}}};
}

agent::agent(const temp_dir& dir, const std::string& identity, const std::string& config_file,
             std::vector<std::string> extra_args)
  : identity_(identity), log_(dir.file(identity + ".log")),
    journal_(dir.file(identity + ".journal")) {
  std::vector<std::string> argv{build_root() + "/cmd/leasehold/leasehold", "run",
                                "--config", config_file,
                                "--identity", identity,
                                "--health-addr", "127.0.0.1:0",
                                "--journal", journal_};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // Kubernetes leases bound to the agent's session, a single one too
  // (LEASEHOLD_SESSION or --session overrides it).
  if (std::find(extra_args.begin(), extra_args.end(), "--session") == extra_args.end()
      && !std::getenv("LEASEHOLD_SESSION")) {
    argv.push_back("--session");
    argv.push_back("on");
  }
  proc_ = std::make_unique<child>(argv, dir.file(identity + ".out"), log_);
}

std::string write_short_config(const temp_dir& dir, const nlohmann::json& timings) {
  auto doc = short_config();
  doc["timings"] = timings;
  auto path = dir.file("config.json");
  write_file(path, doc.dump());
  return path;
}

three_agents::three_agents(const temp_dir& dir, const std::string& config_file,
                           const std::vector<std::string>& extra_args)
  : a(dir, "agent-a", config_file, extra_args), b(dir, "agent-b", config_file, extra_args),
    c(dir, "agent-c", config_file, extra_args) {}

std::vector<nlohmann::json> agent::log_lines() const {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(log_));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded())
      out.push_back(std::move(j));
  }
  return out;
}

int agent::health_port() {
  if (health_port_ != 0)
    return health_port_;
  wait_until(
    [&] {
      for (auto& l : log_lines())
        if (l.value("msg", "") == "agent started") {
          auto addr = l.value("health_addr", "");
          health_port_ = std::stoi(addr.substr(addr.rfind(':') + 1));
          return true;
        }
      return false;
    },
    10s);
  return health_port_;
}

namespace {

http_reply to_reply(const httplib::Result& res) {
  if (!res)
    return {};
  return {res->status, res->body};
}

} // namespace

cli_result run_program(const temp_dir& dir, std::vector<std::string> argv,
                       std::chrono::milliseconds timeout) {
  cli_result r;
  {
    child c(argv, dir.file("cli.out"), dir.file("cli.err"));
    r.code = c.wait(timeout).value_or(-1);
  }
  r.out = read_file(dir.file("cli.out"));
  r.err = read_file(dir.file("cli.err"));
  std::remove(dir.file("cli.out").c_str());
  std::remove(dir.file("cli.err").c_str());
  return r;
}

cli_result run_cli(const temp_dir& dir, std::vector<std::string> args,
                   std::chrono::milliseconds timeout) {
  args.insert(args.begin(), build_root() + "/cmd/leasehold/leasehold");
  return run_program(dir, std::move(args), timeout);
}

http_reply http_get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  return to_reply(cli.Get(path.c_str()));
}

http_reply http_post(int port, const std::string& path, const std::string& body) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  return to_reply(cli.Post(path.c_str(), body, "application/json"));
}

std::optional<double> metric(int port, const std::string& series) {
  auto body = http_get(port, "/metrics").body;
  auto at = body.find("\n" + series + " ");
  if (at == std::string::npos)
    return std::nullopt;
  return std::stod(body.substr(at + series.size() + 2));
}

nlohmann::json agent_state(agent& a) {
  auto port = a.health_port();
  if (port == 0)
    return nullptr;
  auto r = http_get(port, "/debug/state");
  if (r.status != 200)
    return nullptr;
  return nlohmann::json::parse(r.body, nullptr, false);
}


std::vector<std::string> prometheus_violations(const std::string& text) {
  static const std::regex sample(
    R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? )"
    R"((-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|NaN|[+-]Inf)$)");
  static const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::vector<std::string> bad;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    if (line[0] == '#' ? !std::regex_match(line, comment) : !std::regex_match(line, sample))
      bad.push_back(line);
  }
  return bad;
}

} // namespace leasehold::test
