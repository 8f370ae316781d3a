// The watch loop every lease transport shares, whatever its backend: one
// stream per (transport, namespace) on a thread of its own, shared by its
// subscribers. Only for speed, never safety: a subscriber polls while it is
// down (docs/design.md, "Watch streams per backend").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "transport/watch_fanout.hpp"
#include "leasehold/lease_transport.hpp"

namespace leasehold {

/// A Kubernetes server ends each watch stream after about this long (it is
/// reopened at once); without an idle timeout, a stream silent 10 s longer
/// is closed.
inline constexpr int watch_stream_seconds = 300;

/// The loop every lease watch shares: a clean end reopens at once, a failed
/// stream is `down` and retried with backoff; a line over 1 MiB or cut off is
/// malformed. A backend says only how to open its stream and what a line means.
class lease_watch_loop {
public:
  virtual ~lease_watch_loop();
  lease_watch_loop(const lease_watch_loop&) = delete;
  lease_watch_loop& operator=(const lease_watch_loop&) = delete;

  /// A shared stream (with a fanout): req.subscriber follows req.lease
  /// from now on. Called by the transport actor while the stream runs.
  virtual void join(const lease_watch_request& req);

protected:
  /// Events go to req.subscriber, or, with `fanout`, to the subscribers of
  /// a shared stream (up/down to all, a lease's events to its own).
  explicit lease_watch_loop(lease_watch_request req, std::shared_ptr<watch_fanout> fanout = {});
  /// Starts the thread: the last statement of a derived constructor.
  void start();
  /// Stops the stream and joins the thread: the first statement of a
  /// derived destructor.
  void halt();

  /// A stream's request, as errors name it.
  struct request {
    std::string verb;
    std::string path;
  };
  /// The server the last open() talked to, as errors name it
  /// (" (endpoint http://10.0.0.5:2379)"); "" when the request names it.
  virtual std::string endpoint_note() const { return {}; }
  /// Before each stream (the etcd watch reads the current state when it has
  /// no revision to resume from); an error fails this attempt.
  virtual api_error prepare() { return {}; }
  /// The next stream's request, from where the last one stopped.
  virtual request next_request() = 0;
  /// Opens `r` and blocks until the stream ends; see http_client::stream.
  virtual api_error open(const request& r, std::chrono::milliseconds idle,
                         const std::function<void()>& on_open,
                         const std::function<bool(const char*, std::size_t)>& on_data) = 0;
  /// Aborts a blocking open() from another thread.
  virtual void abort() = 0;
  /// One non-empty line: nullopt to read on, or the stream ends (an error
  /// of kind none: an ordinary end, reopened at once). Sets `delivered` when
  /// the line shows the stream is alive.
  virtual std::optional<api_error> on_line(const std::string& line, const request& r,
                                           bool& delivered) = 0;

  /// A malformed_body error naming `r`.
  static api_error malformed(const request& r, std::string reason);
  void send(lease_watch_event ev);
  /// A record or a delete of lease `name`.
  void send_for(const std::string& name, lease_watch_event ev);
  const lease_watch_request& watch_request() const { return req_; }
  /// The subscribers of a shared stream (null without a fanout).
  watch_fanout* fanout() const { return fanout_.get(); }

private:
  void run();           // run_streams(), then finished_
  void run_streams();   // the reconnect loop
  /// One stream; returns why it ended (kind none: the server ended it cleanly).
  api_error stream_once(bool& delivered);
  void set_up(bool up, const std::string& reason);
  /// Sleeps `d` unless stopped first; false when stopped.
  bool wait(caf::timespan d);

  lease_watch_request req_;
  std::shared_ptr<watch_fanout> fanout_;
  bool up_ = false;
  bool said_ = false;   // up_ was reported at least once
  std::atomic<bool> stopping_{false};
  bool finished_ = false;   // under mx_: run() has returned
  bool counted_ = false;    // in census::watch_streams (started, not yet joined)
  std::mutex mx_;
  std::condition_variable cv_;
  std::thread thread_;
};

/// Ends `stream` (halts it and joins its thread) on a detached actor of its
/// own: the transport's dispatcher runs on the scheduler and must not wait.
void retire_stream(caf::actor_system& sys, std::unique_ptr<lease_watch_loop> stream);

/// A transport actor's watches: one stream per namespace, built by
/// `make(ns, idle, fanout)`, ended off the actor's thread when its last
/// subscriber terminates or `leave`s (an elector that sent its release).
template <class Self, class Make>
shared_watches watch_per_namespace(Self* self, Make make) {
  struct shared {
    std::shared_ptr<watch_fanout> fanout;
    std::unique_ptr<lease_watch_loop> stream;
  };
  auto streams = std::make_shared<std::map<std::string, shared>>();
  auto leave = [self, streams](const caf::actor_addr& who) {
    for (auto it = streams->begin(); it != streams->end();) {
      if (it->second.fanout->remove(who) > 0) {
        ++it;
        continue;
      }
      retire_stream(self->system(), std::move(it->second.stream));
      it = streams->erase(it);
    }
  };
  self->set_down_handler([leave](caf::down_msg& m) { leave(m.source); });
  self->attach_functor([&sys = self->system(), streams] {
    for (auto& [ns, s] : *streams)
      retire_stream(sys, std::move(s.stream));
  });
  auto join = [self, streams, make](lease_watch_request& req) {
    if (!req.subscriber)
      return;
    self->monitor(req.subscriber);
    auto& s = (*streams)[req.lease.ns];
    if (!s.stream) {
      s.fanout = std::make_shared<watch_fanout>();
      s.stream = make(req.lease.ns, req.idle_timeout, s.fanout);
    }
    s.stream->join(req);
  };
  return {std::move(join), std::move(leave)};
}

} // namespace leasehold
