#include "cmd/leasehold-apiserver/listener.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "transport/http/listen.hpp"

namespace leasehold::apiserver {

endpoint endpoint_of(const sockaddr_storage& sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return {text, ntohs(in->sin_port)};
  }
  if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return {text, ntohs(in6->sin6_port)};
  }
  return {};
}

namespace {

/// Shuts down every connected socket for which match(local, peer) holds.
template <class Match>
void shutdown_sockets(Match match) {
  for_each_fd([&](int fd) {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
        match(endpoint_of(local), endpoint_of(peer)))
      ::shutdown(fd, SHUT_RDWR);
  });
}

/// drop_connection was called on this thread (took_drop).
thread_local bool dropped_here = false;

} // namespace

bool took_drop() {
  return std::exchange(dropped_here, false);
}

void drop_connection(const httplib::Request& req) {
  dropped_here = true;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (req.ssl != nullptr) {
    ::shutdown(SSL_get_fd(req.ssl), SHUT_RDWR);
    return;
  }
#endif
  shutdown_sockets([&](const endpoint& local, const endpoint& peer) {
    return local.port == req.local_port && local.addr == req.local_addr &&
           peer.port == req.remote_port && peer.addr == req.remote_addr;
  });
}

void drop_connections(int port) {
  shutdown_sockets([&](const endpoint& local, const endpoint&) { return local.port == port; });
}

std::string listener::start(const std::string& host, int port, const std::string& setting) {
  std::string error;
  port_ = bind_exclusive(*server_, host, port, setting, error);
  if (port_ <= 0)
    return error;
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    finished_ = true;
  });
  // httplib's stop() is a no-op until the accept loop runs: wait for it.
  for (int i = 0; i < 5000 && !server_->is_running() && !finished_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return "";
}

elastic_pool::elastic_pool(std::size_t max_threads, std::size_t keep,
                           std::chrono::milliseconds idle_exit, std::size_t stack_bytes)
  : max_(std::max<std::size_t>(max_threads, 1)), keep_(keep), stack_(stack_bytes),
    idle_exit_(idle_exit) {}

elastic_pool::~elastic_pool() { shutdown(); }

void elastic_pool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> g(mu_);
  reap();
  jobs_.push_back(std::move(fn));
  if (idle_ >= jobs_.size() || running_.size() >= max_) {
    cv_.notify_one();
    return;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_);
  pthread_t t;
  if (pthread_create(&t, &attr, &elastic_pool::start, this) == 0)
    running_.push_back(t);
  pthread_attr_destroy(&attr);
  if (running_.empty()) {   // not even one thread: run it here rather than never
    auto job = std::move(jobs_.back());
    jobs_.pop_back();
    job();
  }
}

void* elastic_pool::start(void* self) {
  static_cast<elastic_pool*>(self)->run();
  return nullptr;
}

void elastic_pool::run() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    ++idle_;
    bool woke = cv_.wait_for(g, idle_exit_, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty() && (stopping_ || (!woke && running_.size() > keep_))) {
      if (!stopping_) {   // ended on its own: joined by a later enqueue or shutdown
        auto self = pthread_self();
        auto it = std::find_if(running_.begin(), running_.end(),
                               [&](pthread_t t) { return pthread_equal(t, self); });
        if (it != running_.end())
          running_.erase(it);
        ended_.push_back(self);
      }
      return;
    }
    if (jobs_.empty())
      continue;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    g.unlock();
    job();
    g.lock();
  }
}

void elastic_pool::reap() {
  for (auto t : ended_)
    pthread_join(t, nullptr);
  ended_.clear();
}

void elastic_pool::shutdown() {
  std::vector<pthread_t> all;
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
    all.swap(running_);
    reap();
  }
  cv_.notify_all();
  for (auto t : all)
    pthread_join(t, nullptr);
  std::lock_guard<std::mutex> g(mu_);
  reap();
}

std::size_t elastic_pool::threads() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_.size();
}

std::size_t elastic_pool::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return jobs_.size();
}

std::size_t elastic_pool::busy() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_.size() - std::min(idle_, running_.size());
}

} // namespace leasehold::apiserver
