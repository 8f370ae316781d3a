// The state of a local_api_server, private to leasehold-apiserver; its files,
// one per concern: cmd/leasehold-apiserver/README.md, 'Source files'.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "cmd/leasehold-apiserver/faults.hpp"
#include "cmd/leasehold-apiserver/kube_routes.hpp"
#include "cmd/leasehold-apiserver/listener.hpp"
#include "cmd/leasehold-apiserver/object_store.hpp"
#include "cmd/leasehold-apiserver/selectors.hpp"

namespace leasehold {

struct local_api_server::impl {
  api_server_options opts;
  apiserver::object_store store;

  // Open watch streams (bounded: see api_server_options::worker_threads).
  std::atomic<std::size_t> watches{0};

  // Faults, stats and the stop flag share one mutex; cv wakes hung requests.
  std::mutex mu;
  std::condition_variable cv;
  apiserver::fault_state faults;
  std::uint64_t fault_version = 0;
  apiserver::request_stats stats;
  std::map<std::string, int> held;   // by User-Agent: requests a hang fault or a hanging partition holds now
  bool stopping = false;

  // Listeners: main_listener is null while "down"; closed ones wait in retired.
  std::mutex listeners_mu;
  std::unique_ptr<apiserver::listener> main_listener;
  std::unique_ptr<apiserver::listener> control_listener;
  std::vector<std::unique_ptr<apiserver::listener>> retired;
  int port = 0;
  int control_port = 0;
  bool started = false;

  std::thread snapshot_thread;
  bool snapshot_done = false;   // under mu; set once the listeners are joined
  // The store's mutation count the snapshot file matches, taken right after
  // the load and before any listener exists: every later mutation is written.
  std::uint64_t snapshot_written = 0;

  explicit impl(api_server_options o) : opts(std::move(o)), store(opts.watch_history) {}

  bool use_tls() const { return !opts.tls_cert_file.empty() && !opts.tls_key_file.empty(); }

  void log(const std::string& msg, nlohmann::json fields = nlohmann::json::object());

  // ---- lifecycle and listeners (api_server.cpp) ------------------------------

  std::string start_listener(bool main, int wanted_port, std::unique_ptr<apiserver::listener>& out);
  /// Opens or closes the main listener (fault mode "down"); "" on success.
  std::string set_main_listening(bool up);
  start_result start();
  void stop();

  // ---- Kubernetes API requests (kube_handlers.cpp) ---------------------------

  void kube(const httplib::Request& req, httplib::Response& res);
  void serve(const httplib::Request& req, const std::optional<apiserver::kube_route>& route,
             httplib::Response& res);

  // ---- faults on requests (fault_gate.cpp) -----------------------------------

  enum class outcome { serve, answered, dropped };
  /// Applies latency, then the current fault; waits while hung.
  outcome apply_faults(const std::string& user_agent, const std::string& identity,
                       httplib::Response& res);

  // ---- watch streams (watch_streams.cpp) -------------------------------------

  struct watch_stream;
  void start_watch(const httplib::Request& req, const apiserver::resource_type& r,
                   apiserver::object_filter filter, httplib::Response& res);
  std::string event_line(const std::string& type, const watch_stream& w,
                         const nlohmann::json& object) const;
  /// Queues the lines for the store's events since w.since (selector
  /// transitions become ADDED or DELETED, as the real API sends them).
  void queue_events(watch_stream& w, const apiserver::watch_batch& batch);
  /// One call of the content provider: writes the next line, ends the
  /// stream, or waits for something to send. false drops the connection.
  bool watch_step(watch_stream& w, const httplib::Request& req, httplib::DataSink& sink);

  // ---- control endpoints (control.cpp) ---------------------------------------

  void control(const httplib::Request& req, httplib::Response& res);
  void change_faults(const httplib::Request& req, httplib::Response& res);

  // ---- snapshot (snapshot.cpp) -----------------------------------------------

  /// Writes whenever the mutation count moved since the last write; the pass
  /// after snapshot_done (listeners joined, no more writers) is the final one.
  void snapshot_loop();
};

} // namespace leasehold
