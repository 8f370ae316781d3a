// Voluntary handovers on simulated time: a yield
// with and without a target, to a target that never takes the lease, while
// not leading, and a preferredHolder written from outside. Each case checks
// who leads afterwards and that the yielder's leader-only module was down
// before the successor's started (sim_world also checks after every step
// that no two replicas run leader-only work at once).
#include <doctest/doctest.h>

#include "actors/handover.hpp"
#include "sim_world.hpp"

using namespace leasehold;
using namespace leasehold::test;
using namespace std::chrono_literals;

namespace {

/// The yielder's last "work" instance stopped no later than the
/// successor's started, and the successor's runs now.
void check_handed_over(sim_world& w, std::size_t from, std::size_t to) {
  auto* old = w.tracker().last(w.rep(from).identity, "work");
  auto* next = w.tracker().last(w.rep(to).identity, "work");
  REQUIRE(old);
  REQUIRE(next);
  REQUIRE(old->stopped);
  CHECK(*old->stopped <= next->started);
  CHECK_FALSE(next->stopped);
  CHECK(next->term > old->term);
  CHECK(w.leader() == static_cast<int>(to));
}

std::optional<lease> record(sim_world& w) {
  return w.store().peek(w.options().lease);
}

/// Writes preferredHolder (and a strategy, as the API requires) into the
/// Lease as `kubectl patch` would: every other field kept, on the current version.
void patch_preferred_holder(sim_world& w, const std::string& who) {
  auto l = record(w);
  REQUIRE(l);
  l->spec.preferred_holder = who;
  l->spec.strategy = "OldestEmulationVersion";
  REQUIRE(w.api().update("kubectl", *l).ok());
}

world_options three(bool etcd, bool watch) {
  world_options o;
  o.replicas = 3;
  o.etcd = etcd;
  o.watch = watch;
  o.lease_exists = !etcd;
  return o;
}

} // namespace

TEST_CASE("yield without a target: the leader's module is down before a follower takes the "
          "lease; the yielder stays out for the yield window, then competes again") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    auto o = three(etcd, true);
    sim_world w(o);
    auto leader = w.await_leader(60s);
    auto r = w.yield(leader);
    CHECK(r.status == yield_status::handed_over);
    REQUIRE(w.leader() >= 0);
    auto next = static_cast<std::size_t>(w.leader());
    CHECK(next != leader);
    CHECK(r.successor == w.rep(next).identity);
    check_handed_over(w, leader, next);
    CHECK(w.rep(leader).count(event_type::voluntary_handover) == 1);
    CHECK(record(w)->spec.preferred_holder.empty());
    auto st = w.status(leader);
    CHECK(st.state == runner_state::follower);
    CHECK_FALSE(st.yielding);
    // The yielder competes again: it takes the lease once the successor yields too.
    auto back = w.yield(next, w.rep(leader).identity);
    CHECK(back.status == yield_status::handed_over);
    check_handed_over(w, next, leader);
  }
}

TEST_CASE("yield to a target: the target takes the lease, watching or polling, on either "
          "backend, whichever follower would have been first") {
  for (bool etcd : {false, true})
    for (bool watch : {true, false})
      for (std::size_t pick : {0, 1}) {
        CAPTURE(etcd);
        CAPTURE(watch);
        CAPTURE(pick);
        sim_world w(three(etcd, watch));
        auto leader = w.await_leader(60s);
        std::vector<std::size_t> followers;
        for (std::size_t i = 0; i < w.size(); ++i)
          if (i != leader)
            followers.push_back(i);
        auto target = followers[pick];
        auto before = w.now();
        auto r = w.yield(leader, w.rep(target).identity);
        CHECK(r.status == yield_status::handed_over);
        CHECK(r.successor == w.rep(target).identity);
        check_handed_over(w, leader, target);
        // Within the preferred holder's wait (a polling target sees it at its next
        // poll; the probe stops at once).
        CHECK(w.tracker().last(w.rep(target).identity, "work")->started - before
              <= preferred_holder_wait(w.options().timings));
        CHECK(record(w)->spec.preferred_holder == w.rep(target).identity);
      }
}

