#include "actors/elector_actor.hpp"

#include <algorithm>

#include "actors/handover.hpp"
#include "actors/outside_writes.hpp"

// What the elector knows of the lease and the API: the watch's events, the
// record in memory, when a follower wakes, the API's health, and the writes
// from outside the protocol (outside_writes.hpp). The class and the
// decision path they feed: actors/elector_actor.hpp, actors/elector.cpp.

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
    // etcd: a new key comes without its TTL; read it at once.
    if (waits_on_watch()) {
      if (opt_.backend->server_expiry)
        schedule_tick(mem_.ttl_read_at ? next_delay() : caf::timespan{0});
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

/// Another replica (or a former process under our name) holds `rec` and
/// it has not expired by our clock.
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
  return opt_.backend->server_expiry || !expired(rec);
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
  mem_.ttl_read_at.reset();   // another record: another key or lease
  mem_.ttl_zero_since.reset();
  mem_.ttl_zero_revision = 0;
  mem_.outside_wait_until.reset();
  mem_.hold_next_create = false;
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
  return mem_.observed_at + dur;
}

/// A follower of a held lease whose stream is up asks nothing until the
/// lease could expire. After a failed request the stream may be as dead
/// as the request: it polls until the API answers again (a request, the
/// stream reopening, or an event on it).
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
    // The watch tells of every change; nothing to ask until it could expire.
    // With server expiry the record never tells when: a keepalive changes
    // neither the record nor its version, so the time since it last
    // changed passes a lease duration while it is still held, and waking
    // then would poll without pause. The watch streams the key's deletion
    // (the stream's own quiet read guards the stream); the TTL readings of
    // the holder's etcd lease (outside_writes.hpp: next_ttl_read) say when
    // the key could be in its last second, and the followers of that
    // lease share them (follow_shared_reading: no request while a newer
    // reading of n >= 2 s is there). Without shared readings (timings
    // outside ttl_tells_expiry, a key without a lease) a read every half
    // lease duration confirms the holder (the holder view counts from it:
    // docs/operations.md).
    // A record without a holder (emptied, or created unheld) is waited out
    // by our clock on etcd too: wake when it expires.
    d = opt_.backend->server_expiry && !mem_.record->spec.holder_identity.empty()
          ? (shares_ttl_readings() ? opt_.timings.lease_duration : opt_.timings.lease_duration / 2)
          : std::max(caf::timespan{0}, expires_at(*mem_.record) - now);
  } else {
    std::uniform_real_distribution<double> u(0.0, jitter_factor);
    auto base = opt_.timings.retry_period;
    d = base + caf::timespan{static_cast<caf::timespan::rep>(base.count() * u(rng_))};
  }
  if (opt_.backend->server_expiry && mem_.record && !mem_.outside_wait_until
      && ttl_tells_expiry(opt_.timings, ttl_of(*mem_.record))) {
    if (shares_ttl_readings() && read_spread_ < 0)
      read_spread_ = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_);
    d = next_ttl_read(mem_, opt_.timings, now, d,
                      shares_ttl_readings() ? static_cast<double>(read_spread_) : 0.0);
  }
  if (mem_.outside_wait_until && *mem_.outside_wait_until > now)
    d = std::min(d, *mem_.outside_wait_until - now);   // wake when the wait ends
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

// -- writes from outside the protocol (outside_writes.hpp) ---------------------

/// etcd: a read sent at `sent` reported the key's remaining TTL, read
/// rec.ttl_age before the transport began it (a reading shared by the keys
/// of one etcd lease): it counts from sent - ttl_age, no later than its
/// real send time.
void elector_actor::note_ttl(const lease& rec, time_point sent) {
  if (!opt_.backend->server_expiry || !rec.ttl_seconds)
    return;
  auto left = std::max<std::int64_t>(0, *rec.ttl_seconds);
  if (left != 0)
    mem_.ttl_zero_since.reset();
  else if (!mem_.ttl_zero_since || mem_.ttl_left != 0)
    mem_.ttl_zero_since = clock().now();   // the reply of the first read of 0
  mem_.ttl_zero_revision = left == 0 ? rec.read_revision : 0;
  mem_.ttl_read_at = sent - std::chrono::duration_cast<caf::timespan>(rec.ttl_age);
  mem_.ttl_left = left;
}

