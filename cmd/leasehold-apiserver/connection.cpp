#include "cmd/leasehold-apiserver/connection.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "cmd/leasehold-apiserver/listener.hpp"

namespace leasehold::apiserver {

namespace {

int poll_one(pollfd& p, int timeout_ms) {
  int r;
  do
    r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  return r;
}

/// poll() for `events` on one socket; > 0: ready (or ended), 0: timed out.
int wait_for(socket_t sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  return poll_one(p, timeout_ms);
}

/// Whether `head` is a whole answer head announcing a body (a
/// Content-Length above 0), so that a body write follows it.
bool announces_body(const char* head, std::size_t size) {
  std::string_view h(head, size);
  static constexpr std::string_view field = "\r\nContent-Length: ";
  auto at = h.find(field);
  if (at == std::string_view::npos || h.size() < 4 || h.substr(h.size() - 4) != "\r\n\r\n")
    return false;
  auto digit = h.begin() + static_cast<std::ptrdiff_t>(at + field.size());
  return digit != h.end() && *digit >= '1' && *digit <= '9';
}

void set_nonblocking(socket_t sock, bool on) {
  int flags = ::fcntl(sock, F_GETFL, 0);
  ::fcntl(sock, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

/// The TLS handshake of an accepted connection, each step bounded by
/// `timeout_ms` (as httplib's SSLServer does it); null when it failed.
SSL* accept_tls(socket_t sock, SSL_CTX* ctx, std::mutex& mu, int timeout_ms) {
  SSL* ssl;
  {
    std::lock_guard<std::mutex> g(mu);
    ssl = SSL_new(ctx);
  }
  if (ssl == nullptr)
    return nullptr;
  set_nonblocking(sock, true);
  bool ok = SSL_set_fd(ssl, sock) == 1;
  for (int r; ok && (r = SSL_accept(ssl)) != 1;) {
    int err = SSL_get_error(ssl, r);
    short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    ok = events != 0 && wait_for(sock, events, timeout_ms) > 0;
  }
  set_nonblocking(sock, false);
  if (ok)
    return ssl;
  std::lock_guard<std::mutex> g(mu);
  SSL_free(ssl);
  return nullptr;
}

endpoint name_of(socket_t sock, bool peer) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&sa), &len)
               : ::getsockname(sock, reinterpret_cast<sockaddr*>(&sa), &len);
  return r == 0 ? endpoint_of(sa) : endpoint{};
}

int to_ms(time_t sec, time_t usec) {
  return static_cast<int>(std::min<long long>(INT_MAX, sec * 1000LL + usec / 1000));
}

constexpr std::size_t max_held = 256 * 1024;            // a held answer's bytes, at most
constexpr std::size_t max_pipelined_held = 64 * 1024;   // held for the next pipelined answer
constexpr int tls_retries = 1000;   // SSL_read/SSL_write WANT_* rounds, as httplib

} // namespace

// ---- connection_stream ---------------------------------------------------------

connection_stream::connection_stream(socket_t sock, SSL* ssl, int read_timeout_ms,
                                     int write_timeout_ms)
  : sock_(sock), ssl_(ssl), read_timeout_ms_(read_timeout_ms),
    write_timeout_ms_(write_timeout_ms), buf_(16 * 1024) {
  if (ssl_ != nullptr)
    SSL_clear_mode(ssl_, SSL_MODE_AUTO_RETRY);
}

bool connection_stream::buffered() const {
  return off_ < end_ || (ssl_ != nullptr && SSL_has_pending(ssl_) == 1);
}

bool connection_stream::is_readable() const {
  return buffered() || wait_for(sock_, POLLIN, read_timeout_ms_) > 0;
}

bool connection_stream::is_writable() const {
  pollfd p{sock_, POLLIN | POLLOUT, 0};
  int r = poll_one(p, 0);
  if (r >= 0 && (p.revents & POLLOUT) == 0) {   // no room now: wait for it, then look again
    if (wait_for(sock_, POLLOUT, write_timeout_ms_) <= 0)
      return false;
    r = poll_one(p, 0);
  }
  if (r <= 0 || (p.revents & POLLOUT) == 0)
    return false;
  // Alive unless the peer's end is what there is to read (httplib's
  // is_socket_alive: a watch stream notices a client that left).
  if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0)
    return true;
  char byte;
  return ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t connection_stream::fill() {
  off_ = end_ = 0;
  if (ssl_ == nullptr) {
    auto receive = [this](int flags) {
      ssize_t n;
      do
        n = ::recv(sock_, buf_.data(), buf_.size(), flags);
      while (n < 0 && errno == EINTR);
      return n;
    };
    // Mostly the bytes are there (next_request saw them): no poll first.
    ssize_t n = receive(MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      n = wait_for(sock_, POLLIN, read_timeout_ms_) > 0 ? receive(0) : -1;
    if (n > 0)
      end_ = static_cast<std::size_t>(n);
    return n;
  }
  for (int i = 0; i < tls_retries; ++i) {
    int n = SSL_read(ssl_, buf_.data(), static_cast<int>(buf_.size()));
    if (n > 0) {
      end_ = static_cast<std::size_t>(n);
      return n;
    }
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_ZERO_RETURN)
      return 0;
    if (err != SSL_ERROR_WANT_READ)
      return -1;
    if (SSL_has_pending(ssl_) != 1 && wait_for(sock_, POLLIN, read_timeout_ms_) <= 0)
      return -1;
  }
  return -1;
}

