#include "actors/elector.hpp"

#include <algorithm>

#include "actors/handover.hpp"

// The elector's pure rules and how a term ends: lost, given up on an
// identity conflict, or released when asked.

namespace leasehold {

// -- the pure rules ----------------------------------------------------------------

const char* to_string(elector_state s) {
  switch (s) {
    case elector_state::following: return "following";
    case elector_state::holding: return "holding";
    case elector_state::leading: return "leading";
    case elector_state::closing: return "closing";
    case elector_state::releasing: return "releasing";
    case elector_state::ended: return "ended";
  }
  return "?";
}

bool legal_transition(elector_state from, elector_state to) {
  using st = elector_state;
  switch (from) {
    case st::following: return to == st::holding || to == st::leading || to == st::closing;
    case st::holding: return to == st::following || to == st::leading || to == st::closing;
    case st::leading: return to == st::releasing || to == st::ended;
    case st::closing: return to == st::releasing || to == st::ended;
    case st::releasing: return to == st::ended;
    case st::ended: return false;
  }
  return false;
}

lease_spec acquired_spec(const lease_spec& old, const std::string& identity,
                         caf::timespan lease_duration, wall_time now, std::int64_t max_term_seen) {
  lease_spec s;
  s.holder_identity = identity;
  s.lease_duration_seconds = duration_seconds(lease_duration);
  s.acquire_time = now;
  s.renew_time = now;
  s.lease_transitions
    = static_cast<int>(std::max<std::int64_t>(old.lease_transitions, max_term_seen) + 1);
  s.preferred_holder = old.preferred_holder;   // another writer's: kept for its own term
  s.strategy = old.strategy;
  drop_stale_preference(s, identity);
  return s;
}

lease_spec renewed_spec(const lease_spec& held, caf::timespan lease_duration, wall_time now) {
  lease_spec s = held;
  s.lease_duration_seconds = duration_seconds(lease_duration);
  s.renew_time = now;
  return s;
}

bool same_term(const lease_spec& a, const lease_spec& b) {
  return a.holder_identity == b.holder_identity && a.acquire_time == b.acquire_time
         && a.lease_transitions == b.lease_transitions;
}

lease_spec released_spec(const lease_spec& held, wall_time now) {
  lease_spec s = held;
  s.holder_identity.clear();
  s.lease_duration_seconds = 1;
  s.acquire_time = now;
  s.renew_time = now;
  return s;
}

std::optional<int> compare_versions(const std::string& rv, const std::string& known) {
  auto parse = [](const std::string& v) -> std::optional<unsigned long long> {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoull(v);
  };
  auto a = parse(rv);
  auto b = parse(known);
  if (!a || !b)
    return std::nullopt;
  return *a < *b ? -1 : (*a == *b ? 0 : 1);
}

caf::timespan renew_ride_limit(const election_timings& t) {
  return std::max(caf::timespan{0},
                  std::min(t.retry_period / 2, (t.renew_deadline - t.retry_period) / 4));
}

// -- a term lost -------------------------------------------------------------------

void elector_actor::lose_rewritten(const lease& rec) {
  lose("lease " + opt_.lease.to_string() + " was rewritten by another writer (holder \""
       + rec.spec.holder_identity + "\", leaseTransitions "
       + std::to_string(rec.spec.lease_transitions) + ")");
}

/// The term ends (leading or releasing -> ended): the fence is void at
/// once, the runner told, a release asked meanwhile answered (not
/// released), and the elector exits.
void elector_actor::lose(std::string reason) {
  if (!set_state(elector_state::ended))
    return;
  fence_.valid_until->store(0);
  send(opt_.runner, leadership_lost{std::move(reason)});
  answer_release(false);
  quit();
}

// -- identity ----------------------------------------------------------------

/// Every record this elector sent carries its renewTime; a record of our
/// own term with a renewTime we never sent was written by another process
/// using our identity (a copied config, two agents on one host).
void elector_actor::remember_write(const lease_spec& s) {
  if (!s.renew_time)
    return;
  sent_renew_times_[renew_times_next_++ % sent_renew_times_.size()] = *s.renew_time;
}

bool elector_actor::written_here(const lease_spec& s) const {
  auto written = sent_renew_times_.begin()
                 + std::min<std::size_t>(renew_times_next_, sent_renew_times_.size());
  return !s.renew_time
         || std::find(sent_renew_times_.begin(), written, *s.renew_time) != written;
}

void elector_actor::identity_conflict(const lease& rec) {
  auto why = "another process renewed lease " + opt_.lease.to_string()
             + " under this replica's identity \"" + opt_.identity
             + "\" (two replicas with one identity)";
  // A release asked during the read that showed it: the record is not ours
  // alone, so nothing is released; the release is answered now (lose() or
  // done_attempt() -> release_step()).
  bool asked = release_asked();
  emit(event_type::identity_conflict, [&](runtime_event& e) {
    e.holder = rec.spec.holder_identity;
    e.term = rec.spec.lease_transitions;
    if (asked)
      e.reason = "release asked: not released, nothing written";
  });
  if (has_term()) {
    lose(why);
    return;
  }
  // Our unannounced hold (a created lease) is not ours alone: give it up.
  drop_hold();
  mem_.created_at.reset();
  report_memory();
  done_attempt();   // closing: answers the release (release_step: no term of ours)
}

// -- release ---------------------------------------------------------------

/// Releases only the term this elector wrote: a record with another
/// holder, acquireTime or leaseTransitions is somebody else's.
bool elector_actor::holds_own_term() const {
  return has_term() && held() && mem_.record && same_term(mem_.record->spec, *held());
}

void elector_actor::release_step(int tries) {
  if (!holds_own_term()) {
    finish_release(false);
    return;
  }
  lease l = *mem_.record;
  l.spec = handover_spec(released_spec(l.spec, wall_now()), opt_.identity,
                         rare_.seen().release_target);
  in_flight_ = true;
  call(clock().now(), "PUT", update_lease_atom::value, std::move(l),
       [=](lease_reply& r) {
         in_flight_ = false;
         if (r.ok()) {
           observe(*r.value);
           emit(event_type::lease_released, [&](runtime_event& ev) { ev.term = term_; });
           finish_release(true);
         } else if (r.kind() == error_kind::conflict && may_retry_release(tries)) {
           reread_then_release(tries + 1);
         } else if (r.kind() != error_kind::conflict && may_retry_release(tries)) {
           note_error(r.error);
           release_step(tries + 1);
         } else {
           note_error(r.error);
           finish_release(false);
         }
       });
}

void elector_actor::reread_then_release(int tries) {
  in_flight_ = true;
  call(clock().now(), "GET", get_lease_atom::value, opt_.lease, [=](lease_reply& r) {
    in_flight_ = false;
    if (!r.ok()) {
      finish_release(false);
      return;
    }
    observe(*r.value);
    release_step(tries);   // releases only if the record is still exactly our term
  });
}

bool elector_actor::may_retry_release(int tries) const {
  return tries < 3 && clock().now() < release_deadline_;
}

void elector_actor::finish_release(bool released) {
  if (!set_state(elector_state::ended))
    return;
  answer_release(released);
  quit();
}

/// The runner's release request, if one is out, gets its answer (once).
void elector_actor::answer_release(bool released) {
  if (rare_ && rare_->release_rp) {
    rare_->release_rp->deliver(released);
    rare_->release_rp.reset();
  }
}

} // namespace leasehold
