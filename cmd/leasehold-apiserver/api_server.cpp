#include "cmd/leasehold-apiserver/api_server.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <httplib.h>

#include "cmd/leasehold-apiserver/faults.hpp"
#include "cmd/leasehold-apiserver/object_store.hpp"
#include "cmd/leasehold-apiserver/resources.hpp"
#include "cmd/leasehold-apiserver/selectors.hpp"
#include "leasehold/lease.hpp"
#include "transport/listen.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

namespace {

// ---- sockets ---------------------------------------------------------------
//
// cpp-httplib 0.11 gives a handler no access to its socket, and stop() leaves
// kept-alive connections open until they idle out. To drop connections (a
// partitioned client, an API server going down) we find this process's
// connected TCP sockets by their endpoints and shut them down; httplib then
// sees the connection end and closes its socket.

struct endpoint {
  std::string addr;
  int port = -1;
};

endpoint endpoint_of(const sockaddr_storage& sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return {text, ntohs(in->sin_port)};
  }
  if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return {text, ntohs(in6->sin6_port)};
  }
  return {};
}

/// Shuts down every connected socket for which match(local, peer) holds.
template <class Match>
void shutdown_sockets(Match match) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return;
  while (dirent* entry = readdir(dir)) {
    int fd = std::atoi(entry->d_name);
    if (fd <= 2 || fd == dirfd(dir))
      continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
        match(endpoint_of(local), endpoint_of(peer)))
      ::shutdown(fd, SHUT_RDWR);
  }
  closedir(dir);
}

/// Closes the connection a request arrived on, without an answer.
void drop_connection(const httplib::Request& req) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (req.ssl != nullptr) {
    ::shutdown(SSL_get_fd(req.ssl), SHUT_RDWR);
    return;
  }
#endif
  shutdown_sockets([&](const endpoint& local, const endpoint& peer) {
    return local.port == req.local_port && local.addr == req.local_addr &&
           peer.port == req.remote_port && peer.addr == req.remote_addr;
  });
}

/// Closes every connection accepted on `port` (after its listener closed).
void drop_connections(int port) {
  shutdown_sockets([&](const endpoint& local, const endpoint&) { return local.port == port; });
}

/// One httplib server accepting on its own thread.
class listener {
public:
  explicit listener(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {}
  ~listener() {
    close();
    join();
  }

  /// Binds host:port (0: any free port) exclusively and starts accepting;
  /// "" on success, else the error naming `setting` (the flag of the port).
  std::string start(const std::string& host, int port, const std::string& setting) {
    std::string error;
    port_ = bind_exclusive(*server_, host, port, setting, error);
    if (port_ <= 0)
      return error;
    thread_ = std::thread([this] {
      server_->listen_after_bind();
      finished_ = true;
    });
    // httplib's stop() is a no-op until the accept loop runs: wait for it.
    for (int i = 0; i < 5000 && !server_->is_running() && !finished_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return "";
  }

  int port() const { return port_; }

  /// Stops accepting (the port refuses connections at once); non-blocking.
  void close() {
    if (!closed_.exchange(true) && thread_.joinable())
      server_->stop();
  }

  /// Waits for the in-flight connections to end.
  void join() {
    if (thread_.joinable())
      thread_.join();
  }

  bool finished() const { return finished_; }

private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> finished_{false};
  int port_ = 0;
};

struct kube_route {
  std::string verb;                         // get, list, create, update, delete, discovery
  const resource_type* resource = nullptr;  // null for discovery
  std::string ns;                           // empty: every namespace (list only)
  std::string name;                         // empty: the collection
};

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/'))
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

/// Maps method and path to a route; nullopt for paths that do not exist.
/// An unsupported method on an existing path gets verb "" (405).
std::optional<kube_route> parse_route(const std::string& method, const std::string& path) {
  auto parts = split_path(path);
  std::size_t prefix = 0;
  std::string group, version;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    prefix = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    prefix = 3;
  }
  kube_route route;
  if (prefix == 0 || parts.size() == prefix) {
    route.verb = method == "GET" ? "discovery" : "";
    return route;
  }
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(prefix), parts.end());
  std::string plural;
  if (rest.size() == 1) {
    plural = rest[0];
  } else if ((rest.size() == 3 || rest.size() == 4) && rest[0] == "namespaces") {
    route.ns = rest[1];
    plural = rest[2];
    route.name = rest.size() == 4 ? rest[3] : "";
  } else {
    return std::nullopt;
  }
  route.resource = find_resource(group, version, plural);
  if (route.resource == nullptr)
    return std::nullopt;
  bool collection = route.name.empty();
  if (method == "GET")
    route.verb = collection ? "list" : "get";
  else if (method == "POST" && collection && !route.ns.empty())
    route.verb = "create";
  else if (method == "PUT" && !collection)
    route.verb = "update";
  else if (method == "PATCH" && !collection)
    route.verb = "patch";
  else if (method == "DELETE" && !collection)
    route.verb = "delete";
  return route;
}

