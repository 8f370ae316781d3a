#include "cmd/leasehold/clock.hpp"

#include <time.h>

namespace leasehold::agent {

std::int64_t monotonic_ns() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace leasehold::agent
