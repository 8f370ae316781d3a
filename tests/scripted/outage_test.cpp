// Scripted scenarios: API outages, stubborn modules, the original
// agent's stop/restart bug, disabling and re-enabling, crashes.
#include <doctest/doctest.h>

#include "leasehold/events.hpp"
#include "sim_world.hpp"
#include "lease/backoff.hpp"

using namespace leasehold;
using namespace leasehold::test;
using namespace std::chrono_literals;

namespace {

bool leads(sim_world& w, std::size_t i) {
  return w.tracker().alive(w.rep(i).identity) > 0;
}


} // namespace

TEST_CASE("API unreachable for 150 s while leading: modules stop in time, leader again after") {
  world_options o;
  o.modules = probes({"work", "report"}, {{"value", 1}});
  sim_world w(o);
  auto& t = o.timings;

  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  CHECK(w.status(0).state == runner_state::leader);
  CHECK(w.api().peek(o.lease)->spec.holder_identity == "replica-0");
  w.run_for(30s);   // a few renewals

  auto fence = w.tracker().last("replica-0", "work")->fence;
  CHECK(fence.valid(w.now()));
  w.api().set_fault(sim_fault::down);
  auto outage = w.now();
  auto renewed_at = w.last_renew(0);
  REQUIRE(w.run_until([&] { return !leads(w, 0); }, 60s));
  auto* work = w.tracker().last("replica-0", "work");
  REQUIRE(work->stopped);
  // The fence expired at the renew deadline, even before the module was stopped.
  CHECK_FALSE(fence.valid(w.now()));
  CHECK(fence.valid_until->load() == 0);
  // Stopped before any other replica could consider the lease expired.
  CHECK(*work->stopped < renewed_at + t.lease_duration);
  CHECK(*work->stopped >= renewed_at + t.renew_deadline);
  CHECK(w.rep(0).count(event_type::term_lost) == 1);

  // The config changes while the API is away: the next term must use it.
  auto latest = probes({"work", "report"}, {{"value", 2}});
  CHECK(w.configure(0, latest).accepted);

  auto requests_before = w.api().requests().size();
  w.run_until([&] { return w.now() >= outage + 150s; }, 151s);
  CHECK_FALSE(leads(w, 0));
  // The elector keeps competing through the outage at a bounded rate.
  auto during = w.api().requests().size() - requests_before;
  CHECK(during > 30);
  CHECK(during < 2 * 150 / 2 + 10);
  // No log storm: one api_error per change of error kind.
  CHECK(w.rep(0).count(event_type::api_error) <= 2);

  w.api().clear_faults();
  auto back = w.now();
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 60s));
  auto bound = std::chrono::duration_cast<caf::timespan>(t.retry_period * (1 + jitter_factor)) + backoff(
    t.backoff_min, t.backoff_max, t.backoff_jitter).cap();
  CHECK(w.now() - back <= bound);
  CHECK(w.tracker().last("replica-0", "work")->settings["value"] == 2);
  CHECK(w.tracker().last("replica-0", "report")->settings["value"] == 2);
  CHECK(w.api().peek(o.lease)->spec.holder_identity == "replica-0");
  CHECK(w.rep(0).count(event_type::api_recovered) >= 1);
}

TEST_CASE("etcd: a request the store never answers is named by its key, never a Kubernetes path") {
  // The elector names a request that timed out itself; it once named the
  // Kubernetes Lease path whatever the backend. Now the backend's traits name it.
  world_options o;
  o.etcd = true;
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 60s));
  w.store().set_fault(sim_fault::hang);
  REQUIRE(w.run_until([&] { return w.rep(0).count(event_type::api_request_failed) >= 2; }, 60s));
  int timeouts = 0;
  for (auto& ev : w.rep(0).events) {
    if (ev.type != event_type::api_request_failed)
      continue;
    CAPTURE(ev.error.describe());
    CHECK(ev.error.kind == error_kind::timeout);
    CHECK(ev.error.path.find("/apis/") == std::string::npos);
    CHECK(ev.error.path == w.store().path_of(ev.error.verb, o.lease));
    ++timeouts;
  }
  CHECK(timeouts >= 2);
}

