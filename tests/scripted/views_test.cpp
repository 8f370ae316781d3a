// What a replica says about the lease, from its runner's status (the one
// source of /readyz, /leader, /debug/state and the metrics), on simulated
// time: the holder view on etcd, readiness through API outages, the
// creation hold.
#include <doctest/doctest.h>

#include "cmd/leasehold/health_server.hpp"
#include "cmd/leasehold/probes.hpp"
#include "sim_world.hpp"

using namespace leasehold;
using namespace leasehold::test;
using namespace std::chrono_literals;

namespace {

long long ms(caf::timespan d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

/// Samples every replica's status every `step` for `span`; `check` gets the
/// replica's index and status.
void sample(sim_world& w, caf::timespan span, caf::timespan step,
            const std::function<void(std::size_t, const runner_status&)>& check) {
  for (auto end = w.now() + span; w.now() < end;) {
    w.run_exactly(step);
    for (std::size_t i = 0; i < w.size(); ++i)
      check(i, w.status(i));
  }
}

/// Three replicas; no lease object at start (the first to ask creates it).
world_options three_on(bool etcd) {
  world_options o;
  o.replicas = 3;
  o.etcd = etcd;
  o.lease_exists = false;
  return o;
}

} // namespace

TEST_CASE("etcd: every replica names the holder while its etcd lease lives, long after the "
          "election") {
  // A keepalive changes no key, so the record never shows a new version:
  // every replica, the leader included, said "unknown" one lease duration
  // after the election. The view counts from the leader's own renew, and a
  // follower's last read that found the record (a watching follower reads
  // the held key every half lease duration).
  for (bool watch : {true, false}) {
    CAPTURE(watch);
    auto o = three_on(true);
    o.watch = watch;
    sim_world w(o);
    auto leader = w.await_leader(60s);
    auto holder = w.rep(leader).identity;
    auto limit = ms(o.timings.lease_duration);
    int samples = 0;
    sample(w, 3 * o.timings.lease_duration, 500ms, [&](std::size_t i, const runner_status& st) {
      CAPTURE(i);
      CHECK(st.holder == holder);
      CHECK(st.holder_age_ms >= 0);
      CHECK(st.holder_age_ms <= limit);
      auto view = agent::holder_json(st, o.timings.lease_duration);
      CHECK_MESSAGE(view["holder"] == holder, view.dump());
      ++samples;
    });
    CHECK(samples == 3 * 90);
    CHECK(w.leader() == static_cast<int>(leader));   // one term all along
  }
}

TEST_CASE("readiness through API outages: the leader on its valid fence, followers through a "
          "blip shorter than renew_deadline") {
  // Every replica, the valid leader included, went NotReady within 0.5-2 s
  // of a 3 s outage. The rule (docs/operations.md): a leader is ready while
  // its fence is valid; a follower until the API has failed for longer than
  // renew_deadline (10 s here).
  world_options o;
  o.replicas = 3;
  sim_world w(o);
  auto leader = w.await_leader(60s);
  w.run_for(5s);
  auto ready = [&](const runner_status& st) { return agent::readiness(st, o.timings).ok; };
  for (std::size_t i = 0; i < w.size(); ++i)
    REQUIRE_MESSAGE(ready(w.status(i)), agent::readiness(w.status(i), o.timings).body.dump());

  // A 3 s outage: nobody is NotReady at any time.
  w.store().set_fault(sim_fault::down);
  sample(w, 3s, 100ms, [&](std::size_t i, const runner_status& st) {
    CAPTURE(i);
    CHECK_MESSAGE(ready(st), agent::readiness(st, o.timings).body.dump());
    if (i != leader)
      CHECK(st.api_unreachable_ms <= 3000);
  });
  CHECK(w.status(leader).state == runner_state::leader);
  w.store().clear_faults();
  // The first answer ends it: a follower's next poll, the leader's next renew.
  REQUIRE(w.run_until([&] {
    for (std::size_t i = 0; i < w.size(); ++i)
      if (w.status(i).api_unreachable_ms >= 0)
        return false;
    return true;
  }, o.timings.retry_period * 2));
  CHECK(w.leader() == static_cast<int>(leader));

  // A longer one: nobody is NotReady before renew_deadline of failed
  // requests; a follower counts from its first failed request, which a
  // watching follower sends within retry_period (+20 % jitter) of its
  // stream breaking; the leader's term ends at its renew deadline.
  w.store().set_fault(sim_fault::down);
  auto down = w.now();
  auto reported_by = o.timings.renew_deadline + o.timings.retry_period * 6 / 5 + 500ms;
  sample(w, reported_by + 1s, 100ms, [&](std::size_t i, const runner_status& st) {
    CAPTURE(i);
    auto failing = w.now() - down;
    auto p = agent::readiness(st, o.timings);
    if (failing < o.timings.renew_deadline)
      CHECK_MESSAGE(p.ok, p.body.dump());
    if (failing > reported_by) {
      CHECK_FALSE(p.ok);
      CHECK_MESSAGE(p.body.value("reason", "").find("lease API failing for") != std::string::npos,
                    p.body.dump());
    }
  });
  w.store().clear_faults();
  CHECK(w.run_until([&] {
    for (std::size_t i = 0; i < w.size(); ++i)
      if (!ready(w.status(i)))
        return false;
    return true;
  }, 30s));
}

TEST_CASE("a new lease's creation hold: every replica names its creator and the term it holds; "
          "the creator says it holds and when the term starts") {
  // The record named the creator (kubectl's HOLDER) while the creator said
  // term -1 and its peers said term 1.
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    auto o = three_on(etcd);
    sim_world w(o);
    REQUIRE(w.run_until([&] {
      auto r = w.store().peek(o.lease);
      return r && !r->spec.holder_identity.empty();
    }, 30s));
    w.run_exactly(100ms);   // the watching peers read it
    auto record = w.store().peek(o.lease);
    auto id = record->spec.holder_identity;
    auto term = record->spec.lease_transitions;
    int creator = -1;
    for (std::size_t i = 0; i < w.size(); ++i)
      if (w.rep(i).identity == id)
        creator = static_cast<int>(i);
    REQUIRE(creator >= 0);
    CHECK(w.leader() == -1);
    auto& held = w.rep(static_cast<std::size_t>(creator));
    CHECK(held.count(event_type::creation_hold) == 1);
    for (auto& ev : held.events)
      if (ev.type == event_type::creation_hold) {
        CHECK(ev.term == term);
        CHECK(ev.value > 0);
        CHECK(ev.value <= ms(o.timings.lease_duration));
      }

    // Until the term starts, and after, every replica says the same.
    bool started = false;
    sample(w, o.timings.lease_duration + 2 * o.timings.retry_period, 250ms,
           [&](std::size_t i, const runner_status& st) {
      CAPTURE(i);
      CHECK(st.term == term);
      auto view = agent::holder_json(st, o.timings.lease_duration);
      CHECK_MESSAGE(view["holder"] == id, view.dump());
      if (static_cast<int>(i) != creator) {
        CHECK(st.hold_ms == -1);   // only the creator knows of its hold
        return;
      }
      if (st.state == runner_state::leader) {
        started = true;
        CHECK(st.hold_ms == -1);
      } else {
        CHECK_FALSE(started);
        CHECK(st.hold_ms >= 0);
        CHECK(st.hold_ms <= ms(o.timings.lease_duration));
        CHECK(w.leader() == -1);   // nobody works during the hold
      }
    });
    CHECK(started);
    CHECK(w.leader() == creator);
    CHECK(w.status(static_cast<std::size_t>(creator)).term == term);
  }
}

