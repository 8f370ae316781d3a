// compete_atom: a runner that only follows its lease (a standby) never
// acquires it; a leader told to stand by hands over through the step-down
// path (modules down, then release), and a competing follower takes the
// lease through its watch, well inside a lease duration. On both stores.
// sim_world checks after every step that no two replicas run leader-only
// work at once.
#include <doctest/doctest.h>

#include "sim_world.hpp"

using namespace leasehold;
using namespace leasehold::test;
using namespace std::chrono_literals;

namespace {

void compete(sim_world& w, std::size_t i, bool on) {
  caf::anon_send(w.rep(i).runner, compete_atom::value, on);
  w.settle();
}

world_options three(bool etcd) {
  world_options o;
  o.replicas = 3;
  o.etcd = etcd;
  return o;
}

} // namespace

TEST_CASE("a leader told to stand by hands over to a competing follower through its watch") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    sim_world w(three(etcd));
    auto l = w.await_leader(60s);
    auto& old_id = w.rep(l).identity;
    auto told = w.now();
    compete(w, l, false);
    // The successor runs the work within the old leader's stop, a release
    // and a watch event: far inside one lease duration (15 s), which an
    // expiry would take.
    REQUIRE(w.run_until([&] { return w.leader() >= 0 && static_cast<std::size_t>(w.leader()) != l; },
                        w.options().timings.module_stop_timeout + 2s));
    auto next = static_cast<std::size_t>(w.leader());
    auto* before = w.tracker().last(old_id, "work");
    auto* after = w.tracker().last(w.rep(next).identity, "work");
    REQUIRE(before);
    REQUIRE(after);
    REQUIRE(before->stopped);
    CHECK(*before->stopped <= after->started);   // handed over, never overlapped
    CHECK(after->started - told < 2s);
    // A voluntary handover, said as one (event, and so the metric).
    CHECK(w.rep(l).count(event_type::voluntary_handover) == 1);
    auto st = w.status(l);
    CHECK_FALSE(st.competing);
    CHECK(st.state == runner_state::follower);
    // The standby follows and never takes the lease back, also when the new
    // leader stops: then nobody leads (the other follower still competes).
    auto starts = w.tracker().started(old_id);
    w.run_for(3 * w.options().timings.lease_duration);
    CHECK(w.tracker().started(old_id) == starts);
    CHECK(w.status(l).holder == w.rep(next).identity);   // it still sees who holds it
  }
}

TEST_CASE("standbys never acquire a free lease; told to compete, one takes it at once") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    sim_world w(three(etcd));
    auto l = w.await_leader(60s);
    for (std::size_t i = 0; i < w.size(); ++i)
      if (i != l)
        compete(w, i, false);
    compete(w, l, false);   // the last competitor stands by too: the lease is released
    REQUIRE(w.run_until([&] { return w.leader() < 0; }, 10s));
    std::vector<int> starts;
    for (std::size_t i = 0; i < w.size(); ++i)
      starts.push_back(w.tracker().started(w.rep(i).identity));
    w.run_for(3 * w.options().timings.lease_duration);
    for (std::size_t i = 0; i < w.size(); ++i)
      CHECK(w.tracker().started(w.rep(i).identity) == starts[i]);
    CHECK(w.leader() < 0);
    // One is told to compete: it takes the released lease on the spot (its
    // elector acts at once, not at its next poll).
    auto pick = (l + 1) % w.size();
    auto told = w.now();
    compete(w, pick, true);
    REQUIRE(w.run_until([&] { return w.leader() == static_cast<int>(pick); }, 5s));
    CHECK(w.now() - told < 1s);
  }
}
