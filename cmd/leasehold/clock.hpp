// The monotonic clock of the journal (wall times: format_log_time in lease/log_time.hpp).
#pragma once

#include <chrono>
#include <cstdint>

namespace leasehold::agent {

/// CLOCK_MONOTONIC in nanoseconds: comparable between processes on one host.
std::int64_t monotonic_ns();

} // namespace leasehold::agent
