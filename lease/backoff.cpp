#include "lease/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace leasehold {

caf::timespan backoff::next(double unit) {
  double base = static_cast<double>(min_.count()) * std::pow(2.0, std::min(failures_, 30));
  base = std::min(base, static_cast<double>(max_.count()));
  ++failures_;
  double factor = 1.0 + jitter_ * (2.0 * unit - 1.0);
  auto d = static_cast<caf::timespan::rep>(base * factor);
  return caf::timespan{std::max<caf::timespan::rep>(d, 1)};
}

caf::timespan backoff::cap() const {
  return caf::timespan{static_cast<caf::timespan::rep>(max_.count() * (1.0 + jitter_))};
}

} // namespace leasehold
