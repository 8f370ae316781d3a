#include "actors/runner_view.hpp"

#include <algorithm>

#include "actors/elector.hpp"
#include "actors/handover.hpp"

namespace leasehold {

const char* to_string(runner_state s) {
  switch (s) {
    case runner_state::idle: return "idle";
    case runner_state::follower: return "follower";
    case runner_state::leader: return "leader";
    case runner_state::stepping_down: return "stepping_down";
    case runner_state::stopped: return "stopped";
  }
  return "?";
}

bool legal_transition(runner_state from, runner_state to) {
  using st = runner_state;
  switch (from) {
    case st::idle: return to == st::follower || to == st::stopped;
    case st::follower: return to == st::leader || to == st::idle || to == st::stopped;
    case st::leader: return to == st::stepping_down;
    case st::stepping_down: return to == st::follower || to == st::idle || to == st::stopped;
    case st::stopped: return false;
  }
  return false;
}

caf::timespan safety_room(const election_timings& t) {
  return t.lease_duration - t.renew_deadline - t.module_stop_timeout;
}

caf::timespan unconfirmed_kill_grace(const election_timings& t) {
  return std::min<caf::timespan>(safety_room(t) / 4, std::chrono::milliseconds(100));
}

caf::actor_clock::time_point fatal_deadline(const election_timings& t, std::int64_t valid_until_ns) {
  auto renew_sent = caf::actor_clock::time_point{caf::timespan{valid_until_ns}} - t.renew_deadline;
  return renew_sent + t.lease_duration - safety_room(t) / 2;
}

bool merge_memory(lease_recall& kept, const lease_memory& m, const std::string& identity) {
  bool failing_began = m.api_error_outstanding && !kept.api_error_outstanding;
  kept.max_term = std::max(kept.max_term, m.max_term);
  if (m.own_term)
    kept.own_term = lease_recall::term_id{m.own_term->acquire_time, m.own_term->lease_transitions};
  // The API's health as the latest report says (an elector that has seen
  // no record yet, say through an outage, reports it too).
  kept.api_error_words = m.api_error_words;
  kept.api_error_outstanding = m.api_error_outstanding;
  kept.api_answered = m.api_answered;
  if (m.observed_at >= kept.observed_at || !kept.seen) {
    kept.created_at = m.created_at;
    kept.seen = m.record.has_value();
    kept.version = m.record ? m.record->resource_version : std::string{};
    kept.uid = m.record ? m.record->uid : std::string{};
    kept.own_term_current = record_is_own_term(m, identity);
    kept.observed_at = m.observed_at;
    kept.holder_seen_at = std::max(m.observed_at, m.confirmed_at);
    kept.preferred_successor = preferred_successor(m, identity);
  }
  return failing_began;
}

lease_memory seed_of(const lease_recall& r, const std::string& identity) {
  lease_memory m;
  m.max_term = r.max_term;
  if (r.own_term) {
    m.own_term.emplace();
    m.own_term->holder_identity = identity;
    m.own_term->acquire_time = r.own_term->acquire_time;
    m.own_term->lease_transitions = r.own_term->lease_transitions;
  }
  m.created_at = r.created_at;
  m.api_error_outstanding = r.api_error_outstanding;
  m.api_error_words = r.api_error_words;
  m.api_answered = r.api_answered;
  return m;
}

bool record_is_own_term(const lease_memory& m, const std::string& identity) {
  return m.own_term && m.record && m.record->spec.holder_identity == identity
         && same_term(m.record->spec, *m.own_term);
}

std::string hold_words(const creation_hold_info& h) {
  return "creation hold: term " + std::to_string(h.term) + " starts in "
         + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(h.left).count())
         + "ms";
}

void describe_hold(runtime_event& ev, const creation_hold_info& h) {
  ev.term = h.term;
  ev.value = std::chrono::duration<double, std::milli>(h.left).count();
  ev.reason = hold_words(h);
}

namespace {
std::optional<creation_hold_info> hold_of(const std::optional<caf::actor_clock::time_point>& created_at,
                                          std::int64_t term, caf::timespan lease_duration,
                                          caf::actor_clock::time_point now) {
  if (!created_at)
    return std::nullopt;
  return creation_hold_info{term,
                            std::max(caf::timespan{0}, *created_at + lease_duration - now)};
}
} // namespace

std::optional<creation_hold_info> creation_hold(const lease_memory& m, const std::string& identity,
                                                caf::timespan lease_duration,
                                                caf::actor_clock::time_point now) {
  if (!record_is_own_term(m, identity))
    return std::nullopt;
  return hold_of(m.created_at, m.own_term->lease_transitions, lease_duration, now);
}

std::optional<creation_hold_info> creation_hold(const lease_recall& r, caf::timespan lease_duration,
                                                caf::actor_clock::time_point now) {
  if (!r.own_term_current || !r.own_term)
    return std::nullopt;
  return hold_of(r.created_at, r.own_term->lease_transitions, lease_duration, now);
}

void describe_lease(runner_status& st, const lease_view_input& in) {
  auto ms = [&](caf::actor_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(in.now - since).count();
  };
  auto& m = in.memory;
  // When the holder was last known current: a leader's own renew; else a
  // new version of the record, a read that found it (on etcd a renew
  // changes nothing, so only reads tell) or its session's renewal; in a
  // creation hold, its own renews.
  if (in.leading)
    st.holder_age_ms = ms(in.last_renew);
  else if (m.seen)
    st.holder_age_ms = ms(std::max(m.holder_seen_at, in.holder_renewed_at));
  if (!in.leading && in.elector_alive)
    if (auto hold = creation_hold(m, in.lease_duration, in.now)) {
      st.holder = in.identity;
      st.term = hold->term;
      st.hold_ms = std::chrono::duration_cast<std::chrono::milliseconds>(hold->left).count();
      st.holder_age_ms = std::min(st.holder_age_ms, ms(in.hold_confirmed_at));
    }
  if (m.api_error_outstanding) {
    st.api_unreachable_ms = ms(in.api_failing_since);
    st.api_error = m.api_error_words;
  }
  st.api_answered = m.api_answered;
}

} // namespace leasehold
