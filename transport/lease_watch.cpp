#include "transport/lease_watch.hpp"

#include <chrono>
#include <random>

#include "lease/backoff.hpp"
#include "transport/thread_name.hpp"
#include "transport/transport_pool.hpp"

namespace leasehold {

namespace {

/// Lines longer than this are not watch events of a Lease.
constexpr std::size_t max_line = 1 << 20;

} // namespace

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
  // A stream the thread opens just after abort() would block until its idle
  // timeout: abort again until the thread is done (at most ~5 s).
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
                : std::chrono::milliseconds(watch_stream_seconds * 1000 + 10000);
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
    // Cut off mid-line: the server went away. Not a malformed body: every
    // line it finished parsed.
    return api_error{error_kind::disconnected, 0, r.verb, r.path,
                     "the server closed the watch stream inside an event line" + endpoint_note(),
                     0};
  return err;
}

} // namespace leasehold
