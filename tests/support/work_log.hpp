// What leader-only work itself records in the real-time tests: every
// instance of the registered "work" module notes when it ran, for which
// replica and which lease. The checks read this, not what the runtime says
// about itself: never two replicas running one lease's work at once.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/modules.hpp"

namespace leasehold::test {

struct work_log {
  using steady = std::chrono::steady_clock;
  struct interval {
    std::string identity;
    std::string lease;
    steady::time_point start;
    std::optional<steady::time_point> end;
  };
  std::mutex mx;
  std::vector<interval> all;

  std::size_t begin(const std::string& id, const std::string& lease) {
    std::lock_guard<std::mutex> g(mx);
    all.push_back({id, lease, steady::now(), std::nullopt});
    return all.size() - 1;
  }
  void end(std::size_t i) {
    std::lock_guard<std::mutex> g(mx);
    all[i].end = steady::now();
  }
  /// Instances running now.
  int running() {
    std::lock_guard<std::mutex> g(mx);
    int n = 0;
    for (auto& i : all)
      n += i.end ? 0 : 1;
    return n;
  }
  /// Running instances per identity.
  std::map<std::string, int> loads() {
    std::lock_guard<std::mutex> g(mx);
    std::map<std::string, int> out;
    for (auto& i : all)
      if (!i.end)
        ++out[i.identity];
    return out;
  }
  /// Pairs of intervals of one lease, run by different replicas, that overlap.
  int overlaps() {
    std::lock_guard<std::mutex> g(mx);
    int n = 0;
    auto far = steady::now() + std::chrono::hours(24);
    for (std::size_t a = 0; a < all.size(); ++a)
      for (std::size_t b = a + 1; b < all.size(); ++b)
        if (all[a].lease == all[b].lease && all[a].identity != all[b].identity
            && all[a].start < all[b].end.value_or(far) && all[b].start < all[a].end.value_or(far))
          ++n;
    return n;
  }
};

/// A registry with one leader-only type, "work", whose instances record
/// their life in `log` (replica: the identity, lease: the fence's).
inline std::shared_ptr<module_registry> work_registry(work_log& log) {
  auto reg = std::make_shared<module_registry>();
  reg->add({"work", true,
            [&log](caf::actor_system& s, const module_context& ctx) {
              return s.spawn([&log, ctx](caf::event_based_actor* self) -> caf::behavior {
                auto i = log.begin(ctx.identity, ctx.fence.lease.name);
                self->attach_functor([&log, i] { log.end(i); });
                return {[](leadership_changed&) {}};
              });
            },
            nullptr});
  return reg;
}

} // namespace leasehold::test
