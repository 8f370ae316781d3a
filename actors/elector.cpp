#include "actors/elector.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "actors/handover.hpp"
#include "actors/outside_writes.hpp"

namespace leasehold {

namespace {

int duration_seconds(caf::timespan lease_duration) {
  auto secs = std::chrono::duration<double>(lease_duration).count();
  return std::max(1, static_cast<int>(std::ceil(secs)));
}

} // namespace

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

namespace {

using time_point = caf::actor_clock::time_point;

wall_time wall_now() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(wall_clock::now());
}

long long to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

class elector_actor : public caf::event_based_actor {
public:
  elector_actor(caf::actor_config& cfg, elector_options opts)
    : caf::event_based_actor(cfg),
      opt_(std::move(opts)),
      rng_(opt_.seed),
      emit(opt_.events, opt_.identity, opt_.lease.to_string()),
      mem_(opt_.memory) {
  }

  const char* name() const override { return "leasehold.elector"; }

  caf::behavior make_behavior() override {
    send(this, tick_atom::value, ++tick_seq_);
    if (opt_.watch) {
      lease_watch_request req;
      req.lease = opt_.lease;
      req.resource_version = mem_.record ? mem_.record->resource_version : std::string{};
      req.idle_timeout = opt_.timings.lease_duration;
      req.subscriber = this;
      send(opt_.transport, watch_lease_atom::value, std::move(req));
    }
    return {
      [=](tick_atom, std::uint64_t seq) {
        if (seq == tick_seq_)
          attempt();
      },
      [=](lease_watch_event& ev) { on_watch(ev); },
      [=](deadline_atom, std::uint64_t seq) {
        if (leading_ && !releasing_ && seq == renew_seq_)
          lose("failed to renew lease " + opt_.lease.to_string() + " within renew_deadline "
               + std::to_string(to_ms(opt_.timings.renew_deadline)) + "ms"
               + (last_error_.kind != error_kind::none ? "; last error: " + last_error_.describe()
                                                       : std::string{}));
      },
      [=](compete_atom, bool on) {
        if (on)
          opt_.compete_after = {};   // told to compete: a yield window of its own ends
        bool was = std::exchange(opt_.compete, on);
        if (on && !was && !leading_)
          act_now();   // a lease left free for us is taken now, not at the next tick
      },
      [=](release_atom, std::string& target) {
        release_target_ = std::move(target);
        auto rp = make_response_promise();
        release_rp_ = rp;
        releasing_ = true;
        fence_.valid_until->store(0);
        release_deadline_ = clock().now() + opt_.timings.release_timeout;
        if (!in_flight_)
          release_step(0);
        return rp;
      },
    };
  }

private:
  // -- requests ----------------------------------------------------------------

  /// One request to the transport; a transport error or timeout arrives as
  /// a failed lease_reply naming the request (as the backend names it), like
  /// any API error.
  template <class Atom, class Arg, class F>
  void call(const char* verb, Atom atom, Arg arg, F on_reply) {
    auto path = opt_.backend.path_of(verb, opt_.lease);
    request(opt_.transport, timeout(), atom, std::move(arg))
      .then([=](lease_reply& r) { on_reply(r); },
            [=](caf::error& e) {
              auto r = lease_reply::failure(request_error(verb, path, e));
              on_reply(r);
            });
  }

  // -- one acquire/renew attempt -------------------------------------------

  void attempt() {
    if (in_flight_ || releasing_)
      return;
    in_flight_ = true;
    attempt_started_ = clock().now();
    if (held_ && mem_.record && same_term(mem_.record->spec, *held_))
      renew(*mem_.record, /*fall back to GET*/ true);
    else
      get_then_decide();
  }

  /// PUTs `rec` (its resourceVersion) renewed in the term this elector holds.
  void renew(const lease& rec, bool fallback) {
    lease l = rec;
    l.spec = renewed_spec(*held_, opt_.timings.lease_duration, wall_now());
    l.spec.preferred_holder = rec.spec.preferred_holder;   // set (or cleared) by another writer
    l.spec.strategy = rec.spec.strategy;
    put(std::move(l), fallback);
  }

