// The simulated etcd store answers the lease transport's requests as
// transport/etcd/etcd_transport.hpp maps them onto etcd, with etcd's revisions
// and lease TTLs judged by the store's own clock.
#include <doctest/doctest.h>

#include "sim_etcd.hpp"

using namespace leasehold;
using namespace std::chrono_literals;

namespace {

struct fixture {
  sim_etcd::time_point now = sim_etcd::time_point{} + 1h;
  sim_etcd store{[this] { return now; }};
  lease_key key{"default", "lock"};

  lease record(const std::string& holder, int term, int ttl_seconds = 5,
               const std::string& rv = {}) {
    lease l;
    l.ns = key.ns;
    l.name = key.name;
    l.resource_version = rv;
    l.spec.holder_identity = holder;
    l.spec.lease_duration_seconds = ttl_seconds;
    l.spec.lease_transitions = term;
    l.spec.acquire_time = wall_time{} + std::chrono::microseconds(1234567);
    return l;
  }
};

} // namespace

TEST_CASE("sim_etcd: a create takes the next revision as its term; a second create finds the key") {
  fixture f;
  auto a = f.store.create("a", f.record("a", 99));
  REQUIRE(a.ok());
  CHECK(a.value->spec.holder_identity == "a");
  CHECK(a.value->spec.lease_transitions == 2);   // the store's, not the writer's
  CHECK(a.value->resource_version == "2");
  CHECK(a.value->spec.acquire_time == f.record("a", 1).spec.acquire_time);
  CHECK_FALSE(a.value->spec.renew_time);         // etcd keeps no renewTime
  auto b = f.store.create("b", f.record("b", 1));
  CHECK(b.kind() == error_kind::already_exists);
  auto got = f.store.get("b", f.key);
  REQUIRE(got.ok());
  CHECK(got.value->spec.holder_identity == "a");
  CHECK(got.value->spec.lease_transitions == 2);
  CHECK(f.store.revision() == 2);
}

TEST_CASE("sim_etcd: the key dies when its TTL passes without a keepalive; a keepalive restarts it") {
  fixture f;
  auto a = f.store.create("a", f.record("a", 0, 5));
  REQUIRE(a.ok());
  f.now += 4s;
  auto renewed = f.store.update("a", *a.value);
  REQUIRE(renewed.ok());
  CHECK(renewed.value->resource_version == "2");   // a keepalive writes nothing
  CHECK(f.store.next_expiry() == f.now + 5s);
  f.now += 4900ms;
  CHECK_FALSE(f.store.expire_due());
  CHECK(f.store.peek(f.key));
  f.now += 100ms;
  CHECK_FALSE(f.store.peek(f.key));                // gone by the store's clock
  CHECK(f.store.expire_due());
  CHECK(f.store.get("a", f.key).kind() == error_kind::not_found);
  CHECK(f.store.update("a", *a.value).kind() == error_kind::not_found);
  auto changes = f.store.changes_since(f.key, 0);
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].record);
  CHECK_FALSE(changes[1].record);                  // the DELETE, at the next revision
  CHECK(changes[1].rv == 3);
  auto b = f.store.create("b", f.record("b", 0));
  REQUIRE(b.ok());
  CHECK(b.value->spec.lease_transitions == 4);     // terms only grow
}

