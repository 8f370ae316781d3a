#include "transport/listen.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <httplib.h>

namespace leasehold {

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
  if (bound > 0)
    return bound;
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