  /// Every request counts from its own send time: a term's validity from
  /// the write that won it (never from the read before it), a vanished
  /// key's judgment from the read that found it gone. So acquiring (read,
  /// write, first renew) needs no more than renewing does (docs/safety.md,
  /// "Every timing relation the code enforces").
  void get_then_decide() {
    auto started = clock().now();
    call("GET", get_lease_atom::value, opt_.lease, [=](lease_reply& r) {
      if (r.ok()) {
        answered();
        mem_.confirmed_at = clock().now();
        mem_.outside_wait_until.reset();   // the key is there (again)
        mem_.hold_next_create = false;
        observe(*r.value);
        note_ttl(*r.value, started);
        report_memory();   // confirmed_at, the TTL reading
        decide(*r.value);
      } else if (r.kind() == error_kind::not_found) {
        answered();
        absent(started, r.error.store_revision);
      } else {
        forget_ttl();   // what we knew of the key's TTL may be stale now
        failed(r.error);
      }
    });
  }

  void decide(const lease& rec) {
    if (held_ && same_term(rec.spec, *held_)) {
      if (!written_here(rec.spec)) {
        identity_conflict(rec);
        return;
      }
      renew(rec, false);   // our term, another version (an operator's label)
      return;
    }
    if (leading_) {
      lose_rewritten(rec);
      return;
    }
    held_.reset();   // a record we created and held unannounced is somebody else's now
    if (held_by_other(rec) || !opt_.compete || hold_back(&rec)) {
      done_attempt();   // next_delay() wakes when a hold-back ends
      return;
    }
    lease l = rec;
    l.spec = acquired_spec(rec.spec, opt_.identity, opt_.timings.lease_duration, wall_now(),
                           mem_.max_term);
    put(std::move(l), false);
  }

  /// The API has no such lease. A leader puts its term back. Anyone else
  /// creates it, but its term starts only a lease duration after the
  /// create: an API that lost its storage may have lost a live term of
  /// another replica with it, and that replica needs this long to notice and
  /// stop its work (see succeeded()).
  void absent(time_point seen_by, std::int64_t store_revision = 0) {
    if (opt_.backend.server_expiry && leading_) {
      // The store deleted the record: its TTL ran out (or it was revoked).
      // The term is over; putting it back would be a new record.
      lose("lease " + opt_.lease.to_string() + " was deleted by the store");
      return;
    }
    if (!opt_.backend.server_expiry && !leading_ && mem_.record && held_by_other(*mem_.record)) {
      // The last holder we saw may still be running and about to put its
      // record back: leave it that chance until it would have expired.
      done_attempt();
      return;
    }
    if (opt_.backend.server_expiry && !leading_ && vanished_under_a_holder(seen_by, store_revision)) {
      done_attempt();
      return;
    }
    if (!leading_ && !opt_.compete) {
      done_attempt();   // a standby only follows
      return;
    }
    // etcd: a released key vanishes while its preferredHolder takes it (a
    // delete, then a create): the last record seen still holds others back.
    if (!leading_ && hold_back(mem_.record ? &*mem_.record : nullptr)) {
      done_attempt();
      return;
    }
    lease l;
    l.name = opt_.lease.name;
    l.ns = opt_.lease.ns;
    // Only a running term (renewed within its deadline) is put back as it
    // was; a record we created but had not started a term on may have been
    // taken and lost meanwhile, so it is created anew and waited for anew.
    bool create_new = !leading_;
    if (leading_) {
      l.spec = renewed_spec(*held_, opt_.timings.lease_duration, wall_now());
    } else {
      held_.reset();
      l.spec = acquired_spec(lease_spec{}, opt_.identity, opt_.timings.lease_duration, wall_now(),
                             mem_.max_term);
    }
    remember_write(l.spec);
    // etcd needs no hold where this replica saw the key go (released,
    // expired, or an outside write waited out); one that never saw the key
    // (a process just started) cannot have waited out an operator's delete
    // or revoke of a live term, so it holds what it creates, as on Kubernetes.
    bool hold = create_new
                && (!opt_.backend.server_expiry || !mem_.record || mem_.hold_next_create
                    || mem_.vanish_revision == 0);
    // etcd: the store says whether the key's history shows another write
    // since the read that judged it gone: a term that came and went unseen
    // in between (say an operator's delete of another replica's fresh key)
    // is held for. Other keys' writes in between do not matter.
    bool ask_history = create_new && opt_.backend.server_expiry && !hold;
    if (ask_history)
      l.absent_at_revision = mem_.vanish_revision;
    auto started = clock().now();
    call("POST", create_lease_atom::value, std::move(l),
         [=](lease_reply& r) {
           if (r.ok()) {
             // etcd: counted from the answer, by when any term whose key
             // was gone before the create had sent its last renew.
             if (hold || (ask_history && !r.value->unwritten_since_read))
               mem_.created_at = opt_.backend.server_expiry ? clock().now() : started;
             observe(*r.value);
             succeeded(r.value->spec, started);
           } else {
             failed(r.error);
           }
         });
  }

