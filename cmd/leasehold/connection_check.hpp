// Start-up checks of the credentials a connection_config names, so that a
// bad CA file or an unreadable token is a clear error at start-up instead of
// an endless series of TLS or 401 failures. (An unreachable server is not an
// error: the agent keeps trying.)
#pragma once

#include <string>
#include <vector>

#include "leasehold/transports.hpp"

namespace leasehold::agent {

/// One message per problem, naming the file.
std::vector<std::string> check_connection_files(const connection_config& cfg);

} // namespace leasehold::agent
