// Binding an httplib server exclusively: httplib sets SO_REUSEPORT, so a
// second process on a busy port would bind "fine" and share its connections.
// SO_REUSEADDR only: a restarted server may reuse a port in TIME_WAIT.
#pragma once

#include <functional>
#include <string>

namespace httplib {
class Server;
}

namespace leasehold {

/// Binds `server` to host:port (0: a free port) with SO_REUSEADDR only and a
/// SOMAXCONN backlog: the bound port, or -1 with `error` naming the address,
/// the reason and `setting`, the flag or config field the port came from.
int bind_exclusive(httplib::Server& server, const std::string& host, int port,
                   const std::string& setting, std::string& error);

/// Calls `f` with every open descriptor of this process above 2 (read from
/// /proc/self/fd; nothing if it cannot be read).
void for_each_fd(const std::function<void(int)>& f);

} // namespace leasehold