TEST_CASE("a module that ignores its stop message is killed at module_stop_timeout") {
  world_options o;
  o.modules = probes({"stubborn"}, {{"ignore_stop", true}});
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));

  w.api().set_fault(sim_fault::hang);
  REQUIRE(w.run_until([&] { return w.rep(0).count(event_type::term_lost) == 1; }, 30s));
  auto lost_at = w.now();
  REQUIRE(leads(w, 0));   // it ignored the exit message
  REQUIRE(w.run_until([&] { return !leads(w, 0); }, 30s));
  CHECK(w.now() - lost_at == o.timings.module_stop_timeout);
  CHECK(w.rep(0).count(event_type::module_killed) == 1);

  w.api().clear_faults();
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 60s));
  CHECK(w.tracker().started("replica-0", "stubborn") == 2);
}

TEST_CASE("losing and regaining leadership 100 times never wedges the runner (original bug 2)") {
  world_options o;
  o.modules = probes({"a", "b"});
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  for (int round = 1; round <= 100; ++round) {
    CAPTURE(round);
    w.run_for(o.timings.lease_duration);   // a stable term
    w.api().set_fault(round % 2 == 0 ? sim_fault::down : sim_fault::hang);
    REQUIRE(w.run_until([&] { return !leads(w, 0); }, 30s));
    CHECK(w.status(0).state != runner_state::stepping_down);
    w.api().clear_faults();
    REQUIRE(w.run_until([&] { return leads(w, 0) && w.tracker().alive("replica-0") == 2; }, 60s));
  }
  // Every term started each module once and stopped it once.
  CHECK(w.tracker().started("replica-0", "a") == 101);
  CHECK(w.tracker().started("replica-0", "b") == 101);
  CHECK(w.tracker().stopped("replica-0", "a") == 100);
  CHECK(w.tracker().stopped("replica-0", "b") == 100);
  CHECK(w.rep(0).count(event_type::term_acquired) == 101);
  CHECK(w.rep(0).count(event_type::term_lost) == 100);
  CHECK(w.rep(0).count(event_type::module_killed) == 0);
}

TEST_CASE("all leader-only modules disabled while leading: lease released, then re-acquired") {
  world_options o;
  auto cfg = probes({"work"});
  module_spec every;
  every.name = "sidecar";
  every.type = "probe";
  every.leader_only = false;
  cfg.modules.push_back(every);
  o.modules = cfg;
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  CHECK(w.tracker().alive("replica-0", false) == 1);

  auto off = cfg;
  off.modules[0].enabled = false;
  REQUIRE(w.configure(0, off).accepted);
  REQUIRE(w.run_until([&] { return w.status(0).state == runner_state::idle; }, 10s));
  CHECK_FALSE(leads(w, 0));
  auto rec = w.api().peek(o.lease);
  CHECK(rec->spec.holder_identity.empty());
  CHECK(rec->spec.lease_duration_seconds == 1);
  CHECK(w.elector(0) == nullptr);
  CHECK(w.tracker().alive("replica-0", false) == 1);   // every-replica module untouched
  // Requests on the lease itself (a bound replica's session actor also
  // releases its session and reads it once more).
  auto on_lease = [&] {
    std::size_t n = 0;
    for (auto& r : w.api().requests())
      n += r.lease == o.lease.to_string() ? 1 : 0;
    return n;
  };
  auto seen = on_lease();
  w.run_for(60s);
  CHECK(on_lease() == seen);                           // not electing any more

  REQUIRE(w.configure(0, cfg).accepted);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  CHECK(w.api().peek(o.lease)->spec.holder_identity == "replica-0");
  CHECK(w.tracker().started("replica-0", "work") == 2);
}

