#include "actors/handover.hpp"

#include <algorithm>


namespace leasehold {

long long to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

const char* to_string(yield_status s) {
  switch (s) {
    case yield_status::handed_over: return "handed_over";
    case yield_status::not_leading: return "not_leading";
    case yield_status::already_yielding: return "already_yielding";
    case yield_status::unknown_target: return "unknown_target";
    case yield_status::release_failed: return "release_failed";
    case yield_status::not_taken: return "not_taken";
  }
  return "?";
}

lease_spec handover_spec(lease_spec released, const std::string& releaser,
                         const std::string& target) {
  if (!target.empty()) {
    released.preferred_holder = target;
    if (released.strategy.empty())
      released.strategy = handover_strategy;
  } else if (released.preferred_holder == releaser) {
    drop_stale_preference(released, "");
  }
  return released;
}

void drop_stale_preference(lease_spec& s, const std::string& holder) {
  if (s.preferred_holder.empty() || s.preferred_holder == holder)
    return;
  s.preferred_holder.clear();
  if (s.strategy == handover_strategy)
    s.strategy.clear();
}

std::optional<caf::actor_clock::time_point>
hold_back_until(const lease* free_record, const std::string& identity,
                caf::actor_clock::time_point observed_at, const election_timings& t,
                caf::actor_clock::time_point compete_after, caf::actor_clock::time_point now) {
  auto until = compete_after;
  if (free_record && released_record(free_record->spec)) {
    auto& preferred = free_record->spec.preferred_holder;
    if (preferred == identity)
      return std::nullopt;   // named: a yield window of its own does not hold it back
    if (!preferred.empty())
      until = std::max(until, observed_at + preferred_holder_wait(t));
  }
  if (until <= now)
    return std::nullopt;
  return until;
}

std::string preferred_successor(const lease_memory& m, const std::string& identity) {
  if (!m.record || m.record->spec.holder_identity != identity
      || m.record->spec.preferred_holder == identity)
    return {};
  return m.record->spec.preferred_holder;
}

bool may_name(const std::optional<std::vector<std::string>>& candidates, const std::string& target) {
  return !candidates || std::find(candidates->begin(), candidates->end(), target) != candidates->end();
}

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool yield_handover::begin(bool leading, const std::string& identity, const std::string& holder,
                           std::string target, std::string why,
                           std::optional<caf::response_promise> rp,
                           const std::optional<std::vector<std::string>>& candidates) {
  std::optional<yield_result> no;
  if (active_)
    no = yield_result{yield_status::already_yielding, {},
                      "a handover is under way" + (target_.empty() ? std::string()
                                                                   : " (to " + target_ + ")")};
  else if (!leading)
    no = yield_result{yield_status::not_leading, holder,
                      "this replica does not lead"
                        + (holder.empty() || holder == identity ? std::string()
                                                                : " (the leader is " + holder + ")")};
  else if (target == identity)
    no = yield_result{yield_status::unknown_target, {}, "the target " + target + " is this replica"};
  else if (!target.empty() && !may_name(candidates, target))
    no = yield_result{yield_status::unknown_target, {},
                      "the target " + target + " is not a member of this lease's replicas "
                        "(members: " + list_names(*candidates) + "); nothing moved"};
  if (no) {
    if (rp)
      rp->deliver(std::move(*no));
    return false;
  }
  active_ = true;
  target_ = std::move(target);
  why_ = std::move(why);
  rp_ = std::move(rp);
  released_at_.reset();
  return true;
}

caf::actor_clock::time_point yield_handover::on_released(caf::actor_clock::time_point now,
                                                         const election_timings& t,
                                                         std::int64_t term,
                                                         const event_emitter& emit) {
  released_at_ = now;
  ++seq_;
  auto window = yield_window(t, !target_.empty());
  emit(event_type::voluntary_handover, [&](runtime_event& ev) {
    ev.holder = target_;
    ev.term = term;
    ev.reason = why_;
    ev.value = static_cast<double>(to_ms(window));
  });
  return now + window;
}

void yield_handover::on_holder(const std::string& holder, const std::string& identity,
                               caf::actor_clock::time_point now, const election_timings& t) {
  if (!active_ || !released_at_ || holder.empty())
    return;
  auto after = " " + std::to_string(to_ms(now - *released_at_)) + "ms after the release";
  if (holder == identity) {
    fail(yield_status::not_taken, "nobody took the lease within the yield window ("
                                    + std::to_string(to_ms(yield_window(t, !target_.empty())))
                                    + "ms): this replica took it back" + after);
  } else if (target_.empty() || holder == target_) {
    finish({yield_status::handed_over, holder, holder + " took the lease" + after});
  } else {
    finish({yield_status::unknown_target, holder,
            target_ + " did not take the lease within preferred_holder_wait ("
              + std::to_string(to_ms(preferred_holder_wait(t))) + "ms); " + holder + " took it"
              + after});
  }
}

void yield_handover::fail(yield_status status, std::string reason) {
  if (active_)
    finish({status, {}, std::move(reason)});
}

void yield_handover::on_timeout(std::uint64_t seq) {
  if (seq == seq_)
    fail(yield_status::not_taken, "nobody took the lease within the yield window");
}

void yield_handover::finish(yield_result r) {
  if (rp_)
    rp_->deliver(std::move(r));
  rp_.reset();
  active_ = false;
  released_at_.reset();
}

} // namespace leasehold
