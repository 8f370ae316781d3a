// leader_endpoint: the shared leader_view and the module that publishes into it.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include <caf/all.hpp>

#include "modules/builtin.hpp"
#include "modules/leader_endpoint.hpp"
#include "tests/support/wait.hpp"

using namespace leasehold;
using namespace leasehold::modules;
using namespace std::chrono_literals;

namespace {

/// Polls (bounded) until `path` serves a body satisfying `pred`.
template <class Pred>
bool eventually(const leader_view& view, const std::string& path, Pred pred) {
  return leasehold::test::eventually([&] {
    auto body = view.respond(path);
    return body && pred(nlohmann::json::parse(*body));
  }, 5s);
}

} // namespace

TEST_CASE("leader_view serves what is published at its path") {
  leader_view view;
  CHECK_FALSE(view.respond("/leader"));
  view.publish("/leader", {"a", 2, "b", false});
  auto body = view.respond("/leader");
  REQUIRE(body);
  CHECK(nlohmann::json::parse(*body)
        == nlohmann::json{{"leader", "a"}, {"term", 2}, {"self", "b"}, {"leading", false}});
  CHECK_FALSE(view.respond("/other"));
  view.withdraw("/leader");
  CHECK_FALSE(view.respond("/leader"));
}

TEST_CASE("leader_endpoint publishes leadership changes until it stops") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor runner{sys};
  auto view = std::make_shared<leader_view>();
  module_context ctx;
  ctx.name = "leader";
  ctx.type = "leader_endpoint";
  ctx.runner = caf::actor_cast<leadership_publisher>(runner);
  ctx.identity = "me";
  auto a = leader_endpoint_module(view).factory(sys, ctx);
  runner->monitor(a);
  runner->receive([&](subscribe_atom, caf::actor who) { CHECK(who == a); },
                  caf::after(5s) >> [] { FAIL("no subscribe"); });
  CHECK(eventually(*view, "/leader", [](const nlohmann::json& j) {
    return j == nlohmann::json{{"leader", ""}, {"term", -1}, {"self", "me"}, {"leading", false}};
  }));
  caf::anon_send(a, leadership_changed{false, "other", 4, "", {}});
  CHECK(eventually(*view, "/leader", [](const nlohmann::json& j) {
    return j == nlohmann::json{{"leader", "other"}, {"term", 4}, {"self", "me"}, {"leading", false}};
  }));
  caf::anon_send(a, leadership_changed{true, "me", 5, "", {}});
  CHECK(eventually(*view, "/leader", [](const nlohmann::json& j) {
    return j.value("leading", false) && j["term"] == 5 && j["leader"] == "me";
  }));
  caf::anon_send(a, module_settings{"leader", {{"path", "/who"}}});
  CHECK(eventually(*view, "/who", [](const nlohmann::json& j) { return j["term"] == 5; }));
  CHECK_FALSE(view->respond("/leader"));
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  auto unsubscribed = false;
  auto down = false;
  for (int i = 0; i < 2; ++i)
    runner->receive([&](unsubscribe_atom, caf::actor who) { unsubscribed = who == a; },
                    [&](caf::down_msg&) { down = true; }, caf::after(5s) >> [] {});
  CHECK(unsubscribed);
  CHECK(down);
  CHECK_FALSE(view->respond("/who"));
}

TEST_CASE("register_builtin_modules registers leader_endpoint only with a view") {
  module_registry without;
  register_builtin_modules(without);
  CHECK(without.types() == std::vector<std::string>{"exec", "ticker", "webhook"});
  module_registry with;
  register_builtin_modules(with, {std::make_shared<leader_view>()});
  CHECK(with.types() == std::vector<std::string>{"exec", "leader_endpoint", "ticker", "webhook"});
  CHECK(with.find("ticker")->default_leader_only);
  CHECK(with.find("exec")->default_leader_only);
  CHECK_FALSE(with.find("webhook")->default_leader_only);
  CHECK_FALSE(with.find("leader_endpoint")->default_leader_only);
}
