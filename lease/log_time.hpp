// The timestamp of the agent's and the apiserver's log lines, journal and
// health answers. Not public: an embedding program logs in its own format.
// Defined in lease/lease.cpp, beside the Lease's MicroTime (one RFC 3339
// formatter for both).
#pragma once

#include <string>

#include "leasehold/lease.hpp"

namespace leasehold {

/// The one timestamp of every log line (key `time`): RFC 3339, UTC, with
/// milliseconds, `2026-12-03T10:00:00.123Z` (as client-go's JSON logs).
std::string format_log_time(wall_clock::time_point t);

} // namespace leasehold
