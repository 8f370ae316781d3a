#include "transport/http/listen.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <httplib.h>

namespace leasehold {

void for_each_fd(const std::function<void(int)>& f) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return;
  while (dirent* entry = readdir(dir)) {
    int fd = std::atoi(entry->d_name);
    if (fd > 2 && fd != dirfd(dir))
      f(fd);
  }
  closedir(dir);
}

namespace {

/// Debian's cpp-httplib listens with a backlog of 5 and hides its socket: a
/// burst of connects loses SYNs, retried after 1, 3, 7... s. So listen again
/// on our socket with the system's maximum (Linux updates the backlog).
void widen_backlog(int port) {
  for_each_fd([port](int fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0)
      return;
    int local_port = local.ss_family == AF_INET
                       ? ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port)
                       : local.ss_family == AF_INET6
                           ? ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port)
                           : -1;
    if (local_port == port)
      ::listen(fd, SOMAXCONN);
  });
}

} // namespace

int bind_exclusive(httplib::Server& server, const std::string& host, int port,
                   const std::string& setting, std::string& error) {
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  errno = 0;
  int bound = port == 0 ? server.bind_to_any_port(host)
                        : (server.bind_to_port(host, port) ? port : -1);
  int bind_errno = errno;   // httplib keeps bind(2)'s errno (close(2) of the socket succeeds)
  if (bound > 0) {
    widen_backlog(bound);
    return bound;
  }
  error = "cannot listen on " + host + ":" + std::to_string(port);
  if (bind_errno != 0)
    error += std::string(": ") + std::strerror(bind_errno);
  if (bind_errno == EADDRINUSE)
    error += " (another process listens there; choose another port with " + setting + ")";
  else
    error += " (check " + setting + ")";
  return -1;
}

} // namespace leasehold
