#include "cmd/leasehold/yield_route.hpp"

#include <algorithm>
#include <thread>

namespace leasehold::agent {

namespace {

yield_result answer(yield_status s, std::string successor, std::string reason) {
  return {s, std::move(successor), std::move(reason)};
}

/// Writes preferredHolder `target` on the Lease (GET, then PUT on its
/// resourceVersion; a lost race reads again). "" on success, else why not.
std::string write_preferred(caf::actor_system& sys, const yield_route& r, const std::string& target,
                            const std::string& holder) {
  caf::scoped_actor self{sys};
  std::string why = "no answer";
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::optional<lease> rec;
    self->request(r.transport, r.request_timeout, get_lease_atom::value, r.lease)
      .receive([&](const lease_reply& rep) {
                 if (rep.ok())
                   rec = *rep.value;
                 else
                   why = rep.error.describe();
               },
               [&](const caf::error& e) { why = "GET: " + caf::to_string(e); });
    if (!rec)
      return why;
    if (rec->spec.holder_identity != holder)
      return "the lease changed hands meanwhile (held by \"" + rec->spec.holder_identity + "\")";
    rec->spec.preferred_holder = target;
    if (rec->spec.strategy.empty())
      rec->spec.strategy = handover_strategy;
    bool retry = false;
    bool done = false;
    self->request(r.transport, r.request_timeout, update_lease_atom::value, *rec)
      .receive([&](const lease_reply& rep) {
                 if (rep.ok())
                   done = true;
                 else if (rep.kind() == error_kind::conflict)
                   retry = true;
                 else
                   why = rep.error.describe();
               },
               [&](const caf::error& e) { why = "PUT: " + caf::to_string(e); });
    if (done)
      return "";
    if (!retry)
      return why;
    why = "PUT: conflict (the holder renewed meanwhile), five times";
  }
  return why;
}

} // namespace

std::optional<yield_result> yield_anywhere(caf::actor_system& sys, const yield_route& r,
                                           const std::string& to) {
  auto local = r.local(to);
  if (!local || local->status != yield_status::not_leading)
    return local;
  auto st = r.status();
  if (!st || st->holder.empty() || st->holder == r.identity)
    return local;   // nobody to carry it to
  auto holder = st->holder;
  if (!r.transport)
    return answer(yield_status::not_leading, holder,
                  local->reason + "; on etcd a yield goes to the holder's own agent");
  auto target = to.empty() ? r.identity : to;
  if (target == holder)
    return answer(yield_status::unknown_target, holder,
                  "\"" + target + "\" already holds the lease; nothing moved");
  if (auto err = write_preferred(sys, r, target, holder); !err.empty())
    return answer(yield_status::not_leading, holder,
                  "this agent does not lead; writing preferredHolder " + target + " on Lease "
                    + r.lease.to_string() + " for the holder " + holder + " failed: " + err);
  auto deadline = std::chrono::steady_clock::now() + r.timeout;
  std::string now_holder = holder;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto s = r.status(); s && !s->holder.empty() && s->holder != holder) {
      now_holder = s->holder;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto via = "carried through the store: preferredHolder " + target + " written on Lease "
             + r.lease.to_string() + ", the holder " + holder;
  if (now_holder == holder)
    return answer(yield_status::not_taken, holder, via + " has not handed over");
  return answer(now_holder == target ? yield_status::handed_over : yield_status::unknown_target,
                now_holder, via + " handed it over");
}

} // namespace leasehold::agent
