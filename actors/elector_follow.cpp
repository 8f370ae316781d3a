#include "actors/elector.hpp"

#include <algorithm>

#include "actors/handover.hpp"

// What the elector knows of the lease and the API: the watch's events, the
// record in memory, when a follower wakes, and the API's health.

namespace leasehold {

// -- watch -----------------------------------------------------------------

void elector_actor::on_watch(lease_watch_event& ev) {
  using kind = lease_watch_event::kind;
  if (release_asked())
    return;
  switch (ev.what) {
    case kind::up:
    case kind::down: {
      bool up = ev.what == kind::up;
      if (up)
        answered();   // the API answered the watch's GET
      if (watch_said_ && up == watch_up_)
        return;
      watch_said_ = true;
      watch_up_ = up;
      if (up)
        watch_up_since_ = clock().now();
      emit(event_type::watch_changed, [&](runtime_event& e) {
        e.detail = up ? "up" : "down";
        e.reason = ev.reason;
      });
      // A follower waiting for expiry on the watch's word polls again.
      if (!up && state_ == elector_state::following && !in_flight_)
        schedule_tick(next_delay());
      return;
    }
    case kind::deleted:
      answered();
      delete_streamed_ = clock().now();   // no shared reading stands for the read that tells it
      if (!has_term())
        act_now();   // GET: 404 decides (absent())
      return;
    case kind::record:
      answered();
      if (ev.record)
        on_watched(*ev.record);
      return;
  }
}

void elector_actor::on_watched(const lease& rec) {
  auto order = mem_.record ? compare_versions(rec.resource_version, mem_.record->resource_version)
                           : std::optional<int>{1};
  if (!order) {
    // Versions this API does not let us order: the stream can only tell
    // us that something changed; a GET tells what.
    if (!has_term())
      act_now();
    return;
  }
  if (*order <= 0)
    return;   // a reply already showed this version or a later one
  observe(rec, /*report*/ !own_renewal(rec));
  if (adopt_unanswered(rec)) {
    act_now();   // R2b: the acquisition whose answer was lost stands: renew it now
    return;
  }
  if (held() && same_term(rec.spec, *held())) {
    if (!written_here(rec.spec))
      identity_conflict(rec);
    return;   // our own write
  }
  if (has_term()) {
    lose_rewritten(rec);
    return;
  }
  if (in_flight_) {
    recheck_ = true;
    return;
  }
  if (state_ == elector_state::holding && !holds_unanswered())
    return;   // a hold on a lease we created: its renew schedule decides
  // (An unanswered acquisition's hold, R2b: another's record means it did
  // not land; decide as a follower, which drops the hold.)
  if (held_by_other(rec)) {
    // Waiting on the watch: wake when this renew could expire. Polling:
    // the poll already scheduled stands (a renew must not postpone it).
    // Where the store ends terms, its evidence says when to read.
    if (waits_on_watch()) {
      if (evidence_.store_ends_terms())
        schedule_tick(evidence_.read_streamed_record() ? caf::timespan{0} : next_delay());
      else
        wake_at_expiry();
    }
    return;
  }
  // Released or expired: take this very version with one PUT (step 4).
  in_flight_ = true;
  attempt_started_ = clock().now();
  decide(rec);
}

void elector_actor::wake_at_expiry() {
  auto t = clock().now() + next_delay();
  if (tick_pending_ && tick_attempts_ && !call_out_ && tick_at_ <= t) {
    tick_rechecks_ = true;   // 5,000 renewals/s seen: no timer set for each
    return;
  }
  arm_tick(t, true);
}

/// An attempt as soon as possible (after the one in flight).
void elector_actor::act_now() {
  if (in_flight_)
    recheck_ = true;
  else
    schedule_tick(caf::timespan{0});
}

// -- the record in memory ------------------------------------------------------

bool elector_actor::held_by_other(const lease& rec) const {
  auto& holder = rec.spec.holder_identity;
  if (holder.empty()) {
    // Released by its holder: free. Emptied by anybody else (an operator,
    // a tool): the last holder may still be working; wait a lease
    // duration by our clock, as for an expiry.
    return !released_record(rec.spec) && !expired(rec);
  }
  if (holder == opt_.identity && mem_.own_term && same_term(rec.spec, *mem_.own_term))
    return false;   // a term this replica held and ended: its modules are down
  return evidence_.store_ends_terms() || !expired(rec);
}

bool elector_actor::streamed_later(const lease& answer) const {
  return mem_.record && compare_versions(answer.resource_version, mem_.record->resource_version).value_or(1) < 0;
}

bool elector_actor::own_renewal(const lease& rec) const {
  return has_term() && held() && same_term(rec.spec, *held()) && mem_.record
         && mem_.record->spec.preferred_holder == rec.spec.preferred_holder;
}

void elector_actor::observe(const lease& rec, bool report) {
  bool changed = !mem_.record
                 || mem_.record->resource_version != rec.resource_version
                 || mem_.record->spec != rec.spec;
  if (!changed)
    return;
  bool holder_changed = !mem_.record
                        || mem_.record->spec.holder_identity != rec.spec.holder_identity;
  // Emptied by a write that is not a release: a warning when a holder was
  // seen before (a record first seen empty may be an unheld create).
  bool emptied = holder_changed && mem_.record && rec.spec.holder_identity.empty()
                 && !released_record(rec.spec);
  // Our name's term, not held here, renewed by a write we never sent: another
  // live process under this identity (a restart renews nothing). Said once.
  bool other_self = !holder_changed && !held() && rec.spec.holder_identity == opt_.identity
                    && same_term(rec.spec, mem_.record->spec) && !written_here(rec.spec)
                    && rec.spec.renew_time != mem_.record->spec.renew_time;
  mem_.record = rec;
  mem_.observed_at = clock().now();
  evidence_.record_changed(rec);
  mem_.max_term = std::max<std::int64_t>(mem_.max_term, rec.spec.lease_transitions);
  if (report)
    report_memory();   // else the caller reports once it has noted the rest
  if (emptied)
    emit(event_type::outside_write, [&](runtime_event& ev) {
      ev.term = rec.spec.lease_transitions;
      ev.reason = "holderIdentity was emptied by a write that is not a release; no acquisition for "
                  + std::to_string(rec.spec.lease_duration_seconds.value_or(0)) + "s";
    });
  if (other_self && !std::exchange(identity_held_said_, true))
    emit(event_type::identity_conflict, [&](runtime_event& ev) {
      ev.holder = opt_.identity;
      ev.term = rec.spec.lease_transitions;
      ev.detail = "held";
    });
  if (holder_changed) {
    send(opt_.runner, leader_observed{rec.spec.holder_identity, rec.spec.lease_transitions,
                                      rec.spec.preferred_holder});
    emit(event_type::leader_changed, [&](runtime_event& ev) {
      ev.holder = rec.spec.holder_identity;
      ev.term = rec.spec.lease_transitions;
    });
  }
}

/// When `rec` (the record in memory) expires by our clock.
time_point elector_actor::expires_at(const lease& rec) const {
  caf::timespan dur = opt_.timings.lease_duration;
  if (rec.spec.lease_duration_seconds && *rec.spec.lease_duration_seconds > 0)
    dur = std::chrono::seconds(*rec.spec.lease_duration_seconds);
  return evidence_.expires_at(rec, mem_.observed_at, mem_.observed_at + dur);
}

/// After a failed request the stream may be as dead as the request: it
/// polls until the API answers again.
bool elector_actor::waits_on_watch() const {
  return watch_up_ && !mem_.api_error_outstanding && state_ == elector_state::following && mem_.record
         && held_by_other(*mem_.record);
}

caf::timespan elector_actor::next_delay() {
  if (has_term()) {
    // A failed renew is retried request_timeout after it was sent (at
    // once if it timed out), so two attempts fit in the renew deadline.
    return std::max(caf::timespan{0}, attempt_started_ + timeout() - clock().now());
  }
  auto now = clock().now();
  caf::timespan d;
  if (waits_on_watch()) {
    // The watch tells of every change; nothing to ask until it could
    // expire, by our clock or by what the store's evidence says.
    d = evidence_.stream_wait(view(), now, expires_at(*mem_.record));
  } else {
    std::uniform_real_distribution<double> u(0.0, jitter_factor);
    auto base = opt_.timings.retry_period;
    d = base + caf::timespan{static_cast<caf::timespan::rep>(base.count() * u(rng_))};
  }
  d = evidence_.next_wake(view(), now, d);   // a read it needs sooner, a wait's end
  if (auto until = hold_back(mem_.record ? &*mem_.record : nullptr))
    d = std::min(d, *until - now);
  return d;
}

/// The next renew is due retry_period after the last successful one was
/// *sent* (not after its reply: latency must not push it past the deadline).
void elector_actor::schedule_renew(time_point sent, time_point now) {
  schedule_tick(std::max(caf::timespan{0}, sent + opt_.timings.retry_period - now));
}

/// The next attempt in `delay`; replaces any attempt scheduled before.
void elector_actor::schedule_tick(caf::timespan delay) {
  arm_tick(clock().now() + delay, true);
}

/// Until when this follower leaves the lease alone: a yield window, or a
/// released record that names another preferredHolder (handover.hpp).
std::optional<time_point> elector_actor::hold_back(const lease* rec) const {
  return has_term() ? std::nullopt
                  : hold_back_until(rec, opt_.identity, mem_.observed_at, opt_.timings,
                                    opt_.compete_after, clock().now());
}

// -- the store's evidence (lease_evidence.hpp) ------------------------------------

lease_evidence::view elector_actor::view() const {
  lease_evidence::view v;
  v.record = mem_.record ? &*mem_.record : nullptr;
  v.observed_at = mem_.observed_at;
  v.held_by_other = mem_.record && held_by_other(*mem_.record);
  v.stream_up = watch_up_;
  v.stream_up_since = watch_up_since_;
  return v;
}

/// The evidence may answer a follower's attempt without a request (etcd:
/// another follower's fresh reading); else it reads. True: answered.
bool elector_actor::answered_without_read() {
  if (delete_streamed_ != time_point{} || !waits_on_watch() || hold_back(&*mem_.record))
    return false;
  auto s = evidence_.answer_without_read(view(), clock().now(),
                                         [this] { return next_delay() > caf::timespan{0}; });
  using kind = lease_evidence::shortcut::kind;
  switch (s.what) {
    case kind::confirmed:
      mem_.confirmed_at = std::max(mem_.confirmed_at, s.confirmed_at);   // the holder is current
      report_memory();
      done_attempt();
      return true;
    case kind::look_again:
      done_attempt(s.after);   // nothing asked: look again shortly
      return true;
    case kind::read:
      read_mark_ = std::move(s.read_mark);   // until its answer (get_then_decide)
      return false;
  }
  return false;
}

// -- a standby's first create --------------------------------------------------

/// 5. A standby that never saw a record creates it as nobody's, so the
/// creation hold starts now for whoever leads it (docs/safety.md, "A Lease
/// created unheld starts the same hold for whoever leads it").
void elector_actor::create_unheld() {
  lease l;
  l.name = opt_.lease.name;
  l.ns = opt_.lease.ns;
  l.spec.lease_duration_seconds = duration_seconds(opt_.timings.lease_duration);
  l.spec.acquire_time = l.spec.renew_time = wall_now();
  l.spec.lease_transitions = static_cast<int>(std::max<std::int64_t>(0, mem_.max_term));
  call(clock().now(), "POST", create_lease_atom::value, std::move(l), [=](lease_reply& r) {
    if (!r.ok()) {
      failed(r.error);
      return;
    }
    answered();
    observe(*r.value);
    done_attempt();
  });
}

// -- the API's health ------------------------------------------------------------

/// The log (api_error) reports a lost race every time, an outage once per
/// change of kind, and a refusal once while the same request is refused.
void elector_actor::note_error(const api_error& err) {
  emit(event_type::api_request_failed, [&](runtime_event& ev) { ev.error = err; });
  bool lost_race = is_lost_race(err.kind);
  bool refused = is_refusal(err.kind);
  const auto& last = rare_.seen().last_error;
  bool repeated = refused ? last.kind == err.kind && last.verb == err.verb && last.path == err.path
                          : mem_.api_error_outstanding && err.kind == last.kind;
  if (lost_race || !repeated)
    emit(event_type::api_error, [&](runtime_event& ev) { ev.error = err; });
  rare_.set().last_error = err;
  if (lost_race || refused) {
    answered();
  } else if (!mem_.api_error_outstanding) {
    mem_.api_error_outstanding = true;
    mem_.api_error_words = err.describe();
    report_memory();
  }
}

/// The API answered a request (a record, a write, or "no such lease"):
/// an outstanding error is over, for a follower's GET as for a renew.
/// The last error (rare_state::last_error) stays for the reason of a later lost renew deadline.
void elector_actor::answered() {
  if (!mem_.api_answered) {
    mem_.api_answered = true;
    if (!mem_.api_error_outstanding)
      report_memory();
  }
  if (!mem_.api_error_outstanding)
    return;
  mem_.api_error_outstanding = false;
  report_memory();
  emit(event_type::api_recovered, [&](runtime_event& ev) { ev.error = rare_.seen().last_error; });
}

void elector_actor::wake() {
  auto at = time_point::max();
  if (tick_pending_)
    at = tick_at_;
  if (state_ == elector_state::leading)
    at = std::min(at, valid_until_);   // the renew deadline
  if (at == time_point::max() || (wake_pending_ && wake_at_ <= at))
    return;   // nothing due, or the pending timer comes first: it wakes again for the rest
  wake_at_ = at;
  wake_pending_ = true;
  delayed_send(this, std::max(caf::timespan{0}, at - clock().now()), tick_atom::value, ++wake_seq_);
}

void elector_actor::on_tick() {
  tick_pending_ = false;
  if (call_out_) {
    // An attempt is skipped while a request is out (as attempt() does);
    // the request's deadline is kept.
    if (clock().now() >= call_deadline_)
      time_out_call();
    else
      arm_tick(call_deadline_, false);
    return;
  }
  if (std::exchange(tick_rechecks_, false) && waits_on_watch() && !evidence_.store_ends_terms()) {
    auto d = next_delay();
    if (d > caf::timespan{0}) {
      arm_tick(clock().now() + d, true);   // renewed since it was set
      return;
    }
  }
  if (tick_attempts_)
    attempt();
}

void elector_actor::arm_tick(time_point t, bool attempt) {
  if (tick_pending_ && tick_at_ == t) {
    // A renew answered in time: its next attempt (sent + retry_period) is
    // the tick its request's deadline set (sent + request timeout, equal
    // by default). One timer per renew, not a tick and a request timeout.
    tick_attempts_ = tick_attempts_ || attempt;
    return;
  }
  tick_at_ = t;
  tick_pending_ = true;
  tick_attempts_ = attempt;
  tick_rechecks_ = false;
  wake();
}

void elector_actor::end_call(std::uint64_t seq, lease_reply& r) {
  if (!call_out_ || seq != call_seq_)
    return;   // answered after its deadline: time_out_call() answered it
  call_out_ = false;
  auto f = std::move(call_reply_);
  call_reply_ = nullptr;
  f(r);
}

void elector_actor::time_out_call() {
  auto r = lease_reply::failure(request_error(
    call_verb_, opt_.backend->path_of(call_verb_, opt_.lease), make_error(caf::sec::request_timeout)));
  end_call(call_seq_, r);
}

api_error elector_actor::late_reply(caf::timespan took) const {
  return {error_kind::timeout, 0, "PUT", opt_.backend->path_of("PUT", opt_.lease),
          "answered after " + std::to_string(to_ms(took)) + "ms, past the renew deadline"};
}

api_error elector_actor::request_error(const char* verb, std::string path, const caf::error& e) {
  if (e == caf::sec::request_timeout)
    return {error_kind::timeout, 0, verb, std::move(path),
            "no reply within " + std::to_string(to_ms(timeout())) + "ms"};
  return {error_kind::other, 0, verb, std::move(path),
          "transport: " + describe_exit(e, system()).words};
}

/// A write sent at `sent` falls in the hold of a lease we created: no
/// term starts, and nothing is released, until a lease duration after the create.
bool elector_actor::in_created_hold(time_point sent) const {
  auto hold_ends = created_hold_ends();
  return hold_ends && sent < *hold_ends;
}

/// When the hold of a lease we created ends: a lease duration after the
/// create (none: we did not create it).
std::optional<time_point> elector_actor::created_hold_ends() const {
  if (!mem_.created_at)
    return std::nullopt;
  return *mem_.created_at + opt_.timings.lease_duration;
}

} // namespace leasehold