TEST_CASE("a config change while stepping down is what the next term runs") {
  world_options o;
  o.modules = probes({"stubborn"}, {{"ignore_stop", true}, {"value", "old"}});
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  w.api().set_fault(sim_fault::down);
  REQUIRE(w.run_until([&] { return w.status(0).state == runner_state::stepping_down; }, 30s));
  CHECK(w.configure(0, probes({"stubborn"}, {{"value", "new"}})).accepted);
  // Invalid configs are rejected whole, in any state, and the running one stays.
  auto bad = probes({"stubborn"}, {{"crash_after_ms", -1}});
  auto res = w.configure(0, bad);
  CHECK_FALSE(res.accepted);
  REQUIRE(res.errors.size() == 1);
  CHECK(res.errors[0] == "modules[0].settings.crash_after_ms: must be an integer > 0");
  w.api().clear_faults();
  REQUIRE(w.run_until([&] { return w.tracker().started("replica-0", "stubborn") == 2; }, 60s));
  CHECK(w.rep(0).count(event_type::module_killed) == 1);   // the old instance ignored its stop
  CHECK(w.tracker().last("replica-0", "stubborn")->settings["value"] == "new");
  CHECK(w.status(0).state == runner_state::leader);
}

TEST_CASE("an elector that crashes while leading counts as a lost term") {
  world_options o;
  sim_world w(o);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 10s));
  auto first = w.elector(0);
  REQUIRE(first != nullptr);
  caf::anon_send_exit(first, caf::exit_reason::kill);
  REQUIRE(w.run_until([&] { return !leads(w, 0); }, 10s));
  CHECK(w.rep(0).count(event_type::term_lost) == 1);
  REQUIRE(w.run_until([&] { return leads(w, 0); }, 60s));
  auto second = w.elector(0);
  CHECK(second != nullptr);
  CHECK(second != first);
  CHECK(w.tracker().started("replica-0", "work") == 2);
}

TEST_CASE("a crash-looping leader-only module makes the replica step down for a healthy one") {
  world_options o;
  o.replicas = 2;
  o.supervision.intensity = 3;
  o.supervision.period = 30s;
  o.modules = probes({"work"}, {{"crash_after_ms", 100}, {"crash_on", "replica-0"}});
  sim_world w(o);
  REQUIRE(w.run_until([&] { return w.leader() >= 0; }, 10s));
  if (w.leader() == 1) {   // make replica-0 the leader: stop replica-1 competing first
    w.api().set_fault(sim_fault::down, "replica-1");
    REQUIRE(w.run_until([&] { return w.leader() == 0; }, 60s));
    w.api().clear_faults();
  }
  REQUIRE(w.run_until([&] { return w.rep(0).count(event_type::module_failed) == 1; }, 60s));
  CHECK(w.rep(0).count(event_type::module_restarting) == 3);
  REQUIRE(w.run_until([&] { return w.leader() == 1; }, 60s));
  CHECK(w.tracker().alive("replica-1") == 1);
  // replica-0 released the lease rather than letting it expire.
  bool released = false;
  for (auto& r : w.api().requests())
    if (r.client == "replica-0" && r.verb == "PUT" && r.result == error_kind::none && r.holder.empty())
      released = true;
  CHECK(released);
}

TEST_CASE("graceful shutdown stops leader-only modules, then releases the lease") {
  world_options o;
  o.replicas = 2;
  sim_world w(o);
  auto l = w.await_leader(10s);
  auto other = 1 - l;
  CHECK(w.shutdown(l));
  CHECK(w.tracker().alive(w.rep(l).identity) == 0);
  CHECK(w.api().peek(o.lease)->spec.holder_identity.empty());
  auto released = w.now();
  REQUIRE(w.run_until([&] { return w.leader() == static_cast<int>(other); }, 10s));
  CHECK(w.now() - released <= std::chrono::duration_cast<caf::timespan>(o.timings.retry_period * 1.2));
}