void set_json(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void set_status(httplib::Response& res, int code, const std::string& message) {
  set_json(res, code, failure_status(code, reason_for(code), message));
}

/// Go's strconv.ParseBool, as the API server reads ?watch= and friends.
std::optional<bool> parse_bool(const std::string& text) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (text == t)
      return true;
  for (const char* f : {"", "0", "f", "F", "FALSE", "false", "False"})
    if (text == f)
      return false;
  return std::nullopt;
}

/// Accept: application/json;as=Table;g=meta.k8s.io;v=v1 (kubectl get).
bool wants_table(const httplib::Request& req) {
  return req.get_header_value("Accept").find("as=Table") != std::string::npos;
}

/// A PATCH body applied to `object` per its Content-Type; an error reply or nullopt.
std::optional<reply> apply_patch(const std::string& content_type, const json& patch, json& object) {
  auto type = content_type.substr(0, content_type.find(';'));
  if (type == "application/json-patch+json") {
    if (!patch.is_array())
      return reply{400, failure_status(400, "BadRequest", "json patch: the body must be a JSON array of operations")};
    try {
      object = object.patch(patch);
    } catch (const json::exception& e) {
      return reply{422, failure_status(422, "Invalid", std::string("json patch: ") + e.what())};
    }
    return std::nullopt;
  }
  // Strategic merge patch on these types has merge-patch semantics (their
  // lists have no merge keys: a list in the patch replaces the stored one).
  if (type == "application/merge-patch+json" || type == "application/strategic-merge-patch+json") {
    if (!patch.is_object())
      return reply{400, failure_status(400, "BadRequest", "merge patch: the body must be a JSON object")};
    object.merge_patch(patch);
    return std::nullopt;
  }
  return reply{415, failure_status(415, "UnsupportedMediaType",
                                   "the body of the request was in an unknown format - accepted media "
                                   "types include: application/json-patch+json, "
                                   "application/merge-patch+json, application/strategic-merge-patch+json")};
}

std::string watch_line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

} // namespace

struct local_api_server::impl {
  api_server_options opts;
  object_store store;

  // Open watch streams (bounded: see api_server_options::worker_threads).
  std::atomic<std::size_t> watches{0};

  // Faults, stats and the stop flag share one mutex; cv wakes hung requests.
  std::mutex mu;
  std::condition_variable cv;
  fault_state faults;
  std::uint64_t fault_version = 0;
  request_stats stats;
  bool stopping = false;

  // Listeners: main_listener is null while "down"; closed ones wait in retired.
  std::mutex listeners_mu;
  std::unique_ptr<listener> main_listener;
  std::unique_ptr<listener> control_listener;
  std::vector<std::unique_ptr<listener>> retired;
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

  void log(const std::string& msg, json fields = json::object()) {
    if (!opts.log)
      return;
    fields["time"] = format_log_time(std::chrono::system_clock::now());
    fields["msg"] = msg;
    opts.log(fields);
  }

  // ---- listeners -----------------------------------------------------------

