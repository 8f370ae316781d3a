// Small text-file helpers: token, CA and config files are read whole and
// trimmed by the transports and the agent alike.
#pragma once

#include <optional>
#include <string>

namespace leasehold {

/// Whole file contents; nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);
/// `s` without leading and trailing spaces, tabs and line breaks.
std::string trim_whitespace(const std::string& s);

} // namespace leasehold