  void put(lease l, bool fallback) {
    auto started = clock().now();
    auto term = l.spec.lease_transitions;
    remember_write(l.spec);
    call("PUT", update_lease_atom::value, std::move(l),
         [=](lease_reply& r) {
           if (r.ok()) {
             observe(*r.value);
             succeeded(r.value->spec, started);
             return;
           }
           if (r.kind() == error_kind::conflict && !leading_ && term > mem_.max_term) {
             // Somebody else wrote first, most likely taking this very term:
             // never hand its number out again, even if we never see it.
             mem_.max_term = term;
             report_memory();
           }
           if (fallback) {
             note_error(r.error);
             get_then_decide();   // stale cache: re-read, decide again
           } else {
             failed(r.error);
           }
         });
  }

  /// Another replica (or a former process under our name) holds `rec` and
  /// it has not expired by our clock.
  bool held_by_other(const lease& rec) const {
    auto& holder = rec.spec.holder_identity;
    if (holder.empty()) {
      // Released by its holder: free. Emptied by anybody else (an operator,
      // a tool): the last holder may still be working; wait a lease
      // duration by our clock, as for an expiry.
      return !released_record(rec.spec) && !expired(rec);
    }
    if (holder == opt_.identity && mem_.own_term && same_term(rec.spec, *mem_.own_term))
      return false;   // a term this replica held and ended: its modules are down
    return opt_.backend.server_expiry || !expired(rec);
  }

  // -- outcomes ------------------------------------------------------------

  void succeeded(const lease_spec& written, time_point started) {
    in_flight_ = false;
    answered();
    last_error_ = api_error{};
    held_ = written;
    mem_.own_term = written;
    report_memory();
    auto now = clock().now();
    if (releasing_) {
      if (!leading_ && in_created_hold(started)) {
        // A lease we created may have replaced a live term that an API wipe
        // lost: a release would free it for anyone at once, while that
        // term's work may still be stopping. It must expire instead.
        finish_release(false);
        return;
      }
      leading_ = true;   // we hold it now: release what we just wrote
      release_step(0);
      return;
    }
    auto valid_until = started + opt_.timings.renew_deadline;
    if (valid_until <= now) {
      // The answer came after the deadline counted from its send time: the
      // fence would be void already. Never announce or keep such a term.
      if (leading_) {
        lose("renew of lease " + opt_.lease.to_string() + " answered after the renew deadline");
        return;
      }
      note_error(late_reply(now - started));
      done_attempt();
      return;
    }
    if (!leading_ && in_created_hold(started)) {
      // A lease we created: hold it (keep renewing) without starting the
      // term until a lease duration has passed since the create.
      schedule_renew(started, now);
      return;
    }
    auto vu = valid_until.time_since_epoch().count();
    if (!leading_) {
      if (mem_.created_at) {
        mem_.created_at.reset();
        report_memory();
      }
      leading_ = true;
      term_ = written.lease_transitions;
      fence_ = fencing_token{opt_.lease, opt_.identity, term_};
      fence_.valid_until->store(vu);
      send(opt_.runner, leadership_acquired{fence_});
    } else {
      fence_.valid_until->store(vu);
      send(opt_.runner, lease_renewed{term_, vu});
    }
    emit(event_type::renewed, [&](runtime_event& ev) {
      ev.term = term_;
      ev.valid_until_ns = vu;
      ev.value = std::chrono::duration<double, std::milli>(now - started).count();
    });
    ++renew_seq_;
    delayed_send(this, valid_until - now, deadline_atom::value, renew_seq_);
    schedule_renew(started, now);
  }