TEST_CASE("sim_etcd: a release puts the released record in its own term only, and anyone may take it") {
  fixture f;
  auto a = f.store.create("a", f.record("a", 0));
  REQUIRE(a.ok());
  auto other_term = *a.value;
  other_term.spec.holder_identity.clear();
  other_term.spec.lease_transitions = 1;
  CHECK(f.store.update("a", other_term).kind() == error_kind::conflict);
  CHECK(f.store.update("b", f.record("b", 2)).kind() == error_kind::conflict);   // not b's key
  auto release = *a.value;
  release.spec.holder_identity.clear();
  release.spec.lease_duration_seconds = 1;
  auto r = f.store.update("a", release);
  REQUIRE(r.ok());
  CHECK(r.value->spec.holder_identity.empty());
  auto marked = f.store.peek(f.key);   // the released record, same key and lease
  REQUIRE(marked);
  CHECK(marked->spec.holder_identity.empty());
  CHECK(marked->spec.lease_duration_seconds == 1);
  CHECK(marked->spec.lease_transitions == a.value->spec.lease_transitions);
  CHECK(marked->resource_version == r.value->resource_version);
  CHECK(f.store.next_expiry());         // not revoked: untaken, it goes with the TTL
  // Another replica takes it: the key is deleted and created anew (a new term).
  auto take = *marked;
  take.spec = f.record("b", 0).spec;
  take.spec.lease_transitions = marked->spec.lease_transitions + 1;
  auto b = f.store.update("b", take);
  REQUIRE(b.ok());
  CHECK(b.value->spec.holder_identity == "b");
  CHECK(b.value->spec.lease_transitions > marked->spec.lease_transitions);
  // A stale version of the released record cannot be taken.
  CHECK(f.store.update("c", take).kind() == error_kind::conflict);
}

TEST_CASE("sim_etcd: a key created unheld lives twice its duration, and a competitor takes it as a released one") {
  // A standby's unheld create (no holder, no release): every replica waits
  // it out a lease duration from when it saw it, so its TTL is twice that
  // (etcd_key_ttl, as the transport grants it) to outlive the wait.
  fixture f;
  auto u = f.store.create("a", f.record("", 0, 2));
  REQUIRE(u.ok());
  CHECK(u.value->spec.holder_identity.empty());
  CHECK(f.store.next_expiry() == f.now + 4s);
  f.now += 3s;
  CHECK_FALSE(f.store.expire_due());
  auto seen = f.store.get("b", f.key);
  REQUIRE(seen.ok());
  auto take = *seen.value;
  take.spec = f.record("b", 0, 2).spec;
  take.spec.lease_transitions = seen.value->spec.lease_transitions + 1;
  auto b = f.store.update("b", take);   // delete if unchanged, then create: a new term
  REQUIRE(b.ok());
  CHECK(b.value->spec.holder_identity == "b");
  CHECK(b.value->spec.lease_transitions > seen.value->spec.lease_transitions);
  // A held key: its own duration (b's session lease of 2 s); a's session
  // lease, empty now, runs out first and deletes nothing of b's.
  f.now += 1500ms;
  f.store.expire_due();
  CHECK(f.store.peek(f.key));
  f.now += 600ms;
  f.store.expire_due();
  CHECK_FALSE(f.store.peek(f.key));
}

TEST_CASE("sim_etcd: the same holder in a new term deletes its unchanged key and creates it anew") {
  fixture f;
  auto a = f.store.create("a", f.record("a", 0));
  REQUIRE(a.ok());
  auto stale = f.record("a", 7, 5, "1");
  CHECK(f.store.update("a", stale).kind() == error_kind::conflict);   // another mod_revision
  auto again = f.record("a", 7, 5, a.value->resource_version);
  auto r = f.store.update("a", again);
  REQUIRE(r.ok());
  CHECK(r.value->spec.lease_transitions == 4);   // 3 was the delete
  CHECK(f.store.peek(f.key)->spec.lease_transitions == 4);
}