  std::unique_ptr<httplib::Server> make_server(bool main, std::string& error) {
    std::unique_ptr<httplib::Server> server;
    if (main && use_tls())
      server = std::make_unique<httplib::SSLServer>(opts.tls_cert_file.c_str(),
                                                    opts.tls_key_file.c_str());
    else
      server = std::make_unique<httplib::Server>();
    if (!server->is_valid()) {
      error = "cannot load TLS certificate " + opts.tls_cert_file + " / key " + opts.tls_key_file;
      return nullptr;
    }
    auto threads = main ? opts.worker_threads : std::size_t{8};
    server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server->set_keep_alive_max_count(100);
    server->set_tcp_nodelay(true);       // as Go's net/http: no Nagle delay on small answers
    auto handler = [this, main](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, main);
    };
    server->Get(".*", handler);
    server->Post(".*", handler);
    server->Put(".*", handler);
    server->Delete(".*", handler);
    server->Patch(".*", handler);
    return server;
  }

  std::string start_listener(bool main, int wanted_port, std::unique_ptr<listener>& out) {
    std::string error;
    auto server = make_server(main, error);
    if (!server)
      return error;
    auto l = std::make_unique<listener>(std::move(server));
    error = l->start(opts.host, wanted_port, main ? "--port" : "--control-port");
    if (error.empty())
      out = std::move(l);
    return error;
  }

  /// Opens or closes the main listener (fault mode "down"); "" on success.
  std::string set_main_listening(bool up) {
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

  // ---- requests ------------------------------------------------------------

  void handle(const httplib::Request& req, httplib::Response& res, bool main) {
    if (req.path.rfind("/_leasehold/", 0) == 0)
      return control(req, res);
    if (!main)
      return set_status(res, 404, "the control port serves only /_leasehold/");
    kube(req, res);
  }

  enum class outcome { serve, answered, dropped };

  /// Applies latency, then the current fault; waits while hung.
  outcome apply_faults(const std::string& user_agent, const std::string& identity,
                       httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu);
    if (faults.latency_ms > 0)
      cv.wait_for(lock, std::chrono::milliseconds(faults.latency_ms), [&] { return stopping; });
    auto deadline = std::chrono::steady_clock::now() + opts.hang_limit;
    for (;;) {
      if (stopping)
        return outcome::dropped;
      bool partitioned = faults.partition.matches(user_agent, identity);
      if (faults.mode == fault_mode::down || (partitioned && !faults.partition.hang))
        return outcome::dropped;
      if (faults.mode == fault_mode::hang || partitioned) {
        auto version = fault_version;
        if (!cv.wait_until(lock, deadline, [&] { return stopping || fault_version != version; }))
          return outcome::dropped;
        continue;
      }
      if (faults.mode == fault_mode::error) {
        int code = faults.error_status;
        json details = json::object();
        if (faults.retry_after_seconds > 0) {
          details["retryAfterSeconds"] = faults.retry_after_seconds;
          res.set_header("Retry-After", std::to_string(faults.retry_after_seconds));
        }
        set_json(res, code, failure_status(code, reason_for(code),
                                           "injected fault: " + reason_for(code), details));
        return outcome::answered;
      }
      return outcome::serve;
    }
  }

  void kube(const httplib::Request& req, httplib::Response& res) {
    auto user_agent = req.get_header_value("User-Agent");
    auto identity = req.get_header_value("X-Leasehold-Identity");
    auto route = parse_route(req.method, req.path);
    std::string verb = route ? route->verb : "unknown";
    if (verb.empty())
      verb = "unsupported";
    else if ((verb == "list" || verb == "get") && parse_bool(req.get_param_value("watch")).value_or(false))
      verb = "watch";
    int code = 0;
    switch (apply_faults(user_agent, identity, res)) {
      case outcome::dropped:
        drop_connection(req);
        set_status(res, 503, "connection dropped");   // only if the drop failed
        break;
      case outcome::answered:
        code = res.status;
        break;
      case outcome::serve:
        serve(req, route, res);
        code = res.status;
        break;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      stats.record(verb, user_agent, identity, code);
    }
    if (opts.log_requests)
      log("request", {{"verb", verb}, {"method", req.method}, {"path", req.path},
                      {"code", code}, {"user_agent", user_agent}, {"identity", identity}});
  }

  void serve(const httplib::Request& req, const std::optional<kube_route>& route,
             httplib::Response& res) {
    auto doc = route && route->verb == "discovery"
                 ? discovery_document(req.path, opts.host + ":" + std::to_string(port))
                 : std::nullopt;
    if (!doc && req.method == "GET" && req.path.rfind("/openapi/", 0) == 0)
      doc = openapi_document(req.path);
    if (doc)
      return set_json(res, 200, *doc);
    if (!route || route->verb == "discovery")
      return set_status(res, 404, "the server could not find the requested resource");
    if (route->verb.empty())
      return set_status(res, 405, req.method + " " + req.path + " is not supported by leasehold-apiserver");
    const resource_type& r = *route->resource;
    auto watch = parse_bool(req.get_param_value("watch"));
    if (!watch)
      return set_status(res, 400, "watch: invalid value \"" + req.get_param_value("watch") + "\"");
    if (route->verb == "get" && !*watch)
      return send(res, store.get(r, route->ns, route->name), wants_table(req) ? &r : nullptr, req);
    if (route->verb == "list" || route->verb == "get") {
      object_filter filter;
      std::string field_selector = req.get_param_value("fieldSelector");
      if (route->verb == "get")   // a watch on one object
        field_selector = "metadata.name=" + route->name + (field_selector.empty() ? "" : "," + field_selector);
      auto error = filter.parse(route->ns, req.get_param_value("labelSelector"), field_selector);
      if (!error.empty())
        return set_status(res, 400, error);
      if (*watch)
        return start_watch(req, r, std::move(filter), res);
      auto limit = std::strtoull(req.get_param_value("limit").c_str(), nullptr, 10);
      return send(res, store.list(r, filter, limit, req.get_param_value("continue")),
                  wants_table(req) ? &r : nullptr, req);
    }
    json body = req.body.empty() ? json(nullptr) : json::parse(req.body, nullptr, false);
    if (body.is_discarded())
      return set_status(res, 400, "the request body is not valid JSON");
    if (route->verb == "delete")
      return send(res, store.remove(r, route->ns, route->name, body));
    if (route->verb == "patch")
      return send(res, store.patch(r, route->ns, route->name, [&](json& object) {
        return apply_patch(req.get_header_value("Content-Type"), body, object);
      }));
    reply result = route->verb == "create" ? store.create(r, route->ns, std::move(body))
                                           : store.update(r, route->ns, route->name, std::move(body));
    send(res, result);
  }

  /// Sends a reply; a successful object or list as a Table when `table` is set.
  static void send(httplib::Response& res, const reply& r, const resource_type* table,
                   const httplib::Request& req) {
    if (table == nullptr || r.code != 200)
      return send(res, r);
    bool whole = req.get_param_value("includeObject") == "Object";
    if (r.body.contains("items"))
      return set_json(res, 200, as_table(*table, r.body["items"], r.body["metadata"], whole));
    json metadata = {{"resourceVersion", r.body["metadata"]["resourceVersion"]}};
    set_json(res, 200, as_table(*table, json::array({r.body}), metadata, whole));
  }

  // ---- watch ---------------------------------------------------------------

  /// One open watch stream; lives in the chunked content provider.
  struct watch_stream {
    const resource_type* resource = nullptr;
    object_filter filter;
    std::uint64_t since = 0;
    bool bookmarks = false;
    bool table = false;
    bool include_object = false;
    std::string user_agent, identity;
    std::chrono::steady_clock::time_point started, deadline, next_bookmark, hang_since;
    std::deque<std::string> pending;   // lines to write, in order
    bool ending = false;               // end once pending is written
  };

  void start_watch(const httplib::Request& req, const resource_type& r, object_filter filter,
                   httplib::Response& res) {
    auto w = std::make_shared<watch_stream>();
    w->resource = &r;
    w->filter = std::move(filter);
    auto bookmarks = parse_bool(req.get_param_value("allowWatchBookmarks"));
    if (!bookmarks)
      return set_status(res, 400, "allowWatchBookmarks: invalid value");
    w->bookmarks = *bookmarks;
    w->table = wants_table(req);
    w->include_object = req.get_param_value("includeObject") == "Object";
    w->user_agent = req.get_header_value("User-Agent");
    w->identity = req.get_header_value("X-Leasehold-Identity");
    w->started = std::chrono::steady_clock::now();
    auto timeout = std::chrono::seconds(opts.max_watch);
    if (req.has_param("timeoutSeconds")) {
      char* end = nullptr;
      auto text = req.get_param_value("timeoutSeconds");
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < 0)
        return set_status(res, 400, "timeoutSeconds: invalid value \"" + text + "\"");
      if (v > 0)
        timeout = std::min(timeout, std::chrono::seconds(v));
    }
    w->deadline = w->started + timeout;
    auto rv = req.get_param_value("resourceVersion");
    if (rv.empty() || rv == "0") {
      // As the real API: the current objects as ADDED first, then changes.
      auto list = store.list(r, w->filter, 0, "");
      w->since = std::stoull(list.body["metadata"]["resourceVersion"].get<std::string>());
      for (auto& item : list.body["items"])
        w->pending.push_back(event_line("ADDED", *w, item));
    } else {
      char* end = nullptr;
      w->since = std::strtoull(rv.c_str(), &end, 10);
      if (*end != '\0')
        return set_status(res, 400, "resourceVersion: invalid value \"" + rv + "\"");
    }
    if (watches.fetch_add(1) + 16 >= opts.worker_threads) {
      --watches;
      res.set_header("Retry-After", "1");
      return set_status(res, 429, "too many open watches; retry later");
    }
    // With the parameter, cpp-httplib does not gzip the stream (it would hold
    // every event in the compressor until the stream ends).
    res.set_chunked_content_provider(
      "application/json;charset=utf-8",
      [this, w, &req](std::size_t, httplib::DataSink& sink) { return watch_step(*w, req, sink); },
      [this](bool) { --watches; });
  }

  std::string event_line(const std::string& type, const watch_stream& w, const json& object) const {
    if (!w.table)
      return watch_line(type, object);
    json metadata = {{"resourceVersion", object["metadata"]["resourceVersion"]}};
    return watch_line(type, as_table(*w.resource, json::array({object}), metadata, w.include_object));
  }

  /// Queues the lines for the store's events since w.since (selector
  /// transitions become ADDED or DELETED, as the real API sends them).
  void queue_events(watch_stream& w, const watch_batch& batch) {
    for (auto& e : batch.events) {
      bool now = w.filter.matches(e.object);
      bool before = !e.previous.is_null() && w.filter.matches(e.previous);
      if (e.type == "MODIFIED" && now != before)
        w.pending.push_back(event_line(now ? "ADDED" : "DELETED", w, e.object));
      else if (now)
        w.pending.push_back(event_line(e.type, w, e.object));
    }
    w.since = batch.current;
  }

  /// One call of the content provider: writes the next line, ends the
  /// stream, or waits for something to send. false drops the connection.
  bool watch_step(watch_stream& w, const httplib::Request& req, httplib::DataSink& sink) {
    using clock = std::chrono::steady_clock;
    for (;;) {
      auto wakes = store.wakes();
      bool hung = false, drop = false, malformed = false;
      int error_code = 0;
      auto close_at = clock::time_point::max();
      auto bookmark_every = opts.bookmark_interval;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping)
          return false;
        bool partitioned = faults.partition.matches(w.user_agent, w.identity);
        drop = faults.mode == fault_mode::down || (partitioned && !faults.partition.hang);
        hung = faults.mode == fault_mode::hang || faults.watch.hang || partitioned;
        if (faults.watch.close_after_ms > 0) {
          close_at = w.started + std::chrono::milliseconds(faults.watch.close_after_ms);
          drop = drop || (faults.watch.reset && clock::now() >= close_at);
        }
        if (faults.watch.bookmark_ms > 0)
          bookmark_every = std::chrono::milliseconds(faults.watch.bookmark_ms);
        if (!hung && !w.ending && faults.watch.error_events > 0) {
          --faults.watch.error_events;
          error_code = faults.watch.error_status;
        }
        if (!hung && !w.pending.empty() && faults.watch.malformed_lines > 0) {
          --faults.watch.malformed_lines;
          malformed = true;
        }
      }
      auto now = clock::now();
      if (drop) {
        drop_connection(req);
        return false;
      }
      if (now >= close_at || now >= w.deadline || (w.ending && w.pending.empty())) {
        sink.done();
        return true;
      }
      if (!hung) {
        w.hang_since = clock::time_point{};
        if (malformed) {
          static const std::string bad = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\n";
          if (!sink.write(bad.data(), bad.size()))
            return false;
        }
        if (!w.pending.empty()) {
          std::string line = std::move(w.pending.front());
          w.pending.pop_front();
          return sink.write(line.data(), line.size());
        }
        if (error_code != 0) {
          w.pending.push_back(watch_line("ERROR", failure_status(error_code, reason_for(error_code),
                                                                 "injected watch fault: " + reason_for(error_code))));
          w.ending = true;
          continue;
        }
        auto batch = store.events_since(*w.resource, w.since);
        if (batch.expired) {
          w.pending.push_back(watch_line("ERROR", failure_status(410, "Expired",
            "too old resource version: " + std::to_string(w.since) + " (" + std::to_string(batch.oldest) + ")")));
          w.ending = true;
          continue;
        }
        queue_events(w, batch);
        if (!w.pending.empty())
          continue;
        if (w.bookmarks && now >= w.next_bookmark) {
          if (w.next_bookmark != clock::time_point{}) {
            json object = {{"kind", w.resource->kind}, {"apiVersion", w.resource->api_version()},
                           {"metadata", {{"resourceVersion", std::to_string(w.since)}}}};
            w.pending.push_back(watch_line("BOOKMARK", object));
          }
          w.next_bookmark = now + bookmark_every;
          continue;
        }
      } else if (w.hang_since == clock::time_point{}) {
        w.hang_since = now;
      } else if (now - w.hang_since >= opts.hang_limit) {
        drop_connection(req);   // a hung stream is dropped as a hung request
        return false;
      }
      auto until = std::min({w.deadline, close_at, now + std::chrono::seconds(1) * 3600});
      if (hung)
        until = std::min(until, w.hang_since + opts.hang_limit);
      else if (w.bookmarks)
        until = std::min(until, w.next_bookmark);
      store.wait(hung ? std::numeric_limits<std::uint64_t>::max() : w.since, wakes, until);
    }
  }

  static void send(httplib::Response& res, const reply& r) { set_json(res, r.code, r.body); }

  // ---- control -------------------------------------------------------------

  void control(const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/_leasehold/faults" && req.method == "GET") {
      std::lock_guard<std::mutex> lock(mu);
      return set_json(res, 200, faults.to_json());
    }
    if (req.path == "/_leasehold/faults" && req.method == "POST")
      return change_faults(req, res);
    if (req.path == "/_leasehold/stats" && req.method == "GET") {
      std::lock_guard<std::mutex> lock(mu);
      return set_json(res, 200, stats.to_json());
    }
    if (req.path == "/_leasehold/stats/reset" && req.method == "POST") {
      std::lock_guard<std::mutex> lock(mu);
      stats.reset();
      return set_json(res, 200, stats.to_json());
    }
    set_status(res, 404, "unknown control endpoint " + req.method + " " + req.path);
  }

  void change_faults(const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    fault_request change;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mu);
      error = body.is_discarded() ? "the request body is not valid JSON"
                                  : parse_fault_request(body, faults, change);
      if (error.empty()) {
        faults = change.next;
        ++fault_version;
      }
    }
    if (!error.empty())
      return set_status(res, 400, error);
    cv.notify_all();
    store.wake();   // open watch streams see the new faults
    if (change.wipe)
      store.wipe();
    error = set_main_listening(change.next.mode != fault_mode::down);
    log("faults", {{"faults", change.next.to_json()}, {"wipe", change.wipe}, {"error", error}});
    if (!error.empty())
      return set_status(res, 500, error);
    set_json(res, 200, change.next.to_json());
  }

  // ---- snapshot ------------------------------------------------------------

  std::string load_snapshot() {
    std::ifstream in(opts.snapshot_file);
    if (!in)
      return "";   // absent: start empty
    json snap = json::parse(in, nullptr, false);
    if (snap.is_discarded())
      return "snapshot " + opts.snapshot_file + ": not valid JSON";
    return store.restore(snap);
  }

  /// Writes tmp + fsync + rename, so a reader sees the old or the new file.
  std::string write_snapshot(const json& snap) {
    std::string tmp = opts.snapshot_file + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr)
      return "cannot write " + tmp;
    std::string text = snap.dump();
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), opts.snapshot_file.c_str()) != 0)
      return "cannot write " + opts.snapshot_file;
    return "";
  }

  /// Writes whenever the mutation count moved since the last write; the pass
  /// after snapshot_done (listeners joined, no more writers) is the final one.
  void snapshot_loop() {
    std::uint64_t written = snapshot_written;
    for (bool last = false; !last;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        last = cv.wait_for(lock, opts.snapshot_interval, [&] { return snapshot_done; });
      }
      auto current = store.mutations();
      if (current == written)
        continue;
      if (auto error = write_snapshot(store.snapshot()); !error.empty())
        log("snapshot failed", {{"error", error}});
      written = current;
    }
  }

  // ---- lifecycle -----------------------------------------------------------

  start_result start() {
    if (started)
      return {0, "already started"};
    started = true;
    // Writing to a connection the peer (or drop_connection) closed must not
    // kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    if (!opts.snapshot_file.empty())
      if (auto error = load_snapshot(); !error.empty())
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

  void stop() {
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
};

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
