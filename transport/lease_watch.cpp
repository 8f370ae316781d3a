#include "transport/lease_watch.hpp"

#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "transport/common/backoff.hpp"
#include "transport/common/thread_name.hpp"
#include "transport/kube_client.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

/// Lines longer than this are not watch events of a Lease.
constexpr std::size_t max_line = 1 << 20;
/// The server ends each stream after about this long; we reopen it at once.
constexpr int stream_seconds = 300;

std::string object_version(const json& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object())
    return {};
  auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get<std::string>() : std::string{};
}

} // namespace

parse_result<watch_line> parse_watch_line(const std::string& line) {
  parse_result<watch_line> out;
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "not a JSON object";
    return out;
  }
  auto type = j.find("type");
  auto obj = j.find("object");
  if (type == j.end() || !type->is_string()) {
    out.error = "type: expected a string";
    return out;
  }
  if (obj == j.end() || !obj->is_object()) {
    out.error = "object: expected an object";
    return out;
  }
  watch_line w;
  auto t = type->get<std::string>();
  if (t == "ERROR") {
    w.what = watch_line::type::error;
    w.status_code = obj->value("code", 0);
    w.message = obj->value("message", std::string{});
    out.value = std::move(w);
    return out;
  }
  w.resource_version = object_version(*obj);
  if (t == "BOOKMARK") {
    w.what = watch_line::type::bookmark;
    out.value = std::move(w);
    return out;
  }
  if (t == "ADDED")
    w.what = watch_line::type::added;
  else if (t == "MODIFIED")
    w.what = watch_line::type::modified;
  else if (t == "DELETED")
    w.what = watch_line::type::deleted;
  else {
    out.error = "type: unknown event type \"" + t + "\"";
    return out;
  }
  auto rec = parse_lease(*obj);
  if (!rec.ok()) {
    out.error = "object." + rec.error;
    return out;
  }
  w.record = std::move(rec.value);
  out.value = std::move(w);
  return out;
}

std::string lease_watch_path(const lease_key& k, const std::string& rv, int timeout_seconds) {
  auto path = leases_path(k.ns) + "?watch=1&allowWatchBookmarks=true"
              + (k.name.empty() ? std::string{} : "&fieldSelector=metadata.name%3D" + k.name)
              + "&timeoutSeconds=" + std::to_string(timeout_seconds);
  if (!rv.empty())
    path += "&resourceVersion=" + rv;
  return path;
}

// -- the loop ------------------------------------------------------------------

lease_watch_loop::lease_watch_loop(lease_watch_request req, std::shared_ptr<watch_fanout> fanout)
  : req_(std::move(req)), fanout_(std::move(fanout)) {}

lease_watch_loop::~lease_watch_loop() {
  // A derived class halts first (its abort() is gone by now); this only
  // guards against one that forgot.
  stopping_ = true;
  if (thread_.joinable())
    thread_.join();
}

void lease_watch_loop::join(const lease_watch_request& req) {
  if (fanout_)
    fanout_->add(req.lease.name, req.subscriber);
}

void lease_watch_loop::start() {
  ++census::watch_streams;
  counted_ = true;
  thread_ = std::thread([this] { run(); });
}

void retire_stream(caf::actor_system& sys, std::unique_ptr<lease_watch_loop> stream) {
  if (!stream)
    return;
  std::shared_ptr<lease_watch_loop> s(std::move(stream));
  sys.spawn<caf::detached>([s](caf::blocking_actor*) mutable { s.reset(); });
}

void lease_watch_loop::halt() {
  {
    std::lock_guard<std::mutex> g(mx_);
    stopping_ = true;
  }
  cv_.notify_all();
  // abort() ends the stream in progress; one the thread opens just after it
  // (it had not yet seen stopping_) would block until its idle timeout, so
  // abort again until the thread is done (at most ~5 s of 20 ms rounds).
  abort();
  {
    std::unique_lock<std::mutex> g(mx_);
    for (int i = 0; i < 250 && !finished_; ++i)
      if (!cv_.wait_for(g, std::chrono::milliseconds(20), [this] { return finished_; })) {
        g.unlock();
        abort();
        g.lock();
      }
  }
  if (thread_.joinable())
    thread_.join();
  if (counted_) {
    --census::watch_streams;
    counted_ = false;
  }
}

api_error lease_watch_loop::malformed(const request& r, std::string reason) {
  return api_error{error_kind::malformed_body, 200, r.verb, r.path, std::move(reason), 0};
}

void lease_watch_loop::send(lease_watch_event ev) {
  if (fanout_)
    fanout_->to_all(ev);
  else
    caf::anon_send(req_.subscriber, std::move(ev));
}

void lease_watch_loop::send_for(const std::string& name, lease_watch_event ev) {
  if (fanout_)
    fanout_->to(name, ev);
  else
    caf::anon_send(req_.subscriber, std::move(ev));
}