TEST_CASE("sim_etcd: a create that names the read that found the key absent learns whether the key was written since") {
  fixture f;
  auto absent = f.store.get("a", f.key);
  REQUIRE(absent.kind() == error_kind::not_found);
  auto read_at = absent.error.store_revision;
  lease other = f.record("b", 1);
  other.name = "other";   // another key's writes move the store, not this key
  REQUIRE(f.store.create("b", other).ok());
  auto l = f.record("a", 1);
  l.absent_at_revision = read_at;
  auto a = f.store.create("a", l);
  REQUIRE(a.ok());
  CHECK(a.value->unwritten_since_read);
  // A term of b created and deleted from outside after the read: written.
  f.store.outside_delete(f.key);
  read_at = f.store.get("a", f.key).error.store_revision;
  REQUIRE(f.store.create("b", f.record("b", 1)).ok());
  f.store.outside_delete(f.key);
  l.absent_at_revision = read_at;
  a = f.store.create("a", l);
  REQUIRE(a.ok());
  CHECK_FALSE(a.value->unwritten_since_read);
  // Not asked: not claimed; and the store's watchers never see the flag.
  f.store.outside_delete(f.key);
  a = f.store.create("a", f.record("a", 1));
  REQUIRE(a.ok());
  CHECK_FALSE(a.value->unwritten_since_read);
  for (auto& c : f.store.changes_since(f.key, 0))
    CHECK_FALSE((c.record && c.record->unwritten_since_read));
}

TEST_CASE("sim_etcd: a raft leader change gives every lease its full TTL again") {
  fixture f;
  REQUIRE(f.store.create("a", f.record("a", 0, 3)).ok());
  auto created = f.now;
  f.now += 2s;
  f.store.leader_change();
  f.now += 1500ms;   // past the TTL from the create: the lease lives on
  CHECK(f.store.peek(f.key));
  CHECK(f.store.next_expiry() == created + 2s + 3s);
}

TEST_CASE("sim_etcd: the transport's reaper puts the released record on a key unasked for a TTL "
          "with its client's next keepalive (deleted a TTL later if untaken), never for a client "
          "that sends none; the term on it cannot be renewed") {
  fixture f;
  auto a = f.store.create("a", f.record("a", 0, 3));   // its answer lost: never asked again
  REQUIRE(a.ok());
  lease_key k2{"default", "busy"};
  auto l2 = f.record("a", 0, 3);
  l2.name = k2.name;
  f.now += 2s;
  auto b = f.store.create("a", l2);   // a keepalive: the lease lives to now + 3 s
  REQUIRE(b.ok());
  f.now += 1500ms;   // 3.5 s after the first key's create: unasked for its TTL
  CHECK_FALSE(f.store.expire_due());   // the store itself writes nothing
  REQUIRE(f.store.peek(f.key));
  CHECK(f.store.peek(f.key)->spec.holder_identity == "a");
  REQUIRE(f.store.update("a", *b.value).ok());   // a renew of the other key: a keepalive
  auto released = f.store.peek(f.key);   // reaped with it: released, same term
  REQUIRE(released);
  CHECK(released->spec.holder_identity.empty());
  CHECK(released->spec.lease_duration_seconds == 1);
  CHECK(released->spec.lease_transitions == a.value->spec.lease_transitions);
  CHECK(f.store.update("a", *a.value).kind() == error_kind::conflict);   // no renew on it
  CHECK(f.store.peek(k2));
  f.now += 2s;
  REQUIRE(f.store.update("a", *b.value).ok());   // keeps the session lease alive
  REQUIRE(f.store.peek(f.key));
  f.now += 1500ms;   // untaken for another TTL
  REQUIRE(f.store.update("a", *b.value).ok());
  CHECK_FALSE(f.store.peek(f.key));
  CHECK(f.store.peek(k2));
}

TEST_CASE("sim_etcd: a renew whose range came before the reaper's write is refused at its keepalive") {
  // The renew's range and keepalive are two steps (update_begin), so the
  // simulator can put another key's keepalive, and the reaper's released
  // record, in between: that renew must not win (etcd_session::renewing).
  fixture f;
  auto a = f.store.create("a", f.record("a", 0, 3));
  REQUIRE(a.ok());
  lease_key k2{"default", "busy"};
  auto l2 = f.record("a", 0, 3);
  l2.name = k2.name;
  f.now += 2s;
  auto b = f.store.create("a", l2);
  REQUIRE(b.ok());
  f.now += 1500ms;   // the first key unasked for its TTL
  auto rest = f.store.update_begin("a", *a.value);   // its range: held, in its term
  REQUIRE(rest);
  REQUIRE(f.store.update("a", *b.value).ok());   // another renew's keepalive reaps it
  REQUIRE(f.store.peek(f.key));
  CHECK(f.store.peek(f.key)->spec.holder_identity.empty());
  CHECK(rest().kind() == error_kind::conflict);
  // A renew that read after the write meets the released record (one step).
  CHECK_FALSE(f.store.update_begin("a", *a.value));
  // A release and a take are one step each.
  auto rel = *b.value;
  rel.spec.holder_identity.clear();
  CHECK_FALSE(f.store.update_begin("a", rel));
}