/// etcd: whether this follower's TTL readings come from its transport's
/// shared readings of the holder's etcd lease (follow_shared_reading):
/// a held key bound to an etcd lease, timings under which a reading tells
/// an expiry, a transport that shares its readings.
bool elector_actor::shares_ttl_readings() const {
  if (!opt_.backend->ttl_status_of || !mem_.record)
    return false;
  auto& id = mem_.record->etcd_lease_id;
  return !id.empty() && id != "0" && !mem_.record->spec.holder_identity.empty()
         && ttl_tells_expiry(opt_.timings, ttl_of(*mem_.record));
}

/// etcd, a follower's attempt while its stream is up (waits_on_watch) and
/// the key is held: the stream shows every change of the key (a PUT, the
/// DELETE of an expiry or revoke), so a range would tell nothing new; what
/// it needs is a fresh TTL reading (next_ttl_read). Its transport's latest
/// reading of the key's etcd lease, taken by another follower's read after
/// this follower's own, serves if it says n >= 2 s and its next read is
/// still ahead: noted as its own (counted from its real send), no request.
/// Else, while another follower's read of that lease is in flight (begun
/// after this follower's own reading, less than a request timeout ago),
/// it waits for that read's reading (a short wake, no request); else it is
/// its turn: it marks its read in flight for the others and reads. Only
/// while what it knows says n >= 2 s: a reading of 0 or 1 s never serves
/// and is never waited for, so the ran-out judgment (judge_vanished_key)
/// rests on this follower's own reads of the key in its last seconds,
/// exactly as before. A wait can only make its reading older or later,
/// which costs time, never safety (docs/safety.md). False: read
/// (get_then_decide).
bool elector_actor::follow_shared_reading() {
  if (delete_streamed_ != time_point{} || !waits_on_watch() || !shares_ttl_readings()
      || mem_.outside_wait_until || hold_back(&*mem_.record))
    return false;
  auto& id = mem_.record->etcd_lease_id;
  auto s = opt_.backend->ttl_status_of(id);
  if ((s.latest && s.latest->ttl_seconds < 2) || (mem_.ttl_read_at && mem_.ttl_left < 2))
    return false;
  auto now = clock().now();
  auto since = [now](std::chrono::nanoseconds age) {
    return now - std::chrono::duration_cast<caf::timespan>(age);
  };
  if (s.latest && (!mem_.ttl_read_at || since(s.latest->age) > *mem_.ttl_read_at)) {
    auto sent = since(s.latest->age);
    mem_.ttl_read_at = sent;
    mem_.ttl_left = s.latest->ttl_seconds;
    mem_.ttl_zero_since.reset();
    mem_.ttl_zero_revision = 0;
    if (next_delay() > caf::timespan{0}) {
      mem_.confirmed_at = std::max(mem_.confirmed_at, sent);   // its etcd lease lives: the holder is current
      report_memory();
      done_attempt();
      return true;
    }
    // too old to wait on: read, unless a read is in flight
  }
  auto rt = opt_.timings.effective_request_timeout();
  if (s.read_begun && *s.read_begun < rt
      && (!mem_.ttl_read_at || since(*s.read_begun) > *mem_.ttl_read_at)) {
    using namespace std::chrono_literals;
    done_attempt(std::clamp<caf::timespan>(rt / 100, 5ms, 50ms));   // nothing asked: look again shortly
    return true;
  }
  if (opt_.backend->ttl_read_begins)
    ttl_read_mark_ = opt_.backend->ttl_read_begins(id);   // until its answer (get_then_decide)
  return false;
}

