// Kubernetes leases bound to a session (transport/kube/kube_session.hpp) on
// the scripted world: what the store sees (one session write per retry
// period, however many leases), who leads after a holder dies, and what an
// operator's write to a session or a bound Lease ends. sim_world checks
// after every step that no two replicas run one lease's work.
#include <doctest/doctest.h>

#include <set>

#include "sim_world.hpp"
#include "transport/kube/kube_session.hpp"

using namespace leasehold;
using namespace leasehold::test;
using namespace std::chrono_literals;

namespace {

world_options bound_world(std::size_t replicas, std::size_t leases) {
  world_options o;
  o.replicas = replicas;
  o.leases = leases;
  o.session = true;
  return o;
}

/// Writes (POST, PUT) the store saw since request `from`, by lease name.
std::map<std::string, int> writes_since(sim_world& w, std::size_t from) {
  std::map<std::string, int> out;
  auto log = w.store().requests();
  for (auto i = from; i < log.size(); ++i)
    if (log[i].verb == "PUT" || log[i].verb == "POST")
      ++out[log[i].lease.substr(log[i].lease.find('/') + 1)];
  return out;
}

lease_key session_of(sim_world& w, std::size_t i) {
  return {"default", session_lease_name(w.rep(i).identity)};
}

std::string annotation(const lease& l, const char* key) {
  auto m = l.raw.find("metadata");
  if (m == l.raw.end() || !m->contains("annotations") || !(*m)["annotations"].contains(key))
    return "";
  return (*m)["annotations"][key].get<std::string>();
}

/// Runs `w` (2 replicas) until every lease is led, then moves lease 1 to
/// lease 0's holder if need be (the other replica gives it up), so that
/// holder's session lives on while lease 0 is tested. Returns the holder.
std::size_t hold_two(sim_world& w) {
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  auto holder = static_cast<std::size_t>(w.leader_of(0));
  if (w.leader_of(1) != static_cast<int>(holder)) {
    caf::anon_send_exit(w.rep(1 - holder).runners[1], caf::exit_reason::user_shutdown);
    REQUIRE(w.run_until([&] { return w.leader_of(1) == static_cast<int>(holder); }, 60s));
    w.run_for(5s);
  }
  return holder;
}

} // namespace

TEST_CASE("bound leases cost the store one session write per retry period, not one per lease") {
  sim_world w(bound_world(2, 8));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(30s);   // settled
  auto from = w.store().requests().size();
  w.run_exactly(60s);
  auto writes = writes_since(w, from);
  int lease_writes = 0, session_writes = 0;
  for (auto& [name, n] : writes)
    (name.rfind("lh-session-", 0) == 0 ? session_writes : lease_writes) += n;
  CHECK(lease_writes == 0);   // no refresh is due within 600 s
  // Only replicas holding leases renew a session: 60 s / 2 s rounds each.
  std::set<int> holders;
  for (std::size_t k = 0; k < 8; ++k)
    holders.insert(w.leader_of(k));
  CHECK(session_writes >= 28 * static_cast<int>(holders.size()) / 2);
  CHECK(session_writes <= 32 * static_cast<int>(holders.size()));

  // Each bound Lease names its holder's session and holds for foreign readers far longer.
  for (std::size_t k = 0; k < 8; ++k) {
    auto rec = w.api().peek(w.lease_at(k));
    REQUIRE(rec);
    auto holder = static_cast<std::size_t>(w.leader_of(k));
    CHECK(rec->spec.holder_identity == w.rep(holder).identity);
    CHECK(rec->spec.lease_duration_seconds.value_or(0) >= 600);
    CHECK(annotation(*rec, session_annotation).rfind(session_lease_name(w.rep(holder).identity) + "/", 0) == 0);
  }
}