TEST_CASE("sim_etcd: a client's keys share its session lease: a keepalive renews all, a revoke "
          "deletes all, a delete one; a re-created key binds to the live lease; TTL readings are shared") {
  fixture f;
  lease_key k2{"default", "other"};
  auto l2 = f.record("a", 0, 5);
  l2.name = k2.name;
  auto a = f.store.create("a", f.record("a", 0, 5));
  REQUIRE(a.ok());
  f.now += 3s;
  auto b = f.store.create("a", l2);   // keeps the session lease alive: a whole TTL from here
  REQUIRE(b.ok());
  auto c = f.store.create("c", [&] { auto l = f.record("c", 0, 5); l.name = "third"; return l; }());
  REQUIRE(c.ok());
  CHECK(f.store.keys_sharing_lease(f.key) == std::vector<lease_key>{f.key, k2});
  CHECK(f.store.keys_sharing_lease({"default", "third"}).size() == 1);
  f.now += 1500ms;
  REQUIRE(f.store.update("a", *b.value).ok());   // a renew of one key ...
  auto ra = f.store.update("a", *a.value);       // ... and of the other (its ask)
  REQUIRE(ra.ok());
  REQUIRE(f.store.update("c", *c.value).ok());
  f.now += 2s;   // 6.5 s after the first create
  f.store.expire_due();
  REQUIRE(f.store.peek(f.key));   // both alive: the keepalives renewed the lease
  REQUIRE(f.store.peek(k2));
  // One TTL reading serves both keys for the same client, with its age.
  auto g1 = f.store.get("x", f.key);
  f.now += 200ms;
  auto g2 = f.store.get("x", k2);
  REQUIRE(g1.ok());
  REQUIRE(g2.ok());
  CHECK(g2.value->ttl_seconds == g1.value->ttl_seconds);
  CHECK(g2.value->ttl_age == 200ms);
  CHECK(f.store.get("y", k2).value->ttl_age == 0ns);   // another client reads its own
  // Deleting one key ends only that term.
  f.store.outside_delete(k2);
  CHECK_FALSE(f.store.peek(k2));
  REQUIRE(f.store.peek(f.key));
  // A key re-created is bound to the live session lease.
  auto again = f.store.create("a", l2);
  REQUIRE(again.ok());
  CHECK(f.store.keys_sharing_lease(k2).size() == 2);
  // Revoking it deletes every key of the client, not the other client's.
  f.store.outside_revoke(f.key);
  CHECK_FALSE(f.store.peek(f.key));
  CHECK_FALSE(f.store.peek(k2));
  CHECK(f.store.peek({"default", "third"}));
  // The next create grants a new session lease.
  auto fresh = f.store.create("a", f.record("a", 0, 5));
  REQUIRE(fresh.ok());
  CHECK(f.store.keys_sharing_lease(f.key) == std::vector<lease_key>{f.key});
}

TEST_CASE("sim_etcd: faults answer in etcd's terms and are logged") {
  fixture f;
  f.store.set_fault(sim_fault::error, "a", 429);
  int status = 0;
  CHECK(f.store.fault_for("a", status) == sim_fault::error);
  CHECK(status == 429);
  CHECK(f.store.fault_for("b", status) == sim_fault::none);
  auto r = f.store.failure("a", "GET", f.key, sim_fault::error, 429);
  CHECK(r.kind() == error_kind::throttled);
  CHECK(r.error.path.find("/v3/kv/range") == 0);
  CHECK(f.store.count("GET", "a") == 1);
}