  /// A write sent at `sent` falls in the hold of a lease we created: no
  /// term starts, and nothing is released, until a lease duration after the create.
  bool in_created_hold(time_point sent) const {
    return mem_.created_at && sent < *mem_.created_at + opt_.timings.lease_duration;
  }

  /// The next renew is due retry_period after the last successful one was
  /// *sent* (not after its reply: latency must not push it past the deadline).
  void schedule_renew(time_point sent, time_point now) {
    schedule_tick(std::max(caf::timespan{0}, sent + opt_.timings.retry_period - now));
  }

  /// The next attempt in `delay`; replaces any attempt scheduled before.
  void schedule_tick(caf::timespan delay) {
    delayed_send(this, delay, tick_atom::value, ++tick_seq_);
  }

  void failed(const api_error& err) {
    note_error(err);
    done_attempt();
  }

  void done_attempt() {
    in_flight_ = false;
    if (releasing_) {
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
    schedule_tick(next_delay());
  }

  /// Every failed request is reported (api_request_failed: the metrics);
  /// api_error (the log) reports a lost race (another replica wrote first:
  /// an answer, no outage) every time, an outage once per change of kind.
  void note_error(const api_error& err) {
    emit(event_type::api_request_failed, [&](runtime_event& ev) { ev.error = err; });
    bool lost_race = is_lost_race(err.kind);
    if (lost_race || !mem_.api_error_outstanding || err.kind != last_error_.kind)
      emit(event_type::api_error, [&](runtime_event& ev) { ev.error = err; });
    last_error_ = err;
    if (lost_race) {
      answered();
    } else if (!mem_.api_error_outstanding) {
      mem_.api_error_outstanding = true;
      mem_.api_error_words = err.describe();
      report_memory();
    }
  }

  /// The API answered a request (a record, a write, or "no such lease"):
  /// an outstanding error is over, for a follower's GET as for a renew.
  /// last_error_ stays for the reason of a later lost renew deadline.
  void answered() {
    if (!mem_.api_answered) {
      mem_.api_answered = true;
      if (!mem_.api_error_outstanding)
        report_memory();
    }
    if (!mem_.api_error_outstanding)
      return;
    mem_.api_error_outstanding = false;
    report_memory();
    emit(event_type::api_recovered, [&](runtime_event& ev) { ev.error = last_error_; });
  }

  api_error late_reply(caf::timespan took) const {
    api_error e;
    e.kind = error_kind::timeout;
    e.verb = "PUT";
    e.path = opt_.backend.path_of("PUT", opt_.lease);
    e.reason = "answered after " + std::to_string(to_ms(took)) + "ms, past the renew deadline";
    return e;
  }

  void lose_rewritten(const lease& rec) {
    lose("lease " + opt_.lease.to_string() + " was rewritten by another writer (holder \""
         + rec.spec.holder_identity + "\", leaseTransitions "
         + std::to_string(rec.spec.lease_transitions) + ")");
  }

  void lose(std::string reason) {
    fence_.valid_until->store(0);
    send(opt_.runner, leadership_lost{std::move(reason)});
    quit();
  }

  // -- watch -----------------------------------------------------------------

  void on_watch(lease_watch_event& ev) {
    using kind = lease_watch_event::kind;
    if (releasing_)
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
        if (!up && !leading_ && !held_ && !in_flight_)
          schedule_tick(next_delay());
        return;
      }
      case kind::deleted:
        answered();
        if (!leading_)
          act_now();   // GET: 404 decides (absent())
        return;
      case kind::record:
        answered();
        if (ev.record)
          on_watched(*ev.record);
        return;
    }
  }