void lease_watch_loop::set_up(bool up, const std::string& reason) {
  // The first state is always said: a stream that never opens (a watch the
  // API forbids) is reported down once, not left unsaid.
  if (said_ && up == up_)
    return;
  said_ = true;
  up_ = up;
  send({up ? lease_watch_event::kind::up : lease_watch_event::kind::down, std::nullopt, reason});
}

bool lease_watch_loop::wait(caf::timespan d) {
  std::unique_lock<std::mutex> g(mx_);
  return !cv_.wait_for(g, d, [this] { return stopping_.load(); });
}

void lease_watch_loop::run() {
  run_streams();
  std::lock_guard<std::mutex> g(mx_);
  finished_ = true;
  cv_.notify_all();
}

void lease_watch_loop::run_streams() {
  name_this_thread("lh.watch");
  using namespace std::chrono_literals;
  backoff retry(100ms, 5s, 0.2);
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (!stopping_) {
    bool delivered = false;
    auto began = std::chrono::steady_clock::now();
    auto err = prepare();
    if (err.kind == error_kind::none && !stopping_)
      err = stream_once(delivered);
    if (stopping_)
      return;
    bool lasted = std::chrono::steady_clock::now() - began >= 1s;
    if (err.kind == error_kind::none && (delivered || lasted)) {
      retry.reset();   // the server ended a good stream: reopen it at once
      continue;
    }
    if (err.kind != error_kind::none)
      set_up(false, "watch " + err.describe());
    if (!wait(retry.next(unit(rng))))
      return;
  }
}

api_error lease_watch_loop::stream_once(bool& delivered) {
  auto r = next_request();
  std::string buf;
  std::optional<api_error> failure;   // set by a line that ends the stream
  auto idle = req_.idle_timeout.count() > 0
                ? std::chrono::duration_cast<std::chrono::milliseconds>(req_.idle_timeout)
                : std::chrono::milliseconds(stream_seconds * 1000 + 10000);
  auto err = open(
    r, idle, [&] { set_up(true, {}); },
    [&](const char* data, std::size_t n) {
      buf.append(data, n);
      std::size_t start = 0;
      for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n', start)) {
        auto line = buf.substr(start, nl - start);
        start = nl + 1;
        if (line.empty() || line == "\r")
          continue;
        failure = on_line(line, r, delivered);
        if (failure)
          return false;
      }
      buf.erase(0, start);
      if (buf.size() <= max_line)
        return true;
      failure = malformed(r, "watch event line longer than 1 MiB");
      return false;
    });
  if (failure)
    return *failure;
  if (err.kind == error_kind::none && !buf.empty())
    // The connection closed under a half-written line: the server (on etcd,
    // a member) went away. Not a malformed body: every line it finished
    // parsed.
    return api_error{error_kind::disconnected, 0, r.verb, r.path,
                     "the server closed the watch stream inside an event line" + endpoint_note(),
                     0};
  return err;
}

// -- Kubernetes ------------------------------------------------------------------

lease_watcher::lease_watcher(connection_config cfg, lease_watch_request req,
                             std::shared_ptr<watch_fanout> fanout)
  : lease_watch_loop(std::move(req), std::move(fanout)), client_(std::move(cfg)),
    rv_(watch_request().resource_version) {
  start();
}

lease_watcher::~lease_watcher() {
  halt();
}

lease_watch_loop::request lease_watcher::next_request() {
  return {"GET", lease_watch_path(watch_request().lease, rv_, stream_seconds)};
}

api_error lease_watcher::open(const request& r, std::chrono::milliseconds idle,
                              const std::function<void()>& on_open,
                              const std::function<bool(const char*, std::size_t)>& on_data) {
  return client_.stream(r.verb, r.path, nullptr, {}, idle, on_open, on_data);
}

void lease_watcher::abort() {
  client_.stop();
}

std::optional<api_error> lease_watcher::on_line(const std::string& line, const request& r,
                                                bool& delivered) {
  auto parsed = parse_watch_line(line);
  if (!parsed.ok())
    return malformed(r, "malformed watch event: " + parsed.error);
  auto& w = *parsed.value;
  using t = watch_line::type;
  if (w.what == t::error) {
    if (w.status_code == 410) {
      rv_.clear();   // too old: start again from the current state
      return api_error{};   // an ordinary end
    }
    return api_error{error_kind::other, w.status_code, r.verb, r.path,
                     "ERROR event: " + std::to_string(w.status_code) + " " + w.message, 0};
  }
  if (!w.resource_version.empty())
    rv_ = w.resource_version;
  delivered = true;
  if (w.what == t::bookmark)
    return std::nullopt;
  auto name = w.record ? w.record->name : std::string{};
  if (w.what == t::deleted)
    send_for(name, {lease_watch_event::kind::deleted, std::nullopt, {}});
  else
    send_for(name, {lease_watch_event::kind::record, std::move(w.record), {}});
  return std::nullopt;
}

} // namespace leasehold
