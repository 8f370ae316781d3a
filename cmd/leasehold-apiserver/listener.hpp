// leasehold-apiserver's listeners and connection dropping. cpp-httplib 0.11
// gives a handler no access to its socket, so a connection is dropped by
// finding this process's TCP socket by its endpoints and shutting it down.
#pragma once

#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace leasehold::apiserver {

/// A socket's address as text and port, as httplib puts them in a Request.
struct endpoint {
  std::string addr;
  int port = -1;
};

endpoint endpoint_of(const sockaddr_storage& sa);

/// Closes the connection a request arrived on, without an answer; the thread
/// serving it learns so from took_drop().
void drop_connection(const httplib::Request& req);

/// Whether this thread dropped its connection since it last asked (then it
/// serves no more of that connection's pipelined requests, as in a cut).
bool took_drop();

/// Closes every connection accepted on `port` (after its listener closed).
void drop_connections(int port);

/// The threads of a listener (httplib's TaskQueue): one per connection being
/// served, started on demand up to `max_threads`, idle ones ending down to
/// `keep` (docs/apiserver.md, 'Scale').
class elastic_pool : public httplib::TaskQueue {
public:
  elastic_pool(std::size_t max_threads, std::size_t keep,
               std::chrono::milliseconds idle_exit = std::chrono::seconds(30),
               std::size_t stack_bytes = 512 * 1024);
  ~elastic_pool() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  std::size_t threads() const;   // started and not ended
  std::size_t busy() const;
  std::size_t queued() const;    // jobs no thread has taken yet

private:
  static void* start(void* self);
  void run();
  /// Joins the threads that ended on their own (mu_ held).
  void reap();

  const std::size_t max_, keep_, stack_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<pthread_t> running_, ended_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

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
  std::string start(const std::string& host, int port, const std::string& setting);

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

} // namespace leasehold::apiserver