  void on_watched(const lease& rec) {
    auto order = compare_versions(rec.resource_version);
    if (!order) {
      // Versions this API does not let us order: the stream can only tell
      // us that something changed; a GET tells what.
      if (!leading_)
        act_now();
      return;
    }
    if (*order <= 0)
      return;   // a reply already showed this version or a later one
    observe(rec);
    if (held_ && same_term(rec.spec, *held_)) {
      if (!written_here(rec.spec))
        identity_conflict(rec);
      return;   // our own write
    }
    if (leading_) {
      lose_rewritten(rec);
      return;
    }
    if (in_flight_) {
      recheck_ = true;
      return;
    }
    if (held_)
      return;   // a hold on a lease we created: its renew schedule decides
    if (held_by_other(rec)) {
      // Waiting on the watch: wake when this renew could expire. Polling:
      // the poll already scheduled stands (a renew must not postpone it).
      // etcd: a new key comes without its TTL; read it at once.
      if (waits_on_watch())
        schedule_tick(opt_.backend.server_expiry && !mem_.ttl_read_at ? caf::timespan{0} : next_delay());
      return;
    }
    // Released or expired: take this very version with one PUT.
    in_flight_ = true;
    attempt_started_ = clock().now();
    decide(rec);
  }

  /// An attempt as soon as possible (after the one in flight).
  void act_now() {
    if (in_flight_)
      recheck_ = true;
    else
      schedule_tick(caf::timespan{0});
  }

  /// <0, 0, >0 as `rv` is older than, equal to or newer than the version in
  /// memory; nullopt when they cannot be ordered (not decimal numbers).
  std::optional<int> compare_versions(const std::string& rv) const {
    if (!mem_.record)
      return 1;
    auto parse = [](const std::string& v) -> std::optional<unsigned long long> {
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      return std::stoull(v);
    };
    auto a = parse(rv);
    auto b = parse(mem_.record->resource_version);
    if (!a || !b)
      return std::nullopt;
    return *a < *b ? -1 : (*a == *b ? 0 : 1);
  }

  // -- identity ----------------------------------------------------------------

  /// Every record this elector sent carries its renewTime; a record of our
  /// own term with a renewTime we never sent was written by another process
  /// using our identity (a copied config, two agents on one host).
  void remember_write(const lease_spec& s) {
    if (!s.renew_time)
      return;
    sent_renew_times_.push_back(*s.renew_time);
    if (sent_renew_times_.size() > 8)
      sent_renew_times_.erase(sent_renew_times_.begin());
  }

  bool written_here(const lease_spec& s) const {
    return !s.renew_time
           || std::find(sent_renew_times_.begin(), sent_renew_times_.end(), *s.renew_time)
                != sent_renew_times_.end();
  }

  void identity_conflict(const lease& rec) {
    emit(event_type::identity_conflict, [&](runtime_event& e) {
      e.holder = rec.spec.holder_identity;
      e.term = rec.spec.lease_transitions;
    });
    auto why = "another process renewed lease " + opt_.lease.to_string()
               + " under this replica's identity \"" + opt_.identity
               + "\" (two replicas with one identity)";
    if (leading_) {
      lose(why);
    } else {
      // Our unannounced hold (a created lease) is not ours alone: give it up.
      held_.reset();
      mem_.created_at.reset();
      report_memory();
      in_flight_ = false;
      schedule_tick(next_delay());
    }
  }

  // -- release ---------------------------------------------------------------

  /// Releases only the term this elector wrote: a record with another
  /// holder, acquireTime or leaseTransitions is somebody else's.
  bool holds_own_term() const {
    return leading_ && held_ && mem_.record && same_term(mem_.record->spec, *held_);
  }