ssize_t connection_stream::read(char* ptr, std::size_t size) {
  if (off_ == end_) {
    if (!flush())   // the answers held for this batch, before any wait for more bytes
      return -1;
    if (ssl_ != nullptr && !is_readable())
      return -1;
    if (auto n = fill(); n <= 0)
      return n;
  }
  auto n = std::min(size, end_ - off_);
  std::memcpy(ptr, buf_.data() + off_, n);
  off_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t connection_stream::write(const char* ptr, std::size_t size) {
  if (head_next_) {
    head_next_ = false;
    holding_ = announces_body(ptr, size);
  }
  if (holding_) {
    out_.append(ptr, size);
    if (out_.size() >= max_held && !flush())   // a large body goes out as it is written
      return -1;
    return static_cast<ssize_t>(size);
  }
  if (!flush())   // what is held goes first (a watch stream after pipelined answers)
    return -1;
  return write_some(ptr, size);
}

void connection_stream::end_answer() {
  head_next_ = holding_ = false;
  if (!(buffered() && out_.size() < max_pipelined_held))
    flush();
}

bool connection_stream::flush() {
  if (out_.empty())
    return true;
  bool ok = write_all(out_.data(), out_.size());
  out_.clear();   // its room stays for the next batch (growing it again cost ~10 % of the store's CPU)
  return ok;
}

bool connection_stream::write_all(const char* ptr, std::size_t size) {
  for (ssize_t k; size > 0; ptr += k, size -= static_cast<std::size_t>(k))
    if ((k = write_some(ptr, size)) <= 0)
      return false;
  return true;
}

ssize_t connection_stream::write_some(const char* ptr, std::size_t size) {
  if (!is_writable())
    return -1;
  if (ssl_ == nullptr) {
    ssize_t n;
    do
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  int len = static_cast<int>(std::min<std::size_t>(size, INT_MAX));
  for (int i = 0; i < tls_retries; ++i) {
    int n = SSL_write(ssl_, ptr, len);
    if (n > 0)
      return n;
    if (SSL_get_error(ssl_, n) != SSL_ERROR_WANT_WRITE ||
        wait_for(sock_, POLLOUT, write_timeout_ms_) <= 0)
      return -1;
  }
  return -1;
}

void connection_stream::get_remote_ip_and_port(std::string& ip, int& port) const {
  if (!remote_)
    remote_ = name_of(sock_, true);
  ip = remote_->addr;
  port = remote_->port;
}

void connection_stream::get_local_ip_and_port(std::string& ip, int& port) const {
  if (!local_)
    local_ = name_of(sock_, false);
  ip = local_->addr;
  port = local_->port;
}

bool connection_stream::next_request(const std::atomic<socket_t>& server_socket, long idle_ms) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::milliseconds(idle_ms);
  while (server_socket != INVALID_SOCKET) {
    if (buffered())
      return true;
    if (!flush())
      return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0)
      return false;
    int r = wait_for(sock_, POLLIN, static_cast<int>(std::min<long long>(left, 100)));
    if (r != 0)
      return r > 0;
  }
  return false;
}

// ---- pipelined_server ----------------------------------------------------------

template <class Base>
bool pipelined_server<Base>::serve(connection_stream& strm, SSL* ssl) {
  std::function<void(httplib::Request&)> setup;
  if (ssl != nullptr)
    setup = [ssl](httplib::Request& req) { req.ssl = ssl; };
  bool ret = false;
  for (auto count = this->keep_alive_max_count_;
       count > 0 && strm.next_request(this->svr_sock_, this->keep_alive_timeout_sec_ * 1000L); --count) {
    bool closed = false;
    strm.begin_answer();
    ret = this->process_request(strm, count == 1, closed, setup);
    if (took_drop())   // cut as a network would: what it held is lost with it
      return false;
    strm.end_answer();
    if (!ret || closed)
      break;
  }
  strm.flush();   // the last answers, held for a request that will not be served
  return ret;
}

template <class Base>
bool pipelined_server<Base>::process_and_close_socket(socket_t sock) {
  int read_ms = to_ms(this->read_timeout_sec_, this->read_timeout_usec_);
  int write_ms = to_ms(this->write_timeout_sec_, this->write_timeout_usec_);
  SSL* ssl = nullptr;
  if constexpr (std::is_same_v<Base, httplib::SSLServer>) {
    ssl = accept_tls(sock, this->ssl_context(), ssl_mu_, read_ms);
    if (ssl == nullptr) {
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
  }
  bool ret;
  {
    connection_stream strm(sock, ssl, read_ms, write_ms);
    ret = serve(strm, ssl);
  }
  if (ssl != nullptr) {
    if (ret)   // as httplib: a close_notify only when the connection seemed fine
      SSL_shutdown(ssl);
    std::lock_guard<std::mutex> g(ssl_mu_);
    SSL_free(ssl);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

template class pipelined_server<httplib::Server>;
template class pipelined_server<httplib::SSLServer>;

} // namespace leasehold::apiserver
