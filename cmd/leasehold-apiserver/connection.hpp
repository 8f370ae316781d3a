// leasehold-apiserver's connections: one read buffer per connection, so that
// requests a client pipelines are all answered, in order (cpp-httplib 0.11
// answered one of a batch; cmd/leasehold-apiserver/README.md, 'Connections').
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "cmd/leasehold-apiserver/listener.hpp"

namespace leasehold::apiserver {

/// The one stream of a connection, plain (ssl null) or TLS, with the read
/// and write timeouts of the server.
class connection_stream final : public httplib::Stream {
public:
  connection_stream(socket_t sock, SSL* ssl, int read_timeout_ms, int write_timeout_ms);

  /// Bytes to read now (buffered, or OpenSSL's) or within the read timeout.
  bool is_readable() const override;
  /// Room to write within the write timeout, and the peer has not closed.
  bool is_writable() const override;
  ssize_t read(char* ptr, std::size_t size) override;
  ssize_t write(const char* ptr, std::size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

  /// Waits for the next request: true once a byte of it is buffered or the
  /// socket has something (bytes or its end); false after `idle_ms` without,
  /// or once the server socket is closed (checked every 100 ms).
  bool next_request(const std::atomic<socket_t>& server_socket, long idle_ms);

  /// An answer begins; one with a Content-Length body is held whole, so that
  /// head and body go in one write.
  void begin_answer() { head_next_ = true; }
  /// The answer ended; what is held waits for the answer of a pipelined request
  /// already here (up to 64 KiB), never for bytes (README.md, 'Connections').
  void end_answer();
  /// Sends what is held; false on failure.
  bool flush();

private:
  bool buffered() const;
  /// One read into the empty buffer, waiting at most the read timeout.
  ssize_t fill();
  bool write_all(const char* ptr, std::size_t size);
  ssize_t write_some(const char* ptr, std::size_t size);

  socket_t sock_;
  SSL* ssl_;
  int read_timeout_ms_, write_timeout_ms_;
  std::vector<char> buf_;
  std::size_t off_ = 0, end_ = 0;
  bool head_next_ = false;
  bool holding_ = false;   // the answer being written is held whole (Content-Length)
  std::string out_;        // held answers, sent by flush()
  // The connection's endpoints, looked up once (every request asks them).
  mutable std::optional<endpoint> remote_, local_;
};

/// An httplib server (Server or SSLServer) whose connections each keep one
/// connection_stream; all else is httplib's.
template <class Base>
class pipelined_server final : public Base {
public:
  using Base::Base;

private:
  bool process_and_close_socket(socket_t sock) override;
  /// Serves the connection's requests in order until it ends.
  bool serve(connection_stream& strm, SSL* ssl);

  std::mutex ssl_mu_;   // SSL_new and SSL_free on the shared context
};

using plain_server = pipelined_server<httplib::Server>;
using tls_server = pipelined_server<httplib::SSLServer>;

extern template class pipelined_server<httplib::Server>;
extern template class pipelined_server<httplib::SSLServer>;

} // namespace leasehold::apiserver
