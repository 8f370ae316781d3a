// Time stamps shared by the log and the journal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace leasehold::agent {

/// RFC 3339 in UTC with milliseconds: `2024-05-04T12:16:15.781Z`.
std::string rfc3339_ms(std::chrono::system_clock::time_point t);

/// CLOCK_MONOTONIC in nanoseconds: comparable between processes on one host.
std::int64_t monotonic_ns();

} // namespace leasehold::agent
