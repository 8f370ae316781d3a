#include "transport/http/http_pipeline.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "transport/http/http_answer.hpp"
#include "transport/http/tls_files.hpp"

namespace leasehold {

namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

/// The most requests one round writes before reading their answers: a
/// timed-out answer fails the rest of its round, not of the whole batch.
constexpr std::size_t max_pipeline_depth = 32;

struct ctx_deleter {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
};

std::string ssl_error_text() {
  auto code = ERR_get_error();
  if (code == 0)
    return errno != 0 ? std::strerror(errno) : "connection closed";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

/// SIGPIPE blocked on this thread while OpenSSL writes to a socket the
/// server may have closed (an embedding process may not ignore it); one
/// raised meanwhile is taken back before the mask is restored.
class sigpipe_guard {
public:
  sigpipe_guard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~sigpipe_guard() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      timespec zero{0, 0};
      sigtimedwait(&pipe, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

private:
  sigset_t old_;
  bool was_pending_ = false;
};

api_error error_for(const pipelined_request& r, error_kind kind, const std::string& why,
                    bool sent) {
  return {kind, 0, r.verb, r.path,
          why + (sent ? " (sent: may have been applied)" : " (not sent)"), 0};
}

int ms_left(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

} // namespace

struct http_pipeline::impl {
  connection_config cfg;
  endpoint ep;
  std::unique_ptr<SSL_CTX, ctx_deleter> ctx;
  api_error setup_error;   // kind none: usable
  int fd = -1;
  SSL* ssl = nullptr;
  bool want_write = false;   // the last TLS call waits for the socket to take bytes
  // A round's bytes out and in, kept from one batch to the next: a batch's
  // tens of KB allocated and freed anew each time cost more than its parsing.
  std::string wire, in;

  impl(const connection_config& c, const endpoint& e) : cfg(c), ep(e) {
    if (ep.tls)
      setup_tls();
  }
  ~impl() { close(); }

  void fail_setup(std::string reason) {
    setup_error = {error_kind::tls_error, 0, "", "", std::move(reason), 0};
  }

  void setup_tls() {
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx)
      return fail_setup("cannot create a TLS context: " + ssl_error_text());
    SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    std::string err;
    auto id = read_client_identity(cfg, err);
    if (!id)
      return fail_setup(err);
    if (id->cert && (SSL_CTX_use_certificate(ctx.get(), id->cert.get()) != 1 ||
                     SSL_CTX_use_PrivateKey(ctx.get(), id->key.get()) != 1 ||
                     SSL_CTX_check_private_key(ctx.get()) != 1))
      return fail_setup("client certificate and key do not match");
    if (!cfg.ca_data.empty()) {
      auto bio = pem_bio(cfg.ca_data);
      int added = 0;
      while (std::unique_ptr<X509, x509_deleter> ca{
               PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)})
        added += X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.get()) == 1;
      ERR_clear_error();   // the end of the PEM text
      if (added == 0)
        return fail_setup("CA data: no certificate");
    } else if (!cfg.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx.get(), cfg.ca_file.c_str(), nullptr) != 1)
        return fail_setup("cannot load CA certificates from " + cfg.ca_file);
    } else {
      SSL_CTX_set_default_verify_paths(ctx.get());
    }
    SSL_CTX_set_verify(ctx.get(), cfg.insecure_skip_tls_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       nullptr);
  }

  void close() {
    if (ssl) {
      SSL_free(ssl);
      ssl = nullptr;
    }
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
    want_write = false;
  }

  /// A kept connection with bytes or an end waiting while idle: the server
  /// closed it (keep-alive timeout) or it is out of step; not reused.
  bool idle_readable() const {
    if (ssl && SSL_pending(ssl) > 0)
      return true;
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }

  /// Opens the connection (TCP, then TLS); an error (kind and reason) if not.
  std::optional<api_error> open() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &found) != 0)
      return api_error{error_kind::connection_refused, 0, "", "",
                       "cannot connect: cannot resolve " + ep.host, 0};
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> addrs(found, ::freeaddrinfo);
    const auto deadline = steady::now() + cfg.connect_timeout;
    api_error last{error_kind::connection_refused, 0, "", "", "cannot connect", 0};
    for (auto* a = found; a && fd < 0; a = a->ai_next) {
      int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (s < 0)
        continue;
      int rc = ::connect(s, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        rc = ::poll(&p, 1, ms_left(deadline));
        if (rc == 0) {
          ::close(s);
          last = {error_kind::timeout, 0, "", "",
                  "connect timed out after " + std::to_string(cfg.connect_timeout.count()) + "ms", 0};
          continue;
        }
        int so_error = 0;
        socklen_t len = sizeof so_error;
        ::getsockopt(s, SOL_SOCKET, SO_ERROR, &so_error, &len);
        rc = so_error == 0 ? 0 : -1;
        errno = so_error;
      }
      if (rc != 0) {
        last.reason = std::string("cannot connect: ") + std::strerror(errno);
        ::close(s);
        continue;
      }
      int one = 1;
      ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd = s;
    }
    if (fd < 0)
      return last;
    if (ep.tls)
      if (auto err = handshake(deadline)) {
        close();
        return err;
      }
    return std::nullopt;
  }

  std::optional<api_error> handshake(steady::time_point deadline) {
    ssl = SSL_new(ctx.get());
    if (!ssl || SSL_set_fd(ssl, fd) != 1)
      return api_error{error_kind::tls_error, 0, "", "", "TLS: " + ssl_error_text(), 0};
    in6_addr ip;
    bool is_ip = ::inet_pton(AF_INET, ep.host.c_str(), &ip) == 1 ||
                 ::inet_pton(AF_INET6, ep.host.c_str(), &ip) == 1;
    if (!is_ip)
      SSL_set_tlsext_host_name(ssl, ep.host.c_str());
    if (!cfg.insecure_skip_tls_verify) {
      auto* param = SSL_get0_param(ssl);
      if (is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(param, ep.host.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        X509_VERIFY_PARAM_set1_host(param, ep.host.c_str(), 0);
      }
    }
    sigpipe_guard quiet;
    for (;;) {
      ERR_clear_error();
      int rc = SSL_connect(ssl);
      if (rc == 1)
        return std::nullopt;
      int e = SSL_get_error(ssl, rc);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        auto verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK)
          return api_error{error_kind::tls_error, 0, "", "",
                           std::string("server certificate not trusted: ") +
                             X509_verify_cert_error_string(verify), 0};
        return api_error{error_kind::tls_error, 0, "", "",
                         "TLS handshake failed: " + ssl_error_text(), 0};
      }
      pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, ms_left(deadline)) == 0)
        return api_error{error_kind::timeout, 0, "", "",
                         "TLS handshake timed out after " +
                           std::to_string(cfg.connect_timeout.count()) + "ms", 0};
    }
  }

  /// Bytes written (> 0), 0 when the socket takes none now, -1 on an error.
  long write_some(const char* p, std::size_t n) {
    if (!ssl) {
      auto w = ::send(fd, p, n, MSG_NOSIGNAL);
      return w >= 0 ? w : (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    }
    ERR_clear_error();
    int w = SSL_write(ssl, p, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
    if (w > 0)
      return w;
    int e = SSL_get_error(ssl, w);
    want_write = e == SSL_ERROR_WANT_WRITE;
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
  }

  /// Bytes read (> 0), 0 at the connection's end (or an error), -2 when
  /// nothing is there now.
  long read_some(char* p, std::size_t n) {
    if (!ssl) {
      auto r = ::recv(fd, p, n, 0);
      if (r >= 0)
        return r;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -2 : 0;
    }
    ERR_clear_error();
    int r = SSL_read(ssl, p, static_cast<int>(n));
    if (r > 0)
      return r;
    int e = SSL_get_error(ssl, r);
    want_write = e == SSL_ERROR_WANT_WRITE;
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -2 : 0;
  }

  std::vector<api_result<http_response>> exchange(const std::vector<pipelined_request>& reqs);
  /// Sends reqs[out.size()..] (at most max_pipeline_depth) and appends their
  /// results; true when requests are left for another round.
  bool round(const std::vector<pipelined_request>& reqs,
             std::vector<api_result<http_response>>& out);
};

std::vector<api_result<http_response>>
http_pipeline::impl::exchange(const std::vector<pipelined_request>& reqs) {
  std::vector<api_result<http_response>> out;
  out.reserve(reqs.size());
  if (setup_error.kind != error_kind::none) {
    for (auto& r : reqs)
      out.push_back(api_result<http_response>::failure(
        {setup_error.kind, 0, r.verb, r.path, setup_error.reason, 0}));
    return out;
  }
  // Each round answers one request at least, or fails the rest.
  while (out.size() < reqs.size() && round(reqs, out)) {
  }
  return out;
}

bool http_pipeline::impl::round(const std::vector<pipelined_request>& reqs,
                                std::vector<api_result<http_response>>& out) {
  const auto base = out.size();   // this round sends reqs[base..end)
  const auto end = std::min(reqs.size(), base + max_pipeline_depth);
  // From the first unanswered request the round fails, later ones as lost
  // answers; `all`: the requests after the round too (nobody to connect to).
  std::vector<std::size_t> ends;   // where each request's bytes end in `wire`
  std::size_t written = 0;
  auto fail_rest = [&](error_kind kind, const std::string& why, error_kind rest_kind,
                       const std::string& rest_why, bool all = false) {
    const auto first = out.size();
    for (auto i = first; i < (all ? reqs.size() : end); ++i) {
      auto k = i - base;
      bool sent = k < ends.size() && (k == 0 ? 0 : ends[k - 1]) < written;
      out.push_back(api_result<http_response>::failure(
        i == first ? error_for(reqs[i], kind, why, sent)
                   : error_for(reqs[i], rest_kind, rest_why, sent)));
    }
    close();
    return out.size() < reqs.size();
  };
  if (fd >= 0 && idle_readable())
    close();
  if (fd < 0)
    if (auto err = open())
      return fail_rest(err->kind, err->reason, err->kind, err->reason, true);
  wire.clear();
  in.clear();
  for (auto i = base; i < end; ++i) {
    wire += reqs[i].wire;
    ends.push_back(wire.size());
  }
  std::unique_ptr<sigpipe_guard> quiet;
  if (ssl)
    quiet = std::make_unique<sigpipe_guard>();
  std::size_t at = 0;   // the start of the next answer in `in`
  bool eof = false;
  bool write_failed = false;
  auto mark = steady::now();   // the last write progress or complete answer
  char buf[16384];
  const std::string lost = "answer lost: the connection ended before it";
  while (out.size() < end) {
    bool progress = false;
    if (!write_failed && written < wire.size()) {
      auto w = write_some(wire.data() + written, wire.size() - written);
      if (w > 0) {
        written += static_cast<std::size_t>(w);
        progress = true;
        mark = steady::now();
      } else if (w < 0) {
        write_failed = true;   // the answers already on their way are still read
      }
    }
    if (!eof) {
      auto r = read_some(buf, sizeof buf);
      if (r > 0) {
        in.append(buf, static_cast<std::size_t>(r));
        progress = true;
      } else if (r == 0) {
        eof = true;
      }
    }
    while (out.size() < end) {
      auto a = parse_http_answer(in.data() + at, in.size() - at, eof);
      if (a.state == http_answer_parse::malformed)
        return fail_rest(error_kind::malformed_body, "answer unreadable: " + a.error,
                         error_kind::connection_refused,
                         "answer lost: an earlier pipelined answer was unreadable");
      if (a.state == http_answer_parse::incomplete) {
        if (!eof)
          break;
        return a.got_head
                 ? fail_rest(error_kind::malformed_body,
                             "body: truncated (connection closed before the end)",
                             error_kind::connection_refused, lost)
                 : fail_rest(error_kind::connection_refused,
                             "connection closed before its answer",
                             error_kind::connection_refused, lost);
      }
      at += a.consumed;
      mark = steady::now();
      out.push_back(api_result<http_response>::success(std::move(a.response)));
      if (a.close) {
        // A server that says it closes the connection processes no later
        // request on it (RFC 9112, 9.6): those are sent again on a new one.
        close();
        return out.size() < reqs.size();
      }
    }
    if (out.size() == end || progress)
      continue;
    bool writing = !write_failed && written < wire.size();
    auto limit = writing ? cfg.write_timeout : cfg.read_timeout;
    int left = ms_left(mark + limit);
    pollfd p{fd, static_cast<short>(POLLIN | (writing || want_write ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, left) == 0) {   // a thread late to look (left 0) still looks once
      const std::string rest = "answer lost: the batch timed out before it";
      if (writing)
        return fail_rest(error_kind::timeout,
                         "cannot send request: no progress for " +
                           std::to_string(cfg.write_timeout.count()) + "ms",
                         error_kind::timeout, rest);
      return fail_rest(error_kind::timeout,
                       "no response within " + std::to_string(cfg.read_timeout.count()) + "ms",
                       error_kind::timeout, rest);
    }
  }
  if (at != in.size())
    close();   // bytes after the last answer: out of step
  return end < reqs.size();
}

http_pipeline::http_pipeline(const connection_config& cfg, const endpoint& ep)
  : impl_(std::make_unique<impl>(cfg, ep)) {}

http_pipeline::~http_pipeline() = default;

std::vector<api_result<http_response>>
http_pipeline::exchange(const std::vector<pipelined_request>& reqs) {
  try {
    return impl_->exchange(reqs);
  } catch (...) {
    impl_->close();   // out of step with the server: the caller reports the error
    throw;
  }
}

} // namespace leasehold
