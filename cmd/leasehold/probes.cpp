#include "cmd/leasehold/probes.hpp"

#include <algorithm>

namespace leasehold::agent {

namespace {

probe_result pass() {
  return {true, {{"status", "ok"}}};
}

probe_result fail(const std::string& reason) {
  return {false, {{"status", "unhealthy"}, {"reason", reason}}};
}

} // namespace

probe_result liveness(const std::optional<runner_status>& st, const election_timings& t) {
  if (!st)
    return fail("runner did not answer");
  auto grace = std::max<caf::timespan>(t.retry_period, std::chrono::seconds(1));
  auto limit = t.lease_duration + grace;
  auto limit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
  if (st->state == runner_state::leader && st->ms_since_renew > limit_ms)
    return fail("lease watchdog: leading but the last renewal was " + std::to_string(st->ms_since_renew)
                + "ms ago (limit lease_duration + grace = " + std::to_string(limit_ms) + "ms)");
  if (st->state == runner_state::stopped)
    return fail("runner stopped");
  if (st->state != runner_state::idle && !st->electing)
    return fail("election not running (state " + std::string(to_string(st->state)) + ")");
  return pass();
}

probe_result module_health(const runner_status& st) {
  auto ms = [](caf::timespan d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  for (auto& m : st.modules) {
    if (m.state != module_state::failed)
      continue;
    auto why = "module " + m.name + " is crash-looping: crashed more than "
               + std::to_string(m.max_restarts) + " times within " + ms(m.within) + "ms";
    if (m.leader_only && m.name == st.handover_module)
      why += "; leadership handed over, competing again in " + ms(st.handover_backoff) + "ms";
    else if (m.leader_only)
      why += "; it runs again in this replica's next term";
    else
      why += "; not restarted again";
    return fail(why);
  }
  if (st.handover_backoff.count() >= 0)
    return fail("module " + st.handover_module + " crash-looped; leadership handed over, competing "
                "again in " + ms(st.handover_backoff) + "ms");
  if (!st.healthy)
    return fail("runner reports unhealthy");
  return pass();
}

probe_result health(const std::optional<runner_status>& st, const election_timings& t) {
  auto live = liveness(st, t);
  return live.ok ? module_health(*st) : live;
}

probe_result readiness(const std::optional<runner_status>& st, const election_timings& t) {
  if (!st)
    return fail("runner did not answer");
  if (st->state == runner_state::stopped)
    return fail("runner stopped");
  if (st->state == runner_state::idle && !st->electing)
    return pass();   // no leader-only module enabled: nothing to elect for
  if (!st->electing)
    return fail("not electing (state " + std::string(to_string(st->state)) + ")");
  auto bound_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.renew_deadline).count();
  if (st->state == runner_state::leader) {
    // A leader whose fence is valid is ready, whatever the API does meanwhile:
    // its term runs until the renew deadline, and it is the one doing the work.
    if (st->ms_since_renew > bound_ms)
      return fail("leading, but the last renew was " + std::to_string(st->ms_since_renew)
                  + "ms ago (renew_deadline " + std::to_string(bound_ms) + "ms)");
    return module_health(*st);
  }
  // A follower rides out an API blip shorter than renew_deadline (the
  // leader's own patience); longer, it could not take over if it had to.
  if (st->api_unreachable_ms > bound_ms)
    return fail("lease API failing for " + std::to_string(st->api_unreachable_ms)
                + "ms (longer than renew_deadline, " + std::to_string(bound_ms) + "ms): " + st->api_error);
  if (!st->api_answered)
    return fail("the API has not answered yet");
  return module_health(*st);
}

} // namespace leasehold::agent