  void release_step(int tries) {
    if (!holds_own_term()) {
      finish_release(false);
      return;
    }
    lease l = *mem_.record;
    l.spec = handover_spec(released_spec(l.spec, wall_now()), opt_.identity, release_target_);
    in_flight_ = true;
    call("PUT", update_lease_atom::value, std::move(l),
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

  void reread_then_release(int tries) {
    in_flight_ = true;
    call("GET", get_lease_atom::value, opt_.lease, [=](lease_reply& r) {
      in_flight_ = false;
      if (!r.ok()) {
        finish_release(false);
        return;
      }
      observe(*r.value);
      release_step(tries);   // releases only if the record is still exactly our term
    });
  }

  bool may_retry_release(int tries) const {
    return tries < 3 && clock().now() < release_deadline_;
  }

  void finish_release(bool released) {
    if (release_rp_)
      release_rp_->deliver(released);
    release_rp_.reset();
    quit();
  }

  // -- helpers ---------------------------------------------------------------

  void observe(const lease& rec) {
    bool changed = !mem_.record
                   || mem_.record->resource_version != rec.resource_version
                   || mem_.record->spec != rec.spec;
    if (!changed)
      return;
    bool holder_changed = !mem_.record
                          || mem_.record->spec.holder_identity != rec.spec.holder_identity;
    mem_.record = rec;
    mem_.observed_at = clock().now();
    mem_.ttl_read_at.reset();   // another record: another key or lease
    mem_.ttl_zero_since.reset();
    mem_.outside_wait_until.reset();
    mem_.hold_next_create = false;
    mem_.max_term = std::max<std::int64_t>(mem_.max_term, rec.spec.lease_transitions);
    report_memory();
    if (holder_changed && rec.spec.holder_identity.empty() && !released_record(rec.spec))
      emit(event_type::outside_write, [&](runtime_event& ev) {
        ev.term = rec.spec.lease_transitions;
        ev.reason = "holderIdentity was emptied by a write that is not a release; no acquisition for "
                    + std::to_string(rec.spec.lease_duration_seconds.value_or(0)) + "s";
      });
    if (holder_changed) {
      send(opt_.runner, leader_observed{rec.spec.holder_identity, rec.spec.lease_transitions});
      emit(event_type::leader_changed, [&](runtime_event& ev) {
        ev.holder = rec.spec.holder_identity;
        ev.term = rec.spec.lease_transitions;
      });
    }
  }

  void report_memory() { send(opt_.runner, lease_observed{mem_}); }

  bool expired(const lease& rec) const { return expires_at(rec) <= clock().now(); }

  /// When `rec` (the record in memory) expires by our clock.
  time_point expires_at(const lease& rec) const {
    caf::timespan dur = opt_.timings.lease_duration;
    if (rec.spec.lease_duration_seconds && *rec.spec.lease_duration_seconds > 0)
      dur = std::chrono::seconds(*rec.spec.lease_duration_seconds);
    return mem_.observed_at + dur;
  }

  /// A follower of a held lease whose stream is up asks nothing until the
  /// lease could expire. After a failed request the stream may be as dead
  /// as the request: it polls until the API answers again (a request, the
  /// stream reopening, or an event on it).
  bool waits_on_watch() const {
    return watch_up_ && !mem_.api_error_outstanding && !leading_ && !held_ && mem_.record
           && held_by_other(*mem_.record);
  }

  caf::timespan next_delay() {
    if (leading_) {
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
      // then would poll without pause. The watch streams the key's deletion;
      // a read every half lease duration guards the stream and confirms the
      // holder (the holder view counts from it: docs/operations.md), and
      // reads at half the key's remaining TTL keep the TTL reading fresh
      // (outside_writes.hpp).
      d = opt_.backend.server_expiry ? opt_.timings.lease_duration / 2
                                     : std::max(caf::timespan{0}, expires_at(*mem_.record) - now);
    } else {
      std::uniform_real_distribution<double> u(0.0, jitter_factor);
      auto base = opt_.timings.retry_period;
      d = base + caf::timespan{static_cast<caf::timespan::rep>(base.count() * u(rng_))};
    }
    if (opt_.backend.server_expiry && mem_.record && !mem_.outside_wait_until
        && ttl_tells_expiry(opt_.timings, ttl_of(*mem_.record)))
      d = next_ttl_read(mem_, opt_.timings, now, d);
    if (mem_.outside_wait_until && *mem_.outside_wait_until > now)
      d = std::min(d, *mem_.outside_wait_until - now);   // wake when the wait ends
    if (auto until = hold_back(mem_.record ? &*mem_.record : nullptr))
      d = std::min(d, *until - now);
    return d;
  }

  /// Until when this follower leaves the lease alone: a yield window, or a
  /// released record that names another preferredHolder (handover.hpp).
  std::optional<time_point> hold_back(const lease* rec) const {
    return leading_ ? std::nullopt
                    : hold_back_until(rec, opt_.identity, mem_.observed_at, opt_.timings,
                                      opt_.compete_after, clock().now());
  }

  // -- writes from outside the protocol (outside_writes.hpp) ---------------------

  /// etcd: a read sent at `sent` reported the key's remaining TTL.
  void note_ttl(const lease& rec, time_point sent) {
    if (!opt_.backend.server_expiry || !rec.ttl_seconds)
      return;
    auto left = std::max<std::int64_t>(0, *rec.ttl_seconds);
    if (left != 0)
      mem_.ttl_zero_since.reset();
    else if (!mem_.ttl_zero_since || mem_.ttl_left != 0)
      mem_.ttl_zero_since = clock().now();   // the reply of the first read of 0
    mem_.ttl_read_at = sent;
    mem_.ttl_left = left;
  }

  void forget_ttl() {
    if (!mem_.ttl_read_at)
      return;
    mem_.ttl_read_at.reset();
    mem_.ttl_zero_since.reset();
    report_memory();
  }

  caf::timespan ttl_of(const lease& rec) const {
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
  bool vanished_under_a_holder(time_point sent, std::int64_t store_revision) {
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
      mem_.ttl_read_at.reset();   // the key is gone: nothing left to read a TTL of
      mem_.ttl_zero_since.reset();
      report_memory();
      if (v.hold)
        emit(event_type::outside_write, [&](runtime_event& ev) {
          ev.holder = spec.holder_identity;
          ev.term = spec.lease_transitions;
          ev.reason = "the key (last seen: " + (spec.holder_identity.empty() ? std::string("released")
                                                                 : "held by " + spec.holder_identity)
                      + ", term " + std::to_string(spec.lease_transitions)
                      + ") vanished and nothing seen says its etcd lease ran out (a delete or revoke "
                        "from outside?): a key created now starts its term "
                      + std::to_string(to_ms(opt_.timings.lease_duration)) + "ms later";
        });
    }
    return clock().now() < *mem_.outside_wait_until;
  }

  caf::timespan timeout() const { return opt_.timings.effective_request_timeout(); }

  api_error request_error(const char* verb, std::string path, const caf::error& e) {
    api_error err;
    err.verb = verb;
    err.path = std::move(path);
    if (e == caf::sec::request_timeout) {
      err.kind = error_kind::timeout;
      err.reason = "no reply within " + std::to_string(to_ms(timeout())) + "ms";
    } else {
      err.kind = error_kind::other;
      err.reason = "transport: " + describe_exit(e, system()).words;
    }
    return err;
  }

  elector_options opt_;
  std::mt19937_64 rng_;
  event_emitter emit;
  lease_memory mem_;
  std::optional<lease_spec> held_;       // what this elector last wrote for its term
  time_point attempt_started_{};
  time_point release_deadline_{};
  std::uint64_t renew_seq_ = 0;
  std::int64_t term_ = -1;
  fencing_token fence_;
  bool leading_ = false;
  bool in_flight_ = false;
  bool releasing_ = false;
  bool watch_up_ = false;                 // the transport streams the lease's changes
  bool watch_said_ = false;               // its first up or down was reported
  time_point watch_up_since_{};           // when it last came up (no gap since, while up)
  bool recheck_ = false;                  // a change was streamed during an attempt
  std::uint64_t tick_seq_ = 0;            // only the latest scheduled attempt runs
  std::vector<wall_time> sent_renew_times_;   // renewTimes of our last writes
  std::optional<caf::response_promise> release_rp_;
  std::string release_target_;           // the release names it as preferredHolder
  api_error last_error_;
};

} // namespace

caf::actor spawn_elector(caf::local_actor* parent, elector_options opts) {
  return parent->spawn<elector_actor>(std::move(opts));
}

} // namespace leasehold
