#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/test_support.hpp"
#include "leasehold/transports.hpp"
#include "transport/kube/kube_client.hpp"
#include "transport/kube/kube_events.hpp"

using namespace leasehold;
using namespace std::chrono_literals;
using leasehold::test::fast_config;

namespace {

const lease_key key{"default", "agent-1-lock"};

/// Sends one request and waits for the reply (or a CAF error, reported as `other`).
template <class Reply, class Handle, class... Ts>
Reply ask(caf::actor_system& sys, const Handle& t, Ts&&... xs) {
  caf::scoped_actor self{sys};
  Reply out;
  self->request(t, 5s, std::forward<Ts>(xs)...)
    .receive([&](Reply& r) { out = std::move(r); },
             [&](caf::error& e) {
               out = Reply::failure({error_kind::other, 0, "", "", sys.render(e), 0});
             });
  return out;
}

} // namespace

TEST_CASE("the HTTP lease transport actor answers every request with an api_result") {
  test::loopback_server<> server;
  server.http().Get(lease_path(key), [](const httplib::Request&, httplib::Response& res) {
    res.set_content(test::lease_body(key.name, "5", "pod-a", 1), "application/json");
  });
  server.http().Put(lease_path(key), [](const httplib::Request&, httplib::Response& res) {
    res.status = 409;
    res.set_content(test::fixture("status-conflict.json"), "application/json");
  });
  server.http().Post(leases_path(key.ns), [](const httplib::Request&, httplib::Response& res) {
    res.status = 409;
    res.set_content(test::fixture("status-alreadyexists.json"), "application/json");
  });
  server.http().Post(events_path(key.ns), [](const httplib::Request& req, httplib::Response& res) {
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  server.start();

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto transport = spawn_http_backend(sys, fast_config(server.url())).transport;
  auto down = spawn_http_backend(
    sys, fast_config("http://127.0.0.1:" + std::to_string(test::closed_port()))).transport;

  auto got = ask<lease_reply>(sys, transport, get_lease_atom::value, key);
  REQUIRE_MESSAGE(got.ok(), got.error.describe());
  CHECK(got.value->spec.holder_identity == "pod-a");

  auto l = *got.value;
  CHECK(ask<lease_reply>(sys, transport, update_lease_atom::value, l).kind() ==
        error_kind::conflict);
  CHECK(ask<lease_reply>(sys, transport, create_lease_atom::value, l).kind() ==
        error_kind::already_exists);
  CHECK(ask<lease_reply>(sys, down, get_lease_atom::value, key).kind() ==
        error_kind::connection_refused);

  caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(down, caf::exit_reason::user_shutdown);
}

TEST_CASE("Kubernetes Events go through their own transport, never the lease transport") {
  test::loopback_server<> server;
  std::vector<std::string> posted;   // the Events' reasons, as the API saw them
  std::mutex mx;
  server.http().Post(events_path(key.ns), [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> g(mx);
      posted.push_back(nlohmann::json::parse(req.body).value("reason", ""));
    }
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  server.start();

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto events = spawn_kube_event_transport(sys, fast_config(server.url()));
  auto down = spawn_kube_event_transport(
    sys, fast_config("http://127.0.0.1:" + std::to_string(test::closed_port())));
  auto lease_backend = spawn_http_backend(sys, fast_config(server.url()));

  kube_event ev;
  ev.involved = key;
  ev.reason = "LeaderElection";
  auto r = ask<event_reply>(sys, events, post_event_atom::value, ev);
  CHECK_MESSAGE(r.ok(), r.error.describe());
  auto refused = ask<event_reply>(sys, down, post_event_atom::value, ev);
  CHECK(refused.kind() == error_kind::connection_refused);
  CHECK(refused.error.path == events_path(key.ns));

  // The lease transport has no Events to answer (etcd has none): asked
  // through an untyped handle, it refuses the message instead of
  // pretending to post it.
  auto untyped = caf::actor_cast<caf::actor>(lease_backend.transport);
  auto via_lease = ask<event_reply>(sys, untyped, post_event_atom::value, ev);
  CHECK(!via_lease.ok());
  {
    std::lock_guard<std::mutex> g(mx);
    CHECK(posted == std::vector<std::string>{"LeaderElection"});
  }

  caf::anon_send_exit(events, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(down, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(lease_backend.transport, caf::exit_reason::user_shutdown);
}
