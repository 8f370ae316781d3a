// Binding an httplib server exclusively. httplib's default socket options
// set SO_REUSEPORT, so a second process on a busy port would bind "fine" and
// the kernel would split connections between the two; every listener of the
// project binds through bind_exclusive instead (SO_REUSEADDR only: a
// restarted server may reuse a port in TIME_WAIT, never one that listens).
#pragma once

#include <functional>
#include <string>

namespace httplib {
class Server;
}

namespace leasehold {

/// Binds `server` to host:port (port 0: a free port) with SO_REUSEADDR only,
/// listening with the system's largest backlog (SOMAXCONN) instead of
/// httplib's 5, so a burst of connects is queued, not dropped.
/// Returns the bound port, or -1 with `error` naming the address, the
/// reason (e.g. "address already in use") and `setting`, the flag or
/// config field the port came from.
int bind_exclusive(httplib::Server& server, const std::string& host, int port,
                   const std::string& setting, std::string& error);

/// Calls `f` with every open descriptor of this process above 2 (read from
/// /proc/self/fd; nothing if it cannot be read).
void for_each_fd(const std::function<void(int)>& f);

} // namespace leasehold
