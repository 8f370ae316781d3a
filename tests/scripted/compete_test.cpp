// compete_atom: a runner that only follows its lease (a standby) never
// acquires it; a leader told to stand by hands over through the step-down
// path (modules down, then release), and a competing follower takes the
// lease through its watch, well inside a lease duration. On both stores.
// sim_world checks after every step that no two replicas run leader-only
// work at once.
#include <doctest/doctest.h>

#include "actors/elector.hpp"
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

// Balance groups' fresh-store figure (docs/safety.md, "A Lease created unheld
// ..."): a standby that never saw its lease and finds none creates it with
// no holder. Nobody acquires it before a lease duration from the create,
// also a replica told to compete halfway through; standbys never do. After
// a wipe, standbys that saw the lease do not create it again (only a
// process that never saw it does).
TEST_CASE("a standby that never saw its lease creates it unheld; nobody acquires it within a lease duration of the create") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    world_options o = three(etcd);
    o.leases = 2;
    o.balance = true;          // runners stand by; no group is started
    o.lease_exists = false;
    sim_world w(o);
    auto& t = w.options().timings;
    auto created = w.now();    // the runners' first reads ran in the constructor
    auto lease = w.lease_at(0);
    auto rec = w.store().peek(lease);
    REQUIRE(rec);
    CHECK(rec->spec.holder_identity.empty());
    CHECK(rec->spec.lease_duration_seconds == duration_seconds(t.lease_duration));
    auto posts = [&] {
      int n = 0;
      for (auto& r : w.store().requests())
        n += r.verb == "POST" && r.result == error_kind::none
             && r.lease.find("/lh-session-") == std::string::npos ? 1 : 0;   // the leases' own
      return n;
    };
    CHECK(posts() == 2);       // one per lease, whoever came first
    w.run_for(t.lease_duration / 2);
    caf::anon_send(w.rep(1).runners[0], compete_atom::value, true);
    REQUIRE(w.run_until([&] { return w.leader_of(0) == 1; }, t.lease_duration + 2s));
    auto* work = w.tracker().last(w.rep(1).identity, "work-0");
    REQUIRE(work);
    CHECK(work->started - created >= t.lease_duration);
    CHECK(work->started - created <= t.lease_duration + t.retry_period);
    w.run_for(3 * t.lease_duration);
    CHECK(w.leader_of(1) < 0);  // standbys never acquire
    CHECK(w.tracker().instances.size() == 1);
    if (!etcd) {
      w.api().wipe();
      w.run_for(3 * t.lease_duration);
      CHECK_FALSE(w.store().peek(w.lease_at(1)));   // they saw it: nobody creates it unheld
      CHECK(posts() == 2 + 1);  // the leader of lease 0 put its term back
    }
  }
}
