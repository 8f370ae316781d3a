#include "cmd/leasehold/yield_route.hpp"

#include <thread>

namespace leasehold::agent {

namespace {

/// Writes preferredHolder `target` on the lease's record (read, then written
/// on the version read; a lost race reads again). "" on success, else why not.
std::string write_preferred(const yield_route& r, const std::string& target,
                            const std::string& holder) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto rec = r.read();
    if (!rec.ok())
      return rec.error.describe();
    if (rec.value->spec.holder_identity != holder)
      return "the lease changed hands meanwhile (held by \"" + rec.value->spec.holder_identity + "\")";
    rec.value->spec.preferred_holder = target;
    if (rec.value->spec.strategy.empty())
      rec.value->spec.strategy = handover_strategy;
    auto w = r.write(*rec.value);
    if (w.ok())
      return "";
    if (w.kind() != error_kind::conflict)
      return w.error.describe();
  }
  return "conflict (the record changed meanwhile), five times";
}

} // namespace

std::optional<yield_result> yield_anywhere(const yield_route& r, const std::string& to) {
  auto local = r.local(to);
  if (!local || local->status != yield_status::not_leading)
    return local;
  auto st = r.status();
  if (!st || st->holder.empty() || st->holder == r.identity || !r.read)
    return local;   // nobody to carry it to
  auto holder = st->holder;
  auto target = to.empty() ? r.identity : to;
  if (target == holder)
    return yield_result{yield_status::unknown_target, holder,
                        "\"" + target + "\" already holds the lease; nothing moved"};
  if (auto err = write_preferred(r, target, holder); !err.empty())
    return yield_result{yield_status::not_leading, holder,
                        "this agent does not lead; writing preferredHolder " + target + " on lease "
                          + r.lease.to_string() + " for the holder " + holder + " failed: " + err};
  auto deadline = std::chrono::steady_clock::now() + r.timeout;
  std::string now_holder = holder;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto s = r.status(); s && !s->holder.empty() && s->holder != holder) {
      now_holder = s->holder;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto via = "carried through the store: preferredHolder " + target + " written on lease "
             + r.lease.to_string() + ", the holder " + holder;
  if (now_holder == holder)
    return yield_result{yield_status::not_taken, holder, via + " has not handed over"};
  return yield_result{now_holder == target ? yield_status::handed_over
                                           : yield_status::unknown_target,
                      now_holder, via + " handed it over"};
}

} // namespace leasehold::agent