TEST_CASE("a follower of a live bound holder reads its session every half retry period, never ends it") {
  sim_world w(bound_world(2, 1));
  auto holder = w.await_leader(60s);
  w.run_for(30s);   // settled
  REQUIRE(w.await_leader(1s) == holder);
  auto follower = 1 - holder;
  auto session = session_of(w, holder).to_string();
  auto& t = w.options().timings;
  auto from = w.store().requests().size();
  // Sampled every 250 ms: the follower's view of the holder is as fresh as
  // the session's last renewal (one a retry period) and its last read (one
  // a half), never near "unknown" (a lease duration).
  std::int64_t oldest_ms = 0;
  for (int i = 0; i < 240; ++i) {
    w.run_exactly(250ms);
    auto st = w.status(follower);
    REQUIRE(st.holder == w.rep(holder).identity);
    oldest_ms = std::max(oldest_ms, st.holder_age_ms);
  }
  CHECK(oldest_ms <= std::chrono::duration_cast<std::chrono::milliseconds>(
                       t.retry_period + t.retry_period / 2).count());
  int reads = 0, writes = 0;
  auto log = w.store().requests();
  for (auto i = from; i < log.size(); ++i)
    if (log[i].client == w.rep(follower).identity && log[i].lease == session) {
      reads += log[i].verb == "GET";
      writes += log[i].verb != "GET";
    }
  CHECK(writes == 0);   // no attempt to end a session that renews
  // 60 s at one read per half retry period (1 s).
  CHECK(reads >= 50);
  CHECK(reads <= 70);
  CHECK(w.await_leader(1s) == holder);
}

TEST_CASE("a dead holder's bound leases are taken a lease duration after its session stopped") {
  sim_world w(bound_world(2, 4));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  // Move every lease to replica 0 first: kill replica 1 if it leads any.
  std::size_t victim = static_cast<std::size_t>(w.leader_of(0));
  auto killed = w.now();
  w.kill_replica(victim);
  std::size_t other = 1 - victim;
  REQUIRE(w.run_until([&] { return w.all_led(static_cast<int>(other)); }, 60s));
  auto took = w.now() - killed;
  auto& t = w.options().timings;
  CHECK(took >= t.lease_duration - t.retry_period);
  CHECK(took <= t.lease_duration + 3 * t.retry_period + 4 * t.effective_request_timeout());
  // The taker ended the dead session first: its released form.
  auto s = w.api().peek(session_of(w, victim));
  REQUIRE(s);
  CHECK(s->spec.holder_identity.empty());
  CHECK(s->spec.lease_duration_seconds.value_or(0) == 1);
}

TEST_CASE("an operator deleting a session ends its holder's bound terms at once") {
  sim_world w(bound_world(2, 4));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  std::size_t holder = static_cast<std::size_t>(w.leader_of(0));
  auto lost_before = w.rep(holder).count(event_type::term_lost);
  w.api().outside_delete(session_of(w, holder));
  auto deleted = w.now();
  REQUIRE(w.run_until([&] { return w.rep(holder).count(event_type::term_lost) > lost_before; },
                      10s));
  CHECK(w.now() - deleted <= w.options().timings.retry_period + w.options().timings.effective_request_timeout());
  // Leadership comes back (the holder retakes its own ended terms), never twice at once.
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
}

TEST_CASE("an operator emptying a bound Lease's holder ends that term only; others wait it out") {
  sim_world w(bound_world(2, 3));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  std::size_t holder = static_cast<std::size_t>(w.leader_of(1));
  int others_before = 0;
  for (std::size_t k = 0; k < 3; ++k)
    others_before += k != 1 && w.leader_of(k) == static_cast<int>(holder);
  w.api().outside_revoke(w.lease_at(1));
  REQUIRE(w.run_until([&] { return w.leader_of(1) < 0; }, 10s));
  int others_after = 0;
  for (std::size_t k = 0; k < 3; ++k)
    others_after += k != 1 && w.leader_of(k) == static_cast<int>(holder);
  CHECK(others_after == others_before);
  auto emptied = w.now();
  REQUIRE(w.run_until([&] { return w.leader_of(1) >= 0; }, 60s));
  CHECK(w.now() - emptied >= w.options().timings.lease_duration - w.options().timings.retry_period);
}

TEST_CASE("a holder shutting down hands its bound leases over as plain released records") {
  sim_world w(bound_world(2, 4));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  std::size_t holder = static_cast<std::size_t>(w.leader_of(0));
  std::size_t other = 1 - holder;
  auto stopped = w.now();
  {
    caf::scoped_actor self{w.sys()};
    for (auto& r : w.rep(holder).runners)
      self->send(r, shutdown_atom::value);
  }
  REQUIRE(w.run_until([&] { return w.all_led(static_cast<int>(other)); }, 30s));
  CHECK(w.now() - stopped < w.options().timings.lease_duration / 2);
}

