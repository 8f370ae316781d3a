#include "actors/elector.hpp"

#include <algorithm>

#include "actors/handover.hpp"

// The decision path and its numbered steps (1-5, R1-R3): docs/design.md,
// 'One attempt, step by step'.

namespace leasehold {

elector_actor::elector_actor(caf::actor_config& cfg, elector_options opts)
  : with_shared_behavior(cfg),
    opt_(std::move(opts)),
    rng_(opt_.seed),
    emit(std::move(opt_.emit)) {
  if (!opt_.on_fatal)
    opt_.on_fatal = default_fatal_handler;
}

elector_actor::behavior_type elector_actor::make_behavior() {
  tick_at_ = wake_at_ = clock().now();
  tick_pending_ = tick_attempts_ = wake_pending_ = true;
  send(this, tick_atom::value, ++wake_seq_);
  if (opt_.watch) {
    lease_watch_request req;
    req.lease = opt_.lease;
    req.resource_version = mem_.record ? mem_.record->resource_version : std::move(opt_.seen_version);
    req.idle_timeout = opt_.timings.lease_duration;
    req.subscriber = this;
    send(opt_.backend->transport, watch_lease_atom::value, std::move(req));
  }
  // One behaviour for every elector (actors/shared_behavior.hpp).
  static const behavior_type shared{
    [](tick_atom, std::uint64_t seq) { current().on_tick_message(seq); },
    [](lease_watch_event& ev) { current().on_watch(ev); },
    [](compete_atom, bool on) { current().set_competing(on); },
    [](release_atom, std::string& target) { return current().on_release(target); },
  };
  return shared;
}

void elector_actor::on_tick_message(std::uint64_t seq) {
  if (seq != wake_seq_)
    return;   // replaced by an earlier one (wake())
  wake_pending_ = false;
  if (state_ == elector_state::leading && clock().now() >= valid_until_) {
    lose("failed to renew lease " + opt_.lease.to_string() + " within renew_deadline "
           + std::to_string(to_ms(opt_.timings.renew_deadline)) + "ms"
           + (rare_.seen().last_error.kind != error_kind::none
                ? "; last error: " + rare_.seen().last_error.describe()
                : std::string{}));
    return;
  }
  if (tick_pending_ && clock().now() >= tick_at_)
    on_tick();
  if (state_ != elector_state::ended)
    wake();   // what is still due later
}

void elector_actor::set_competing(bool on) {
  if (on)
    opt_.compete_after = {};   // told to compete: a yield window of its own ends
  bool was = std::exchange(opt_.compete, on);
  if (on && !was && !has_term())
    act_now();   // a lease left free for us is taken now, not at the next tick
}

caf::typed_response_promise<bool> elector_actor::on_release(std::string& target) {
  rare_.set().release_target = std::move(target);
  auto rp = make_response_promise<bool>();
  rare_.set().release_rp = rp;
  fence_.valid_until->store(0);
  if (!set_state(has_term() ? elector_state::releasing : elector_state::closing))
    return rp;
  release_deadline_ = clock().now() + opt_.timings.release_timeout;
  if (!in_flight_)
    release_step(0);
  return rp;
}

// -- state -----------------------------------------------------------------------

bool elector_actor::set_state(elector_state to) {
  if (to == state_)
    return true;
  if (!legal_transition(state_, to)) {
    // A defect in the elector: its safety argument assumes the diagram
    // (docs/design.md). It vouches for nothing any more and ends.
    auto reason = std::string("elector: illegal state transition ") + to_string(state_) + " -> "
                  + to_string(to);
    fence_.valid_until->store(0);
    emit(event_type::fatal, [&](runtime_event& ev) { ev.reason = reason; });
    opt_.on_fatal(reason);
    state_ = elector_state::ended;
    send(opt_.runner, leadership_lost{reason});
    answer_release(false);
    quit();
    return false;
  }
  if (std::exchange(state_, to) == elector_state::leading)
    report_memory();   // the renews not reported while leading (own_renewal)
  return true;
}

void elector_actor::drop_hold() {
  wrote_term_ = false;
  unanswered_at_ = {};
  if (state_ == elector_state::holding)
    set_state(elector_state::following);
}

// -- one attempt (steps 1-5) ------------------------------------------------

/// 1. An attempt (a tick): none while a request is out or a release is
/// asked. A term of ours in memory: renew it on that version (2); else
/// read the lease (3).
void elector_actor::attempt() {
  if (in_flight_ || release_asked())
    return;
  in_flight_ = true;
  attempt_started_ = clock().now();
  if (held() && mem_.record && same_term(mem_.record->spec, *held()))
    renew(*mem_.record, /*fall back to GET*/ true);
  else if (!answered_without_read())
    get_then_decide();
}

/// 2. PUTs `rec` (its resourceVersion) renewed in the term this elector
/// holds. With `fallback`, a failure reads the lease and decides again (3).
void elector_actor::renew(const lease& rec, bool fallback) {
  lease l = rec;
  l.spec = renewed_spec(*held(), opt_.timings.lease_duration, wall_now());
  l.spec.preferred_holder = rec.spec.preferred_holder;   // set (or cleared) by another writer
  l.spec.strategy = rec.spec.strategy;
  l.renew_max_age = renew_ride_limit(opt_.timings);   // a shared renew of the store (succeeded)
  if (auto hold_ends = created_hold_ends(); hold_ends && !has_term()) {
    // R1c: the renew that ends a creation hold counts from the keepalive it
    // rides on; one sent before the hold's end would leave it in the hold.
    auto past_hold = clock().now() - *hold_ends;
    if (past_hold >= caf::timespan{0})
      l.renew_max_age = std::min(l.renew_max_age, past_hold);
  }
  l.skip_watch_echo = opt_.watch;   // Kubernetes: the answer is enough
  put(std::move(l), fallback);
}

/// 3. Reads the lease: a record is decided on (4), no lease is absent (5),
/// an error ends the attempt (R3).
/// Every request counts from its own send time (docs/safety.md, "Every
/// timing relation the code enforces").
void elector_actor::get_then_decide() {
  auto started = clock().now();
  // The mark of a read in flight (answered_without_read), if any, lives
  // until this read's answer or deadline.
  call(started, "GET", get_lease_atom::value, opt_.lease,
       [=, mark = std::move(read_mark_)](lease_reply& r) {
    if (delete_streamed_ <= started)
      delete_streamed_ = {};   // this read tells what the stream's delete did
    if (r.ok()) {
      answered();
      mem_.confirmed_at = clock().now();
      bool later = streamed_later(*r.value);   // then decide on the later version
      if (!later)
        observe(*r.value, /*report*/ false);
      evidence_.read_found(later ? nullptr : &*r.value, started, clock().now());
      report_memory();   // the record and confirmed_at: one report
      decide(*mem_.record);
    } else if (r.kind() == error_kind::not_found) {
      answered();
      absent(started, r.error.store_revision);
    } else {
      evidence_.read_failed();   // what the read would have refreshed may be stale now
      failed(r.error);
    }
  });
}

/// 4. Decides on `rec`, the lease as the API (or the watch) showed it.
void elector_actor::decide(const lease& rec) {
  adopt_unanswered(rec);
  if (held() && same_term(rec.spec, *held())) {
    if (!written_here(rec.spec)) {
      identity_conflict(rec);
      return;
    }
    renew(rec, false);   // our term, another version (an operator's label)
    return;
  }
  if (has_term()) {
    lose_rewritten(rec);
    return;
  }
  drop_hold();   // a record we created and held unannounced is somebody else's now
  if (held_by_other(rec) || !opt_.compete || hold_back(&rec)) {
    done_attempt();   // next_delay() wakes when a hold-back ends
    return;
  }
  lease l = rec;
  l.spec = acquired_spec(rec.spec, opt_.identity, opt_.timings.lease_duration, wall_now(),
                         mem_.max_term);
  evidence_.before_take(rec, l);
  put(std::move(l), false, /*acquire*/ true);
}

/// 5. The API has no such lease (why: docs/safety.md, "A created lease
/// starts its term a lease duration later").
void elector_actor::absent(time_point seen_by, std::int64_t store_revision) {
  if (evidence_.store_ends_terms() && has_term()) {
    // The store deleted the record: it ran out (or an operator removed it).
    // The term is over; putting it back would be a new record.
    lose("lease " + opt_.lease.to_string() + " was deleted by the store");
    return;
  }
  if (!has_term()) {
    // The last holder we saw may still be running: the evidence says how
    // long to leave it (on Kubernetes until it would have expired by our
    // clock; etcd: docs/safety.md, "Writes from outside the protocol").
    std::string warning;
    bool wait = evidence_.wait_vanished(view(), seen_by, store_revision, clock().now(), warning);
    if (!warning.empty() && mem_.record)
      emit(event_type::outside_write, [&](runtime_event& ev) {
        ev.holder = mem_.record->spec.holder_identity;
        ev.term = mem_.record->spec.lease_transitions;
        ev.reason = warning;
      });
    if (wait) {
      done_attempt();
      return;
    }
  }
  if (!has_term() && !opt_.compete) {
    if (mem_.record)
      done_attempt();   // a standby only follows
    else
      create_unheld();   // one that never saw a record starts the hold for all
    return;
  }
  // A released record may vanish while its preferredHolder takes it (on
  // etcd a delete, then a create): the last record seen still holds others back.
  if (!has_term() && hold_back(mem_.record ? &*mem_.record : nullptr)) {
    done_attempt();
    return;
  }
  lease l;
  l.name = opt_.lease.name;
  l.ns = opt_.lease.ns;
  // Only a running term (renewed within its deadline) is put back as it
  // was; a record we created but had not started a term on may have been
  // taken and lost meanwhile, so it is created anew and waited for anew.
  bool create_new = !has_term();
  if (has_term()) {
    l.spec = renewed_spec(*held(), opt_.timings.lease_duration, wall_now());
  } else {
    drop_hold();
    l.spec = acquired_spec(lease_spec{}, opt_.identity, opt_.timings.lease_duration, wall_now(),
                           mem_.max_term);
  }
  remember_write(l.spec);
  // Unless the evidence vouches that no term ran meanwhile, the new term is
  // held; if it vouches, the store checks the history since the read.
  bool hold = create_new && evidence_.hold_create(view(), l);
  bool ask_history = create_new && !hold;
  auto started = clock().now();
  call(started, "POST", create_lease_atom::value, std::move(l),
       [=](lease_reply& r) {
         if (r.ok()) {
           if (hold || (ask_history && !r.value->unwritten_since_read))
             mem_.created_at = evidence_.hold_from_answer() ? clock().now() : started;
           succeeded(*r.value, started);
         } else {
           failed(r.error);
         }
       });
}

/// A write of step 2 or 4. R2: its error. A conflict on an acquire: that
/// term number is never handed out again; a renew from memory reads and
/// decides again (3); otherwise the attempt ends (R3).
void elector_actor::put(lease l, bool fallback, bool acquire) {
  auto started = clock().now();
  auto term = l.spec.lease_transitions;
  auto acquired_at = acquire ? l.spec.acquire_time.value_or(wall_time{}) : wall_time{};
  remember_write(l.spec);
  call(started, "PUT", update_lease_atom::value, std::move(l),
       [=](lease_reply& r) {
         if (r.ok()) {
           succeeded(*r.value, started, r.value->renewed_age);
           return;
         }
         if (r.kind() == error_kind::session_ended && has_term()) {
           lose(r.error.describe());   // no renew of it can succeed any more
           return;
         }
         if (r.kind() == error_kind::conflict && !has_term() && term > mem_.max_term) {
           // Somebody else wrote first, most likely taking this very term:
           // never hand its number out again, even if we never see it.
           mem_.max_term = term;
           report_memory();
         }
         if (acquire && state_ == elector_state::following && may_have_applied(r.kind())) {
           hold_unanswered(acquired_at, r.error);
           return;
         }
         if (fallback) {
           note_error(r.error);
           get_then_decide();   // stale cache: re-read, decide again
         } else {
           failed(r.error);
         }
       });
}

/// R2b. why: docs/safety.md, "An acquisition whose answer is lost is held,
/// not started".
void elector_actor::hold_unanswered(wall_time acquired_at, const api_error& err) {
  if (!set_state(elector_state::holding))
    return;
  unanswered_at_ = acquired_at;
  failed(err);
}

/// R2b. `rec` is the record the unanswered acquisition wrote (the store may
/// have set the term number): it is held as written.
bool elector_actor::adopt_unanswered(const lease& rec) {
  if (!holds_unanswered() || rec.spec.holder_identity != opt_.identity
      || rec.spec.acquire_time != unanswered_at_ || !written_here(rec.spec))
    return false;
  unanswered_at_ = {};
  mem_.own_term = rec.spec;   // held(): a term this replica wrote, as succeeded() notes one
  wrote_term_ = true;
  return true;
}

// -- the replies (R1-R3) ------------------------------------------------------

/// R1. A write (PUT or POST) was accepted: `rec` holds our term's record.
void elector_actor::succeeded(const lease& rec, time_point started, std::chrono::nanoseconds age) {
  const time_point valid_from = started - std::chrono::duration_cast<caf::timespan>(age);
  const auto& written = rec.spec;
  in_flight_ = false;
  unanswered_at_ = {};
  answered();
  if (rare_)
    rare_->last_error = api_error{};
  bool routine = own_renewal(rec);
  if (!written_here(written))
    remember_write(written);   // a renew served without a write answers the record as stored
  mem_.own_term = written;
  wrote_term_ = true;
  observe(rec, /*report*/ false);
  if (!routine)
    report_memory();   // the record and our term: one report per write
  auto now = clock().now();
  if (release_asked()) {
    if (!has_term() && in_created_hold(valid_from)) {
      // A lease we created may have replaced a live term that an API wipe
      // lost: a release would free it for anyone at once, while that
      // term's work may still be stopping. It must expire instead.
      finish_release(false);
      return;
    }
    // R1a. We hold it now: release what we just wrote.
    if (state_ == elector_state::closing && !set_state(elector_state::releasing))
      return;
    release_step(0);
    return;
  }
  auto valid_until = valid_from + opt_.timings.renew_deadline;
  if (valid_until <= now) {
    // The answer came after the deadline counted from its send time: the
    // fence would be void already. Never announce or keep such a term.
    if (has_term()) {
      lose("renew of lease " + opt_.lease.to_string() + " answered after the renew deadline");
      return;
    }
    // R1b. The write stands but vouches for nothing: the term it wrote
    // (holding) starts only with a renew answered in time.
    if (!set_state(elector_state::holding))
      return;
    note_error(late_reply(now - started));
    done_attempt();
    return;
  }
  if (!has_term() && in_created_hold(valid_from)) {
    // R1c. The renew that starts the term goes when the hold ends, not up
    // to a retry period later.
    if (!set_state(elector_state::holding))
      return;
    auto hold_ends = *created_hold_ends();
    if (hold_ends < started + opt_.timings.retry_period)
      schedule_tick(std::max(caf::timespan{0}, hold_ends - now));   // renew() rides no keepalive before it
    else
      schedule_renew(started, now);
    return;
  }
  auto vu = valid_until.time_since_epoch().count();
  if (opt_.renewed_until)   // the runner reads the renew here: no message per renew
    opt_.renewed_until->store(vu);
  if (!has_term()) {
    if (mem_.created_at) {
      mem_.created_at.reset();
      report_memory();
    }
    // R1d. The term starts (following or holding -> leading).
    if (!set_state(elector_state::leading))
      return;
    term_ = written.lease_transitions;
    fence_ = fencing_token{opt_.lease, opt_.identity, term_};
    fence_.valid_until->store(vu);
    send(opt_.runner, leadership_acquired{fence_});
  } else {
    fence_.valid_until->store(vu);   // R1e. A renew: the fence reaches further.
  }
  emit(event_type::renewed, [&](runtime_event& ev) {
    ev.term = term_;
    ev.valid_until_ns = vu;
    ev.value = std::chrono::duration<double, std::milli>(now - started).count();
  });
  valid_until_ = valid_until;
  wake();   // the renew deadline (or an earlier tick) is pending
  schedule_renew(started, now);
}

/// R3. The attempt failed (`err` reported) or ends without a write.
void elector_actor::failed(const api_error& err) {
  note_error(err);
  done_attempt();
}

/// R3. The attempt is over: a release asked meanwhile goes on; a change
/// streamed meanwhile is decided at once; else the next tick in `next`
/// (default: next_delay()).
void elector_actor::done_attempt(std::optional<caf::timespan> next) {
  in_flight_ = false;
  if (release_asked()) {
    release_step(0);
    return;
  }
  if (recheck_) {
    // The watch streamed a change while this attempt was out: its answer
    // may predate the change, so decide again now.
    recheck_ = false;
    schedule_tick(caf::timespan{0});
    return;
  }
  schedule_tick(next ? *next : next_delay());
}

elector_handle spawn_elector(caf::local_actor* parent, elector_options opts) {
  return parent->spawn<elector_actor>(std::move(opts));
}

} // namespace leasehold
