// The simulated transport's shared watch stream (sim_watch_sharing::
// per_namespace), which the simulator's multi-lease world runs on: one
// stream per namespace for every subscriber, and its own faults
// (sim_stream_fault), on both simulated stores.
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "sim_etcd.hpp"
#include "tests/support/sim_transport.hpp"

using namespace leasehold;
using namespace std::chrono_literals;

namespace {

using kind = lease_watch_event::kind;

/// One event as a subscriber saw it: "up", "down", "deleted" or the
/// record's holder ("record a").
std::string words(const lease_watch_event& ev) {
  switch (ev.what) {
    case kind::up: return "up";
    case kind::down: return "down";
    case kind::deleted: return "deleted";
    case kind::record: return "record " + (ev.record ? ev.record->spec.holder_identity : std::string("?"));
  }
  return "?";
}

struct fixture {
  explicit fixture(bool on_etcd) : etcd(on_etcd) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    if (etcd)
      store = std::make_shared<sim_etcd>([this] { return sched->clock().now(); });
    else
      store = std::make_shared<sim_api>();
    transport = spawn_sim_transport(*sys, store, "me", sim_watch_sharing::per_namespace);
  }
  ~fixture() {
    for (auto& [n, a] : subs)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    caf::anon_send_exit(transport, caf::exit_reason::kill);
    settle();
  }

  /// Subscriber `who` follows lease `name` on the one transport.
  void follow(const std::string& who, const std::string& name) {
    auto a = sys->spawn([this, who]() -> lease_watch_subscriber::behavior_type {
      return {[this, who](lease_watch_event& ev) { seen[who].push_back(words(ev)); }};
    });
    subs[who] = a;
    lease_watch_request req;
    req.lease = {"default", name};
    req.idle_timeout = 10s;
    req.subscriber = a;
    caf::anon_send(caf::actor_cast<caf::actor>(transport), watch_lease_atom::value, std::move(req));
    settle();
  }

  /// A follows lease a, B lease b; then x takes a and y takes b.
  void both_taken() {
    follow("A", "a");
    follow("B", "b");
    write("a", "x");
    write("b", "y");
  }

  /// Runs every message and every timer due within `d`.
  void settle(caf::timespan d = 0s) {
    auto until = sched->clock().now() + d;
    for (int guard = 0; guard < 10'000; ++guard) {
      sched->run();
      auto& s = sched->clock().schedule();
      if (s.empty() || s.begin()->first > until)
        break;
      sched->clock().current_time = std::max(sched->clock().current_time, s.begin()->first);
      sched->clock().trigger_timeout();
    }
    sched->clock().current_time = std::max(sched->clock().current_time, until);
  }

  /// `holder` takes lease `name`: Kubernetes updates the Lease; etcd
  /// (where another holder's key is not overwritten) deletes the key and
  /// creates it anew, as a new term does there.
  void write(const std::string& name, const std::string& holder) {
    lease l;
    l.ns = "default";
    l.name = name;
    l.spec.holder_identity = holder;
    l.spec.lease_duration_seconds = 60;
    if (auto cur = store->peek({"default", name}); cur && !etcd) {
      l.resource_version = cur->resource_version;
      l.spec.lease_transitions = cur->spec.lease_transitions + 1;
      REQUIRE(store->update(holder, l).ok());
    } else {
      if (cur)
        store->outside_delete({"default", name});
      REQUIRE(store->create(holder, l).ok());
    }
    settle();
  }

  void fault(sim_stream_fault f, caf::timespan d = 0s, int param = 0) {
    inject_stream_fault(transport, f, d, param);
    settle();
  }

  bool etcd = false;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<sim_store> store;
  lease_transport_actor transport;
  std::map<std::string, lease_watch_subscriber> subs;
  std::map<std::string, std::vector<std::string>> seen;
};

using events = std::vector<std::string>;

} // namespace

TEST_CASE("the shared stream: one per namespace, each subscriber gets its lease's events; a joiner gets the stream's health, then what changes") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    fixture f{etcd};
    f.write("a", "x");
    f.follow("A", "a");                         // opens the stream: the current state
    CHECK(f.seen["A"] == events{"up", "record x"});
    f.follow("B", "b");                         // joins the open stream
    CHECK(f.seen["B"] == events{"up"});
    f.write("b", "y");
    f.write("a", "z");
    CHECK(f.seen["A"] == (etcd ? events{"up", "record x", "deleted", "record z"}
                               : events{"up", "record x", "record z"}));
    CHECK(f.seen["B"] == events{"up", "record y"});
  }
}

TEST_CASE("the shared stream cut: every subscriber sees it down, then up, and what changed meanwhile, in order") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    fixture f{etcd};
    f.follow("A", "a");
    f.follow("B", "b");
    f.fault(sim_stream_fault::cut, 5s);
    f.write("a", "x");
    f.write("a", "y");
    CHECK(f.seen["A"] == events{"up", "down"});
    CHECK(f.seen["B"] == events{"up", "down"});
    f.settle(5s);
    CHECK(f.seen["A"] == (etcd ? events{"up", "down", "up", "record x", "deleted", "record y"}
                               : events{"up", "down", "up", "record x", "record y"}));   // gapless
    CHECK(f.seen["B"] == events{"up", "down", "up"});
  }
}

TEST_CASE("the shared stream after 410 Gone / compaction: the current state; a delete meanwhile is told on etcd, never on Kubernetes") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    fixture f{etcd};
    f.both_taken();
    f.fault(sim_stream_fault::cut, 5s);     // the stream misses the delete ...
    f.store->outside_delete({"default", "b"});
    f.fault(sim_stream_fault::gone);        // ... and its version is gone
    f.settle(5s);
    CHECK(f.seen["A"] == events{"up", "record x", "down", "up", "record x"});
    CHECK(f.seen["B"] == (etcd ? events{"up", "record y", "down", "up", "deleted"}
                               : events{"up", "record y", "down", "up"}));
  }
}

TEST_CASE("a stale replay on the shared stream delivers versions again, oldest first, to every subscriber") {
  for (bool etcd : {false, true}) {
    CAPTURE(etcd);
    fixture f{etcd};
    f.both_taken();
    f.write("a", "z");
    f.fault(sim_stream_fault::stale_replay, 0s, 2);   // two versions back
    if (etcd) {   // (the new term of "a" is two versions: a delete, a create)
      CHECK(f.seen["A"] == events{"up", "record x", "deleted", "record z", "deleted", "record z"});
      CHECK(f.seen["B"] == events{"up", "record y"});
    } else {
      CHECK(f.seen["A"] == events{"up", "record x", "record z", "record z"});
      CHECK(f.seen["B"] == events{"up", "record y", "record y"});
    }
  }
}

TEST_CASE("a delayed shared stream delivers every event late, in order; the delay ends") {
  fixture f{false};
  f.follow("A", "a");
  f.fault(sim_stream_fault::delay, 10s, 3000);
  f.write("a", "x");
  f.write("a", "y");
  f.settle(2900ms);
  CHECK(f.seen["A"] == events{"up"});
  f.settle(200ms);
  CHECK(f.seen["A"] == events{"up", "record x", "record y"});
  f.settle(10s);
  f.write("a", "z");
  CHECK(f.seen["A"] == events{"up", "record x", "record y", "record z"});
}