TEST_CASE("yield to a target that never takes the lease: another replica takes it after "
          "preferred_holder_wait, clears the preference and keeps the lease") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    sim_world w(three(etcd, true));
    auto& t = w.options().timings;
    auto leader = w.await_leader(60s);
    auto released_by = w.now();
    auto r = w.yield(leader, "replica-gone");
    CHECK(r.status == yield_status::unknown_target);
    REQUIRE(w.leader() >= 0);
    auto next = static_cast<std::size_t>(w.leader());
    CHECK(next != leader);
    CHECK(r.successor == w.rep(next).identity);
    check_handed_over(w, leader, next);
    auto started = w.tracker().last(w.rep(next).identity, "work")->started;
    CHECK(started - released_by >= preferred_holder_wait(t));   // the target had its chance
    CHECK(started - released_by <= 3 * preferred_holder_wait(t));   // the documented bound
    CHECK(record(w)->spec.preferred_holder.empty());
    // No churn: the new leader keeps its term.
    w.run_for(3 * t.lease_duration);
    CHECK(w.leader() == static_cast<int>(next));
    CHECK(w.rep(next).count(event_type::voluntary_handover) == 0);
  }
}

TEST_CASE("a lone replica that yields to nobody takes its lease back after the yield window") {
  world_options o;
  sim_world w(o);
  w.await_leader(60s);
  auto before = w.now();
  auto r = w.yield(0, "replica-gone");
  CHECK(r.status == yield_status::not_taken);
  CHECK(w.leader() == 0);
  auto back = w.tracker().last("replica-0", "work")->started;
  CHECK(back - before >= yield_window(o.timings, true));
  CHECK(back - before <= yield_window(o.timings, true) + o.timings.retry_period);
  CHECK(w.rep(0).count(event_type::voluntary_handover) == 1);
  CHECK(record(w)->spec.preferred_holder.empty());
}

TEST_CASE("yield refused: not leading, to itself, while a yield is under way") {
  sim_world w(three(false, true));
  auto leader = w.await_leader(60s);
  auto follower = (leader + 1) % w.size();
  w.run_for(1s);   // the follower has seen the new holder
  auto r = w.yield(follower, "anyone");
  CHECK(r.status == yield_status::not_leading);
  CHECK(r.successor == w.rep(leader).identity);
  r = w.yield(leader, w.rep(leader).identity);
  CHECK(r.status == yield_status::unknown_target);
  CHECK(w.leader() == static_cast<int>(leader));   // nothing happened
  // Two yields at once: the second is refused, the first hands over.
  caf::scoped_actor self{w.sys()};
  auto first = self->request(w.rep(leader).runner, caf::infinite, yield_atom::value, std::string{});
  auto second = w.yield(leader);
  CHECK(second.status == yield_status::already_yielding);
  REQUIRE(w.run_until([&] { return self->mailbox().size() > 0; }, 60s));
  first.receive([&](yield_result& y) { CHECK(y.status == yield_status::handed_over); },
                [&](caf::error&) { FAIL("no answer"); });
  CHECK(w.leader() != static_cast<int>(leader));
  CHECK(w.rep(leader).count(event_type::voluntary_handover) == 1);
}

TEST_CASE("preferredHolder written from outside: the leader hands over to that replica") {
  for (bool watch : {true, false}) {
    CAPTURE(watch);
    sim_world w(three(false, watch));
    auto& t = w.options().timings;
    auto leader = w.await_leader(60s);
    auto target = (leader + 2) % w.size();
    auto before = w.now();
    patch_preferred_holder(w, w.rep(target).identity);
    REQUIRE(w.run_until([&] { return w.leader() == static_cast<int>(target); }, 60s));
    check_handed_over(w, leader, target);
    // A watching leader sees the patch at once; a polling one at its next renew.
    CHECK(w.now() - before <= (watch ? 0s : t.retry_period) + preferred_holder_wait(t));
    CHECK(w.rep(leader).count(event_type::voluntary_handover) == 1);
    auto l = record(w);
    CHECK(l->spec.preferred_holder == w.rep(target).identity);   // kept in its own term
    CHECK(l->spec.strategy == "OldestEmulationVersion");          // another writer's: kept
    w.run_for(3 * t.lease_duration);
    CHECK(w.leader() == static_cast<int>(target));               // and it stays
  }
}

TEST_CASE("preferredHolder naming a replica that never takes the lease: another takes it within "
          "the bound, and the lease is not handed around") {
  sim_world w(three(false, true));
  auto& t = w.options().timings;
  auto leader = w.await_leader(60s);
  auto before = w.now();
  patch_preferred_holder(w, "replica-gone");
  REQUIRE(w.run_until([&] { return w.leader() >= 0 && w.leader() != static_cast<int>(leader); },
                      60s));
  CHECK(w.now() - before <= 3 * preferred_holder_wait(t));
  auto next = static_cast<std::size_t>(w.leader());
  check_handed_over(w, leader, next);
  CHECK(record(w)->spec.preferred_holder.empty());
  CHECK(record(w)->spec.strategy == "OldestEmulationVersion");
  w.run_for(3 * t.lease_duration);
  CHECK(w.leader() == static_cast<int>(next));
  int handovers = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    handovers += w.rep(i).count(event_type::voluntary_handover);
  CHECK(handovers == 1);
}

