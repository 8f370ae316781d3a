#include "actors/elector.hpp"

#include <cmath>
#include <optional>
#include <random>

#include "transport/kube_client.hpp"

namespace leasehold {

lease_spec next_spec(const lease_spec& old, const std::string& identity,
                     caf::timespan lease_duration, wall_time now) {
  lease_spec s;
  s.holder_identity = identity;
  auto secs = std::chrono::duration<double>(lease_duration).count();
  s.lease_duration_seconds = std::max(1, static_cast<int>(std::ceil(secs)));
  s.renew_time = now;
  if (old.holder_identity == identity) {
    s.acquire_time = old.acquire_time ? old.acquire_time : std::optional<wall_time>{now};
    s.lease_transitions = old.lease_transitions;
  } else {
    s.acquire_time = now;
    s.lease_transitions = old.lease_transitions + 1;
  }
  return s;
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
      emit(opt_.events, opt_.identity, opt_.lease.to_string()) {
  }

  const char* name() const override { return "leasehold.elector"; }

  caf::behavior make_behavior() override {
    send(this, tick_atom::value);
    return {
      [=](tick_atom) { attempt(); },
      [=](deadline_atom, std::uint64_t seq) {
        if (leading_ && !releasing_ && seq == renew_seq_)
          lose("failed to renew lease " + opt_.lease.to_string() + " within renew_deadline "
               + std::to_string(to_ms(opt_.timings.renew_deadline)) + "ms"
               + (last_error_.kind != error_kind::none ? "; last error: " + last_error_.describe()
                                                       : std::string{}));
      },
      [=](release_atom) {
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
  // -- one acquire/renew attempt -------------------------------------------

  void attempt() {
    if (in_flight_ || releasing_)
      return;
    in_flight_ = true;
    auto started = clock().now();
    if (holds_lease())
      put(renewed(*observed_), started, /*fallback to GET*/ true);
    else
      get_then_decide(started);
  }

  bool holds_lease() const {
    return leading_ && observed_ && observed_->spec.holder_identity == opt_.identity;
  }

  lease renewed(const lease& rec) const {
    lease l = rec;
    l.spec = next_spec(rec.spec, opt_.identity, opt_.timings.lease_duration, wall_now());
    return l;
  }

  void get_then_decide(caf::actor_clock::time_point started) {
    request(opt_.transport, timeout(), get_lease_atom::value, opt_.lease)
      .then(
        [=](lease_reply& r) {
          if (r.ok()) {
            observe(*r.value);
            decide(*r.value, started);
          } else if (r.kind() == error_kind::not_found) {
            // An API that lost its storage answers NotFound for a lease
            // another replica still holds by our clock: wait for it to
            // expire, as if the record were still there.
            if (held_by_other(observed_)) {
              if (leading_)
                lose("lease " + opt_.lease.to_string() + " vanished while "
                     + observed_->spec.holder_identity + " held it");
              else
                done_attempt();
              return;
            }
            create(started);
          } else {
            failed(r.error);
          }
        },
        [=](caf::error& e) { failed(request_error("GET", lease_path(opt_.lease), e)); });
  }

  /// Another replica holds `rec` and it has not expired by our clock.
  bool held_by_other(const std::optional<lease>& rec) const {
    if (!rec)
      return false;
    auto& holder = rec->spec.holder_identity;
    return !holder.empty() && holder != opt_.identity && !expired(*rec);
  }

  void decide(const lease& rec, caf::actor_clock::time_point started) {
    auto& holder = rec.spec.holder_identity;
    if (held_by_other(rec)) {
      // Held by another replica whose lease has not expired by our clock.
      if (leading_)
        lose("lease " + opt_.lease.to_string() + " is held by " + holder);
      else
        done_attempt();
      return;
    }
    put(renewed(rec), started, false);
  }

  void create(caf::actor_clock::time_point started) {
    lease l;
    l.name = opt_.lease.name;
    l.ns = opt_.lease.ns;
    // A lease recreated after the API lost it continues the terms we saw,
    // so fencing tokens never go back.
    auto base = observed_ ? observed_->spec : lease_spec{};
    l.spec = next_spec(base, opt_.identity, opt_.timings.lease_duration, wall_now());
    if (!observed_)
      l.spec.lease_transitions = 0;
    request(opt_.transport, timeout(), create_lease_atom::value, std::move(l))
      .then(
        [=](lease_reply& r) {
          if (r.ok()) {
            observe(*r.value);
            succeeded(started);
          } else {
            failed(r.error);
          }
        },
        [=](caf::error& e) { failed(request_error("POST", leases_path(opt_.lease.ns), e)); });
  }

  void put(lease l, caf::actor_clock::time_point started, bool fallback) {
    request(opt_.transport, timeout(), update_lease_atom::value, std::move(l))
      .then(
        [=](lease_reply& r) {
          if (r.ok()) {
            observe(*r.value);
            succeeded(started);
          } else if (fallback) {
            get_then_decide(started);   // stale cache: re-read, decide again
          } else {
            failed(r.error);
          }
        },
        [=](caf::error& e) {
          auto err = request_error("PUT", lease_path(opt_.lease), e);
          if (!fallback) {
            failed(err);
            return;
          }
          note_error(err);
          get_then_decide(started);
        });
  }

  // -- outcomes ------------------------------------------------------------

  void succeeded(caf::actor_clock::time_point started) {
    in_flight_ = false;
    if (last_error_.kind != error_kind::none) {
      emit(event_type::api_recovered, [&](runtime_event& ev) { ev.error = last_error_; });
      last_error_ = api_error{};
    }
    if (releasing_) {
      leading_ = true;   // we hold it now: release what we just took
      fence_.valid_until->store(0);
      release_step(0);
      return;
    }
    last_renew_ = started;
    ++renew_seq_;
    auto term = observed_->spec.lease_transitions;
    auto valid_until = (started + opt_.timings.renew_deadline).time_since_epoch().count();
    if (!leading_) {
      leading_ = true;
      term_ = term;
      fence_ = fencing_token{opt_.lease, opt_.identity, term};
      fence_.valid_until->store(valid_until);
      send(opt_.runner, leadership_acquired{fence_});
    } else {
      fence_.valid_until->store(valid_until);
      send(opt_.runner, lease_renewed{term});
    }
    emit(event_type::renewed, [&](runtime_event& ev) {
      ev.term = term;
      ev.valid_until_ns = valid_until;
      ev.value = std::chrono::duration<double, std::milli>(clock().now() - started).count();
    });
    delayed_send(this, started + opt_.timings.renew_deadline - clock().now(), deadline_atom::value,
                 renew_seq_);
    delayed_send(this, opt_.timings.retry_period, tick_atom::value);
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
    delayed_send(this, next_delay(), tick_atom::value);
  }

  void note_error(const api_error& err) {
    if (err.kind != last_error_.kind)
      emit(event_type::api_error, [&](runtime_event& ev) { ev.error = err; });
    last_error_ = err;
  }

  void lose(std::string reason) {
    fence_.valid_until->store(0);
    send(opt_.runner, leadership_lost{std::move(reason)});
    quit();
  }

  // -- release ---------------------------------------------------------------

  void release_step(int tries) {
    if (!holds_lease()) {
      finish_release(false);
      return;
    }
    lease l = *observed_;
    l.spec = released_spec(l.spec, wall_now());
    in_flight_ = true;
    request(opt_.transport, timeout(), update_lease_atom::value, std::move(l))
      .then(
        [=](lease_reply& r) {
          in_flight_ = false;
          if (r.ok()) {
            observed_ = *r.value;
            emit(event_type::lease_released, [&](runtime_event& ev) { ev.term = term_; });
            finish_release(true);
          } else if (r.kind() == error_kind::conflict && may_retry_release(tries)) {
            reread_then_release(tries + 1);
          } else if (may_retry_release(tries)) {
            note_error(r.error);
            release_step(tries + 1);
          } else {
            note_error(r.error);
            finish_release(false);
          }
        },
        [=](caf::error& e) {
          in_flight_ = false;
          note_error(request_error("PUT", lease_path(opt_.lease), e));
          if (may_retry_release(tries))
            release_step(tries + 1);
          else
            finish_release(false);
        });
  }

  void reread_then_release(int tries) {
    in_flight_ = true;
    request(opt_.transport, timeout(), get_lease_atom::value, opt_.lease)
      .then(
        [=](lease_reply& r) {
          in_flight_ = false;
          if (r.ok()) {
            observed_ = *r.value;   // holds_lease() now tells whether it is still ours
            release_step(tries);
          } else {
            finish_release(false);
          }
        },
        [=](caf::error&) {
          in_flight_ = false;
          finish_release(false);
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
    bool changed = !observed_ || observed_->resource_version != rec.resource_version
                   || observed_->spec != rec.spec;
    if (!changed)
      return;
    bool holder_changed = !observed_
                          || observed_->spec.holder_identity != rec.spec.holder_identity;
    observed_ = rec;
    observed_time_ = clock().now();
    if (holder_changed) {
      send(opt_.runner, leader_observed{rec.spec.holder_identity, rec.spec.lease_transitions});
      emit(event_type::leader_changed, [&](runtime_event& ev) {
        ev.holder = rec.spec.holder_identity;
        ev.term = rec.spec.lease_transitions;
      });
    }
  }

  bool expired(const lease& rec) const {
    caf::timespan dur = opt_.timings.lease_duration;
    if (rec.spec.lease_duration_seconds && *rec.spec.lease_duration_seconds > 0)
      dur = std::chrono::seconds(*rec.spec.lease_duration_seconds);
    return observed_time_ + dur <= clock().now();
  }

  caf::timespan next_delay() {
    if (leading_)
      return opt_.timings.retry_period;
    std::uniform_real_distribution<double> u(0.0, 0.2);
    auto base = opt_.timings.retry_period;
    return base + caf::timespan{static_cast<caf::timespan::rep>(base.count() * u(rng_))};
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
      err.reason = "transport: " + system().render(e);
    }
    return err;
  }

  elector_options opt_;
  std::mt19937_64 rng_;
  event_emitter emit;
  std::optional<lease> observed_;
  caf::actor_clock::time_point observed_time_{};
  caf::actor_clock::time_point last_renew_{};
  caf::actor_clock::time_point release_deadline_{};
  std::uint64_t renew_seq_ = 0;
  std::int64_t term_ = -1;
  fencing_token fence_;
  bool leading_ = false;
  bool in_flight_ = false;
  bool releasing_ = false;
  std::optional<caf::response_promise> release_rp_;
  api_error last_error_;
};

} // namespace

caf::actor spawn_elector(caf::local_actor* parent, elector_options opts) {
  return parent->spawn<elector_actor>(std::move(opts));
}

caf::actor spawn_elector(caf::actor_system& sys, elector_options opts) {
  return sys.spawn<elector_actor>(std::move(opts));
}

} // namespace leasehold
