#include "cmd/leasehold-apiserver/listener.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "transport/listen.hpp"

namespace leasehold::apiserver {

namespace {

struct endpoint {
  std::string addr;
  int port = -1;
};

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

/// Shuts down every connected socket for which match(local, peer) holds.
template <class Match>
void shutdown_sockets(Match match) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return;
  while (dirent* entry = readdir(dir)) {
    int fd = std::atoi(entry->d_name);
    if (fd <= 2 || fd == dirfd(dir))
      continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
        match(endpoint_of(local), endpoint_of(peer)))
      ::shutdown(fd, SHUT_RDWR);
  }
  closedir(dir);
}

} // namespace

void drop_connection(const httplib::Request& req) {
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

} // namespace leasehold::apiserver