TEST_CASE("a leader's renews keep the preferredHolder and strategy another writer set") {
  // Before, a renew wrote the spec of the leader's own last write: a
  // `kubectl patch` of preferredHolder vanished at the next renew.
  for (bool watch : {true, false}) {
    CAPTURE(watch);
    sim_world w(three(false, watch));
    auto leader = w.await_leader(60s);
    patch_preferred_holder(w, w.rep(leader).identity);   // the leader itself: nothing to do
    w.run_for(5 * w.options().timings.retry_period);
    CHECK(w.leader() == static_cast<int>(leader));
    auto l = record(w);
    CHECK(l->spec.holder_identity == w.rep(leader).identity);
    CHECK(l->spec.preferred_holder == w.rep(leader).identity);
    CHECK(l->spec.strategy == "OldestEmulationVersion");
    CHECK(w.rep(leader).count(event_type::voluntary_handover) == 0);
  }
}

TEST_CASE("preferredHolder written during a creation hold: the creator's term starts with the "
          "handover, its module never runs") {
  auto o = three(false, true);
  o.lease_exists = false;
  sim_world w(o);
  REQUIRE(w.run_until([&] { return record(w).has_value(); }, 10s));
  auto creator = record(w)->spec.holder_identity;
  REQUIRE_FALSE(creator.empty());
  std::size_t target = creator == "replica-0" ? 1 : 0;
  patch_preferred_holder(w, w.rep(target).identity);
  REQUIRE(w.run_until([&] { return w.leader() == static_cast<int>(target); },
                      o.timings.lease_duration + 30s));
  CHECK(w.tracker().started(creator) == 0);
  CHECK(record(w)->spec.holder_identity == w.rep(target).identity);
}

TEST_CASE("a replica in its own yield window takes a lease released to it by name") {
  // Before, the window held it back: the leader it had yielded to yielded
  // back to it, and another replica took the lease after preferred_holder_wait.
  sim_world w(three(false, true));
  auto leader = w.await_leader(60s);
  auto target = (leader + 1) % w.size();
  auto before = w.now();
  REQUIRE(w.yield(leader, w.rep(target).identity).status == yield_status::handed_over);
  REQUIRE(w.now() - before < yield_window(w.options().timings, true));   // still in the window
  auto back = w.yield(target, w.rep(leader).identity);
  CHECK(back.status == yield_status::handed_over);
  CHECK(back.successor == w.rep(leader).identity);
  check_handed_over(w, target, leader);
}


// Outside a balance group a yield used to accept any name: a mistyped --to
// gave leadership up, nobody took it, and the lease came back a yield window
// later. Each replica now announces itself for the lease (a candidate set),
// and a name that no live replica announces is refused before anything moves.
TEST_CASE("outside any group a yield or a preferredHolder naming no replica that announces the "
          "lease moves nothing; one that announces it may be named") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    sim_world w(three(etcd, true));
    auto& t = w.options().timings;
    for (std::size_t i = 0; i < w.size(); ++i)
      w.start_candidates(i);
    auto leader = w.await_leader(60s);   // the runners compete by themselves
    REQUIRE(w.run_until([&] {
      auto c = w.status(leader).candidates;
      return c && c->size() == w.size();
    }, 3 * t.lease_duration));
    auto instances = w.tracker().instances.size();
    auto r = w.group_yield(leader, w.options().lease.name, "replica-gone");
    CHECK(r.status == yield_status::unknown_target);
    CHECK_MESSAGE(r.reason.find("replica-gone is not a settled member of the replicas of lease "
                                + w.options().lease.name) != std::string::npos, r.reason);
    auto direct = w.yield(leader, "replica-gone");   // the runner judges by the same list
    CHECK(direct.status == yield_status::unknown_target);
    CHECK_MESSAGE(direct.reason.find("replica-gone is not a member") != std::string::npos,
                  direct.reason);
    if (!etcd)
      patch_preferred_holder(w, "replica-gone");
    w.run_for(2 * t.lease_duration);
    CHECK(w.leader() == static_cast<int>(leader));
    CHECK(w.tracker().instances.size() == instances);   // no module started anew
    CHECK(w.rep(leader).count(event_type::voluntary_handover) == 0);

    auto to = (leader + 1) % w.size();
    r = w.group_yield(leader, w.options().lease.name, w.rep(to).identity);
    CHECK(r.status == yield_status::handed_over);
    check_handed_over(w, leader, to);
  }
}
