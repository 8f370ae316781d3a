// One Kubernetes watch stream of one Lease, on a thread of its own, feeding
// lease_watch_event messages to a subscriber (the elector).
//
//   GET .../namespaces/NS/leases?watch=1&fieldSelector=metadata.name=NAME
//       &resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=T
//
// The stream is bounded and restartable: a stream that ends is reopened
// after the last resourceVersion delivered; 410 Gone (the version is no
// longer kept) restarts from the current state; a stream silent for the
// idle timeout, a malformed line, an ERROR event or a failed connect closes
// it with a `down` event naming the request, and it is retried with backoff.
// The subscriber polls while the watch is down: nothing here is needed for
// safety, only for speed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "transport/kube_client.hpp"
#include "leasehold/lease_transport.hpp"

namespace leasehold {

/// What one line of a watch stream says.
struct watch_line {
  enum class type { added, modified, deleted, bookmark, error } what = type::error;
  std::optional<lease> record;          // added / modified / deleted
  std::string resource_version;         // of the object (every type but error)
  int status_code = 0;                  // error: the Status's code (410: Gone)
  std::string message;                  // error: the Status's message
};

/// Parses one line; the error names what is wrong ("object.spec...: ...").
parse_result<watch_line> parse_watch_line(const std::string& line);

/// The path of the watch request for `k` from `rv` ("" = current state first).
std::string lease_watch_path(const lease_key& k, const std::string& rv, int timeout_seconds);

class lease_watcher {
public:
  lease_watcher(connection_config cfg, lease_watch_request req);
  /// Stops the stream and joins the thread (promptly: the blocking read is aborted).
  ~lease_watcher();
  lease_watcher(const lease_watcher&) = delete;
  lease_watcher& operator=(const lease_watcher&) = delete;

private:
  void run();
  /// One stream; returns why it ended (kind none: the server ended it cleanly).
  api_error stream_once(bool& delivered);
  void send(lease_watch_event ev);
  void set_up(bool up, const std::string& reason);
  /// Sleeps `d` unless stopped first; false when stopped.
  bool wait(caf::timespan d);

  kube_client client_;
  lease_watch_request req_;
  std::string rv_;
  bool up_ = false;
  std::atomic<bool> stopping_{false};
  std::mutex mx_;
  std::condition_variable cv_;
  std::thread thread_;
};

} // namespace leasehold