TEST_CASE("spawn_runner refuses a lease name or namespace the API would refuse, as `run` does") {
  caf::actor_system_config cfg;
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto api = std::make_shared<sim_api>();
  auto transport = spawn_sim_transport(sys, api, "embedder");
  // No registry: spawn_runner then spawns nothing whatever the names, and
  // says what is wrong with them beside "registry: ...".
  auto lease_errors = [&](lease_key k) {
    runner_options o;
    o.identity = "embedder";
    o.lease = std::move(k);
    o.backend = sim_backend(transport, api, "embedder");
    auto r = spawn_runner(sys, o);
    CHECK_FALSE(static_cast<bool>(r.runner));
    std::string all;
    for (auto& e : r.errors)
      if (e.rfind("lease.", 0) == 0)
        all += e + "\n";
    return all;
  };
  for (const auto& bad : std::vector<std::string>{"Bad_Name", "", "-lead", "a..b", "ends.", "a/b",
                                                 std::string(254, 'a')}) {
    CAPTURE(bad);
    auto errs = lease_errors({"default", bad});
    CHECK(errs.rfind("lease.name: must ", 0) == 0);
    CHECK(errs.find("RFC 1123 subdomain") != std::string::npos);
  }
  CHECK(lease_errors({"my.ns", "fine"})
        == "lease.namespace: must be a lowercase RFC 1123 label (a-z, 0-9, '-', starting and "
           "ending with a letter or digit, at most 63 characters) (is \"my.ns\")\n");
  for (const auto& good : std::vector<std::string>{"a", "lease-1", "a.b-c", std::string(253, 'a')}) {
    CAPTURE(good);
    CHECK(lease_errors({"default", good}).empty());
  }
  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
}

TEST_CASE("a write the API refuses as invalid (422) is one error, not an outage that flaps") {
  world_options o;
  o.replicas = 2;
  sim_world w(o);
  REQUIRE(w.await_leader(30s) == 0);
  auto& r = w.rep(1);
  // replica-1's writes are refused; its reads answered. Once replica-0 has
  // released the lease, replica-1 tries to acquire it at every retry.
  auto from = r.events.size();
  auto since = [&](event_type t) {
    std::vector<runtime_event> out;
    for (auto i = from; i < r.events.size(); ++i)
      if (r.events[i].type == t)
        out.push_back(r.events[i]);
    return out;
  };
  w.api().set_fault(sim_fault::refuse_writes, "replica-1", 422);
  REQUIRE(w.shutdown(0));
  w.run_for(60s);   // some 30 attempts at the 2 s retry period
  CHECK(since(event_type::api_request_failed).size() >= 10);
  auto errors = since(event_type::api_error);
  REQUIRE(errors.size() == 1);
  CHECK(std::string(words_for(errors[0]).variant) == "refused");
  CHECK(words_for(errors[0]).severity == event_severity::error);
  // A bound replica's first refused write is its session's start.
  CHECK(errors[0].error.describe().rfind(
          o.session ? "P" : "PUT /apis/coordination.k8s.io/v1/namespaces/default/leases/agent-lock: invalid (422)", 0)
        == 0);
  CHECK(errors[0].error.describe().find("invalid (422)") != std::string::npos);
  CHECK(since(event_type::api_recovered).empty());
  // The API answered every read: the replica is not cut off from it.
  CHECK(w.status(1).api_unreachable_ms < 0);
  CHECK(w.leader() == -1);

  // Writes accepted again: it leads, and no recovery is announced for an
  // outage that never was.
  w.api().clear_faults();
  REQUIRE(w.run_until([&] { return w.leader() == 1; }, 30s));
  CHECK(since(event_type::api_error).size() == 1);
  CHECK(since(event_type::api_recovered).empty());
}