TEST_CASE("the leader's last renew in its status, with no message per renew to the runner") {
  // The elector no longer sends its runner lease_renewed and its lease
  // memory at each renew; the runner reads the renew from the validity the
  // elector stores (elector_options::renewed_until). What /debug/state and
  // the metrics show must stay current: the leader's ms_since_renew and
  // holder age never exceed a retry period and the request's time, over
  // several lease durations, on both backends.
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    auto o = three_on(etcd);
    sim_world w(o);
    auto leader = w.await_leader(60s);
    const auto& t = o.timings;
    auto limit = ms(t.retry_period + t.effective_request_timeout());
    int samples = 0;
    std::int64_t longest = 0;
    sample(w, 3 * t.lease_duration, 250ms, [&](std::size_t i, const runner_status& st) {
      if (i != leader)
        return;
      REQUIRE(st.state == runner_state::leader);
      CHECK(st.ms_since_renew >= 0);
      CHECK(st.ms_since_renew <= limit);
      CHECK(st.holder_age_ms == st.ms_since_renew);
      // The renew the status names is the elector's last one (sent before it).
      CHECK(st.ms_since_renew >= ms(w.now() - w.last_renew(i)));
      longest = std::max(longest, st.ms_since_renew);
      ++samples;
    });
    CHECK(samples == 3 * 60);
    CHECK(longest >= ms(t.retry_period) / 2);   // it moved with the renews, not fixed at 0
    CHECK(w.leader() == static_cast<int>(leader));
  }
}
