// local_api_server's lifecycle: start, stop, and which listeners are up.
#include "cmd/leasehold-apiserver/api_server.hpp"

#include <csignal>

#include "cmd/leasehold-apiserver/connection.hpp"
#include "cmd/leasehold-apiserver/http_replies.hpp"
#include "cmd/leasehold-apiserver/server_impl.hpp"
#include "cmd/leasehold-apiserver/snapshot.hpp"
#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

void local_api_server::impl::log(const std::string& msg, json fields) {
  if (!opts.log)
    return;
  fields["time"] = format_log_time(std::chrono::system_clock::now());
  fields["msg"] = msg;
  opts.log(fields);
}

// ---- listeners ---------------------------------------------------------------

std::string local_api_server::impl::start_listener(bool main, int wanted_port,
                                                   std::unique_ptr<listener>& out) {
  std::unique_ptr<httplib::Server> server;
  if (main && use_tls())
    server = std::make_unique<tls_server>(opts.tls_cert_file.c_str(), opts.tls_key_file.c_str());
  else
    server = std::make_unique<plain_server>();   // both answer pipelined requests (connection.hpp)
  if (!server->is_valid())
    return "cannot load TLS certificate " + opts.tls_cert_file + " / key " + opts.tls_key_file;
  auto threads = main ? opts.worker_threads : std::size_t{8};
  server->new_task_queue = [threads] { return new elastic_pool(threads, std::min<std::size_t>(threads, 8)); };
  server->set_keep_alive_max_count(100000);   // a transport worker keeps its connection (100 was a reconnect every 100 requests)
  server->set_tcp_nodelay(true);       // as Go's net/http: no Nagle delay on small answers
  auto handler = [this, main](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/_leasehold/", 0) == 0)
      return control(req, res);
    if (!main)
      return set_status(res, 404, "the control port serves only /_leasehold/");
    kube(req, res);
  };
  server->Get(".*", handler);
  server->Post(".*", handler);
  server->Put(".*", handler);
  server->Delete(".*", handler);
  server->Patch(".*", handler);
  auto l = std::make_unique<listener>(std::move(server));
  auto error = l->start(opts.host, wanted_port, main ? "--port" : "--control-port");
  if (error.empty())
    out = std::move(l);
  return error;
}

std::string local_api_server::impl::set_main_listening(bool up) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping)
      return "";
  }
  std::lock_guard<std::mutex> lock(listeners_mu);
  for (auto it = retired.begin(); it != retired.end();)
    it = (*it)->finished() ? retired.erase(it) : it + 1;
  if (up && !main_listener)
    return start_listener(true, port, main_listener);
  if (!up && main_listener) {
    main_listener->close();
    drop_connections(port);   // a server that went away resets its connections
    retired.push_back(std::move(main_listener));
  }
  return "";
}

// ---- lifecycle ---------------------------------------------------------------

start_result local_api_server::impl::start() {
  if (started)
    return {0, "already started"};
  started = true;
  // Writing to a connection the peer (or drop_connection) closed must not
  // kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  if (!opts.snapshot_file.empty())
    if (auto error = load_snapshot(opts.snapshot_file, store); !error.empty())
      return {0, error};
  snapshot_written = store.mutations();
  std::lock_guard<std::mutex> lock(listeners_mu);
  if (auto error = start_listener(true, opts.port, main_listener); !error.empty())
    return {0, error};
  port = main_listener->port();
  if (opts.control_listener) {
    if (auto error = start_listener(false, opts.control_port, control_listener); !error.empty())
      return {0, error};
    control_port = control_listener->port();
  }
  if (!opts.snapshot_file.empty())
    snapshot_thread = std::thread([this] { snapshot_loop(); });
  log("listening", {{"host", opts.host}, {"port", port}, {"control_port", control_port},
                    {"tls", use_tls()}});
  return {port, ""};
}

void local_api_server::impl::stop() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  store.wake();
  std::vector<std::unique_ptr<listener>> all;
  {
    std::lock_guard<std::mutex> lock(listeners_mu);
    all = std::move(retired);
    retired.clear();
    all.push_back(std::move(main_listener));
    all.push_back(std::move(control_listener));
  }
  for (auto& l : all)
    if (l)
      l->close();
  drop_connections(port);
  drop_connections(control_port);
  all.clear();   // joins
  {
    std::lock_guard<std::mutex> lock(mu);
    snapshot_done = true;
  }
  cv.notify_all();
  if (snapshot_thread.joinable())
    snapshot_thread.join();
}

local_api_server::local_api_server(api_server_options opts)
    : impl_(std::make_unique<impl>(std::move(opts))) {}

local_api_server::~local_api_server() {
  stop();
}

start_result local_api_server::start() {
  auto result = impl_->start();
  if (!result.ok())
    impl_->stop();
  return result;
}

int local_api_server::port() const {
  return impl_->port;
}

int local_api_server::control_port() const {
  return impl_->control_port;
}

bool local_api_server::tls() const {
  return impl_->use_tls();
}

void local_api_server::stop() {
  impl_->stop();
}

} // namespace leasehold