TEST_CASE("ttl_readings: a reading of n >= 2 s serves for (n - 0.5 s) / 2 from its send, with its age; "
          "readings under 2 s serve for 50 ms; a later-sent reading replaces an earlier one") {
  using tp = sim_etcd::time_point;
  ttl_readings<tp> r;
  tp t0 = tp{} + 1h;
  r.note("7", t0, 15);
  auto got = r.find("7", t0 + 7s);
  REQUIRE(got);
  CHECK(got->ttl_seconds == 15);
  CHECK(got->sent == t0);   // the reader counts from this send, not from its own read
  CHECK(r.find("7", t0 + 7250ms));
  CHECK_FALSE(r.find("7", t0 + 7251ms));   // next_ttl_read's n - 0.5 s must reach etcd
  CHECK_FALSE(r.find("8", t0));
  r.note("7", t0 - 1s, 3);   // sent earlier: does not replace
  CHECK(r.find("7", t0 + 1s)->ttl_seconds == 15);
  r.note("7", t0 + 1s, 1);   // a lease's last seconds: 50 ms, then afresh
  CHECK(r.find("7", t0 + 1050ms));
  CHECK_FALSE(r.find("7", t0 + 1051ms));
  r.note("7", t0 + 2s, 0);
  CHECK(r.find("7", t0 + 2s)->ttl_seconds == 0);
  CHECK_FALSE(r.find("7", t0 + 2051ms));
  // Readings that no longer serve are swept as the map grows.
  for (int i = 0; i < 200; ++i)
    r.note(std::to_string(100 + i), t0 + 3s, 15);
  for (int i = 0; i < 200; ++i)
    r.note(std::to_string(1000 + i), t0 + 60s, 15);
  CHECK(r.size() <= 264);
}

TEST_CASE("ttl_readings: a read marked in flight lasts until its own end, a later mark replaces it; "
          "marks survive the sweep for a minute") {
  using tp = sim_etcd::time_point;
  ttl_readings<tp> r;
  tp t0 = tp{} + 1h;
  // When the mark of `id` began, from its age long after every mark.
  auto read_begun = [&](const std::string& id) -> std::optional<tp> {
    auto late = t0 + 1h;
    auto s = r.status(id, late);
    if (!s.read_begun)
      return std::nullopt;
    return late - std::chrono::duration_cast<tp::duration>(*s.read_begun);
  };
  CHECK_FALSE(read_begun("7"));
  r.begin("7", t0);   // no reading yet: the mark stands alone
  REQUIRE(read_begun("7"));
  CHECK(*read_begun("7") == t0);
  CHECK_FALSE(r.status("7", t0).latest);
  r.note("7", t0 + 10ms, 15);   // the reading comes back before the answer
  CHECK(*read_begun("7") == t0);
  r.end("7", t0);
  CHECK_FALSE(read_begun("7"));
  r.begin("7", t0 + 1s);
  r.begin("7", t0 + 2s);   // a later read's mark replaces it
  r.begin("7", t0 + 1500ms);   // never an earlier one
  r.end("7", t0 + 1s);     // the first read's end leaves the later mark
  CHECK(*read_begun("7") == t0 + 2s);
  r.end("7", t0 + 2s);
  CHECK_FALSE(read_begun("7"));
  r.begin("8", t0 + 3s);   // a read whose answer never ends its mark
  for (int i = 0; i < 200; ++i)
    r.note(std::to_string(100 + i), t0 + 30s, 15);
  CHECK(read_begun("8"));   // kept by a sweep within the minute
  for (int i = 0; i < 400; ++i)
    r.note(std::to_string(1000 + i), t0 + 90s, 15);
  CHECK_FALSE(read_begun("8"));   // dropped by one after it
  CHECK(r.size() <= 528);
}