void elector_actor::forget_ttl() {
  if (!mem_.ttl_read_at)
    return;
  mem_.ttl_read_at.reset();
  mem_.ttl_zero_since.reset();
  mem_.ttl_zero_revision = 0;
  report_memory();
}

caf::timespan elector_actor::ttl_of(const lease& rec) const {
  return std::chrono::seconds(
    std::max(1, rec.spec.lease_duration_seconds.value_or(duration_seconds(opt_.timings.lease_duration))));
}

/// etcd: a read sent at `sent` found no key where the last record we saw
/// was (a holder's term, a released record, our own ended term: anyone
/// may have taken it since, unseen). Judged once per vanish
/// (judge_vanished_key): an expiry seen through fresh readings and a
/// gapless watch frees the key at (first read of 0) + 1 s; anything else
/// (an operator's delete or revoke, stale readings, polling) lets it
/// create at once and hold what it creates for a lease duration. True
/// while it must wait. A replica that saw no record holds what it creates.
bool elector_actor::vanished_under_a_holder(time_point sent, std::int64_t store_revision) {
  if (!mem_.record)
    return false;
  if (mem_.observed_at > sent)
    return true;    // the answer predates the record the watch showed since: read again
  if (!mem_.outside_wait_until) {
    auto& spec = mem_.record->spec;
    bool gapless = watch_up_ && mem_.ttl_read_at && watch_up_since_ <= *mem_.ttl_read_at;
    auto v = judge_vanished_key(mem_, sent, opt_.timings, ttl_of(*mem_.record), gapless,
                                store_revision);
    mem_.outside_wait_until = v.create_at;
    mem_.hold_next_create = v.hold;
    mem_.vanish_revision = store_revision;
    mem_.vanish_seen_revision = v.history_from;
    mem_.ttl_read_at.reset();   // the key is gone: nothing left to read a TTL of
    mem_.ttl_zero_since.reset();
    mem_.ttl_zero_revision = 0;
    report_memory();
    // A key created unheld (no holder, no release) is taken by a delete
    // and a create: its vanishing is the protocol's, said by no warning.
    bool unheld = spec.holder_identity.empty() && !released_record(spec);
    if (v.hold && !unheld)
      emit(event_type::outside_write, [&](runtime_event& ev) {
        ev.holder = spec.holder_identity;
        ev.term = spec.lease_transitions;
        ev.reason = "the key (last seen: " + (spec.holder_identity.empty() ? std::string("released")
                                                               : "held by " + spec.holder_identity)
                    + ", term " + std::to_string(spec.lease_transitions)
                    + ") vanished, and no fresh reading of its etcd lease at 0 s shows it ran "
                      "out: a key created now starts its term "
                    + std::to_string(to_ms(opt_.timings.lease_duration))
                    + "ms later, in case its holder still works";
      });
  }
  return clock().now() < *mem_.outside_wait_until;
}

// -- a standby's first create --------------------------------------------------

/// 5. A standby (not competing) that never saw a record of the lease (a
/// process just started) finds none: it creates it as nobody's (holder
/// empty, leaseDurationSeconds a lease duration, no term of its own), so
/// the creation hold starts now for whoever will lead it. Every replica,
/// this one included, waits such a record out as an emptied one (a lease
/// duration from when it saw it, by its own clock: held_by_other) before
/// it acquires it, and a term is then the acquisition of an existing
/// record. In a balance group every member stands by until its settle time
/// has passed, so the hold runs during the settle time (docs/safety.md, "A
/// created lease starts its term a lease duration later"). Lost to another
/// create: the attempt ends, the next read (or the watch) shows its record.
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

/// Every failed request is reported (api_request_failed: the metrics);
/// api_error (the log) reports a lost race (another replica wrote first:
/// an answer, no outage) every time, an outage once per change of kind, a
/// refusal (the request itself is wrong: an answer, no outage) once while
/// the same request is refused.
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

} // namespace leasehold