TEST_CASE("a bound Lease whose runner died while its session lives is reaped and taken, not held for ever") {
  sim_world w(bound_world(2, 3));
  auto holder = hold_two(w);
  auto died = w.now();
  caf::anon_send_exit(w.rep(holder).runners[0], caf::exit_reason::kill);   // no release
  std::size_t other = 1 - holder;
  REQUIRE(w.run_until([&] { return w.leader_of(0) == static_cast<int>(other); }, 120s));
  auto& t = w.options().timings;
  // Unasked for two lease durations, then released, then taken through the watch.
  CHECK(w.now() - died >= 2 * t.lease_duration);
  CHECK(w.now() - died <= 2 * t.lease_duration + 4 * t.retry_period);
  auto s = w.api().peek(session_of(w, holder));
  REQUIRE(s);
  CHECK(s->spec.holder_identity == w.rep(holder).identity);   // its session lived on
}

TEST_CASE("a bound Lease whose release failed is released again by its session, not held for ever") {
  sim_world w(bound_world(2, 2));
  auto holder = hold_two(w);
  std::size_t other = 1 - holder;
  // The holder's release of lease 0 is refused; its session's rounds are
  // answered again a moment later, well within its renew deadline.
  w.api().set_fault(sim_fault::refuse_writes, w.rep(holder).identity, 422);
  auto released = w.now();
  {
    caf::scoped_actor self{w.sys()};
    self->send(w.rep(holder).runners[0], shutdown_atom::value);
  }
  REQUIRE(w.run_until([&] { return w.leader_of(0) < 0; }, 30s));
  w.run_for(500ms);
  w.api().set_fault(sim_fault::none, w.rep(holder).identity);
  auto b = w.api().peek(w.lease_at(0));
  REQUIRE(b);
  CHECK(b->spec.holder_identity == w.rep(holder).identity);   // the release did not land
  REQUIRE(w.run_until([&] { return w.leader_of(0) == static_cast<int>(other); }, 60s));
  // Released again at the session's next round, not after the reaper's two
  // lease durations, and never while the holder kept lease 1.
  CHECK(w.now() - released < w.options().timings.lease_duration);
  CHECK(w.leader_of(1) == static_cast<int>(holder));
}

TEST_CASE("a bound take whose answer was lost, its elector gone, is reaped, not held for ever") {
  sim_world w(bound_world(3, 2));
  REQUIRE(w.run_until([&] { return w.all_led(); }, 60s));
  w.run_for(10s);
  // H holds lease 1 (its session lives on) and still runs lease 0's
  // runner; P holds lease 0; O is the third.
  if (w.leader_of(0) == w.leader_of(1)) {
    auto x = static_cast<std::size_t>(w.leader_of(1));
    caf::anon_send_exit(w.rep(x).runners[1], caf::exit_reason::user_shutdown);
    REQUIRE(w.run_until([&] { return w.leader_of(1) >= 0 && w.leader_of(1) != static_cast<int>(x); }, 60s));
    w.run_for(5s);
  }
  auto h = static_cast<std::size_t>(w.leader_of(1));
  auto p = static_cast<std::size_t>(w.leader_of(0));
  auto o = 3 - h - p;
  REQUIRE(h != p);
  // P releases lease 0. O cannot reach the API; H's take lands, but its
  // answer is lost, and H's runner of lease 0 dies before it reads it back.
  w.api().set_fault(sim_fault::down, w.rep(o).identity);
  w.api().set_fault(sim_fault::lose_answers, w.rep(h).identity);
  {
    caf::scoped_actor self{w.sys()};
    self->send(w.rep(p).runners[0], shutdown_atom::value);
  }
  REQUIRE(w.run_until([&] {
    auto r = w.api().peek(w.lease_at(0));
    return r && r->spec.holder_identity == w.rep(h).identity;
  }, 30s));
  auto taken = w.now();
  caf::anon_send_exit(w.rep(h).runners[0], caf::exit_reason::kill);
  w.api().set_fault(sim_fault::none, w.rep(h).identity);
  w.api().set_fault(sim_fault::none, w.rep(o).identity);
  REQUIRE(binding_of(*w.api().peek(w.lease_at(0))));   // bound to H's session
  REQUIRE(w.run_until([&] { return w.leader_of(0) == static_cast<int>(o); }, 120s));
  auto& t = w.options().timings;
  // Nobody asked about it for two lease durations: reaped, then taken.
  CHECK(w.now() - taken >= 2 * t.lease_duration);
  CHECK(w.now() - taken <= 2 * t.lease_duration + 4 * t.retry_period);
  CHECK(w.leader_of(1) == static_cast<int>(h));   // H's session lived on
}
