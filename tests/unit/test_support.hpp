// Helpers shared by the transport unit tests: fixtures, temporary
// directories, and loopback HTTP servers that are always stopped and joined.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include "leasehold/transports.hpp"
#include "tests/support/temp_dir.hpp"

namespace leasehold::test {

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// A file of tests/fixtures/kubernetes (LEASEHOLD_FIXTURES).
inline std::string fixture(const std::string& name) {
  auto path = env_or("LEASEHOLD_FIXTURES", "tests/fixtures/kubernetes") + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("missing fixture " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Path of the test TLS material (tests/unit/tls).
inline std::string tls_file(const std::string& name) {
  return env_or("LEASEHOLD_SOURCE_ROOT", ".") + "/tests/unit/tls/" + name;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

/// An httplib server (plain or TLS) on 127.0.0.1 and an ephemeral port, run
/// on its own thread; the destructor stops and joins it.
template <class Server = httplib::Server>
class loopback_server {
public:
  template <class... Args>
  explicit loopback_server(Args&&... args) : server_(std::forward<Args>(args)...) {}
  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;
  ~loopback_server() { stop(); }

  Server& http() { return server_; }

  /// Binds and starts serving; call after registering handlers.
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0)
      throw std::runtime_error("bind_to_any_port failed");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }

  int port() const { return port_; }
  std::string url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_);
  }

private:
  Server server_;
  int port_ = 0;
  std::thread thread_;
};

/// A listening TCP socket on 127.0.0.1 and an ephemeral port (`port`).
inline int listen_loopback(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 8) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot listen on 127.0.0.1");
  port = ntohs(addr.sin_port);
  return fd;
}

/// The next connection to listener `fd`, or -1 after a 20 ms poll found
/// none (the caller's loop checks its stop flag and bound between calls).
inline int accept_next(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 20) <= 0)
    return -1;
  return ::accept(fd, nullptr, nullptr);
}

/// A TCP listener on 127.0.0.1 that answers every connection with a fixed
/// byte string (e.g. a response whose body is shorter than its
/// Content-Length) and closes it. Polls with a timeout so stop is prompt.
class raw_server {
public:
  explicit raw_server(std::string response) : response_(std::move(response)) {
    fd_ = listen_loopback(port_);
    thread_ = std::thread([this] { run(); });
  }
  raw_server(const raw_server&) = delete;
  raw_server& operator=(const raw_server&) = delete;
  ~raw_server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
  void run() {
    while (!stop_) {
      int conn = accept_next(fd_);
      if (conn < 0)
        continue;
      read_request_head(conn);
      ::send(conn, response_.data(), response_.size(), MSG_NOSIGNAL);
      ::shutdown(conn, SHUT_RDWR);
      ::close(conn);
    }
  }

  /// Reads until the end of the request (headers and any declared body), bounded.
  static void read_request_head(int conn) {
    std::string got;
    char buf[4096];
    for (int i = 0; i < 50; ++i) {
      pollfd p{conn, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) {
        if (got.find("\r\n\r\n") != std::string::npos)
          return;
        continue;
      }
      auto n = ::recv(conn, buf, sizeof buf, 0);
      if (n <= 0)
        return;
      got.append(buf, static_cast<size_t>(n));
    }
  }

  std::string response_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// A connection to a loopback test server: 200 ms connect, read and write timeouts.
inline connection_config fast_config(const std::string& server) {
  connection_config cfg;
  cfg.server = server;
  cfg.connect_timeout = std::chrono::milliseconds(200);
  cfg.read_timeout = std::chrono::milliseconds(200);
  cfg.write_timeout = std::chrono::milliseconds(200);
  return cfg;
}

/// fast_config for a TLS test server at `url` with the test client
/// certificate and key (as data), and 2 s connect and read timeouts: TLS
/// handshakes on a loaded CI machine.
inline connection_config tls_client_config(const std::string& url) {
  auto cfg = fast_config(url);
  cfg.connect_timeout = std::chrono::seconds(2);
  cfg.read_timeout = std::chrono::seconds(2);
  cfg.client_cert_data = slurp(tls_file("client.crt"));
  cfg.client_key_data = slurp(tls_file("client.key"));
  return cfg;
}

/// tls_client_config the other way round: the CA as data, the client
/// certificate and key as files.
inline void swap_to_certificate_files(connection_config& cfg) {
  cfg.ca_data = slurp(tls_file("ca.crt"));
  cfg.client_cert_data.clear();
  cfg.client_key_data.clear();
  cfg.client_cert_file = tls_file("client.crt");
  cfg.client_key_file = tls_file("client.key");
}

/// A loopback port with nobody listening (bound, then closed).
inline int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Lease bodies as the real API server returns them.
inline std::string lease_body(const std::string& name, const std::string& rv,
                              const std::string& holder, int transitions) {
  return R"({"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":")" +
         name + R"(","namespace":"default","uid":"7d6a6f7c-0f5e-4a8e-9a55-1c6a2f0b3e11",)" +
         R"("resourceVersion":")" + rv +
         R"(","creationTimestamp":"2024-05-01T10:00:00Z","managedFields":[{"manager":)" +
         R"("leasehold","operation":"Update","apiVersion":"coordination.k8s.io/v1",)" +
         R"("time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},)" +
         R"("spec":{"holderIdentity":")" + holder +
         R"(","leaseDurationSeconds":15,"acquireTime":"2024-05-01T10:00:00.123456Z",)" +
         R"("renewTime":"2024-05-01T10:00:02.654321Z","leaseTransitions":)" +
         std::to_string(transitions) + "}}";
}

} // namespace leasehold::test
