// leasehold-apiserver's listeners and connection dropping.
//
// cpp-httplib 0.11 gives a handler no access to its socket, and stop() leaves
// kept-alive connections open until they idle out. To drop connections (a
// partitioned client, an API server going down) we find this process's
// connected TCP sockets by their endpoints and shut them down; httplib then
// sees the connection end and closes its socket.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

namespace leasehold::apiserver {

/// Closes the connection a request arrived on, without an answer.
void drop_connection(const httplib::Request& req);

/// Closes every connection accepted on `port` (after its listener closed).
void drop_connections(int port);

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
