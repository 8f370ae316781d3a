// One behaviour shared by every instance of an actor class
// (actors/shared_behavior.hpp): each message is handled by the actor it was
// sent to, on CAF's test coordinator (also when one actor is resumed inline
// inside another's handler) and on the threaded scheduler.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/shared_behavior.hpp"

using namespace leasehold;

namespace {

using poke_atom = caf::atom_constant<caf::atom("poke")>;
using relay_atom = caf::atom_constant<caf::atom("relay")>;
using total_atom = caf::atom_constant<caf::atom("total")>;

using counter_actor =
  caf::typed_actor<caf::reacts_to<poke_atom, int>,
                   caf::reacts_to<relay_atom, caf::actor, int>,
                   caf::replies_to<total_atom>::with<int>>;

/// How many times a counter's behaviour was built, in this process.
std::atomic<int> built{0};

/// Counts what it is poked with; a relay pokes another counter first, then
/// counts ten times the amount itself.
class counter : public with_shared_behavior<counter, counter_actor::base> {
public:
  explicit counter(caf::actor_config& cfg) : with_shared_behavior(cfg) {}

  behavior_type make_behavior() override {
    static const behavior_type shared = [] {
      ++built;
      return behavior_type{
        [](poke_atom, int n) { current().total_ += n; },
        [](relay_atom, caf::actor& to, int n) {
          // Through the scheduler's enqueue (no sender context), which the
          // test coordinator can run inline, inside this handler.
          caf::anon_send(caf::actor_cast<counter_actor>(to), poke_atom::value, n);
          current().total_ += 10 * n;   // still this counter after a nested resume
        },
        [](total_atom) { return current().total_; },
      };
    }();
    return shared;
  }

private:
  int total_ = 0;
};

/// `c`'s total once it is `want`, or what it is after 10 s (200 reads).
int total_of(caf::scoped_actor& self, const counter_actor& c, int want) {
  int got = -1;
  for (int i = 0; i < 200 && got != want; ++i) {
    if (i > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    self->request(c, std::chrono::seconds(10), total_atom::value)
      .receive([&](int t) { got = t; }, [&](caf::error&) {});
  }
  return got;
}

} // namespace

TEST_CASE("a shared behaviour: each counter counts its own messages, also when resumed inline "
          "inside another's handler (test coordinator)") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto a = sys.spawn<counter>();
  auto b = sys.spawn<counter>();
  sched.run();
  CHECK(built == 1);   // once for both (and for every test of this process)

  caf::anon_send(a, poke_atom::value, 1);
  caf::anon_send(b, poke_atom::value, 2);
  sched.run();
  // b is resumed inline, inside a's handler, by the send in it; a's handler
  // then goes on counting for a.
  sched.inline_all_enqueues();
  caf::anon_send(a, relay_atom::value, caf::actor_cast<caf::actor>(b), 5);
  sched.after_next_enqueue(std::function<void()>{});   // no more inlining
  sched.run();
  int ta = -1, tb = -1;
  auto reader = sys.spawn([&](caf::event_based_actor* self) {
    self->request(a, caf::infinite, total_atom::value).then([&](int t) { ta = t; });
    self->request(b, caf::infinite, total_atom::value).then([&](int t) { tb = t; });
  });
  sched.run();
  CHECK(ta == 1 + 50);
  CHECK(tb == 2 + 5);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE("a shared behaviour on the threaded scheduler: 50 counters poked and relayed from "
          "every thread count their own") {
  caf::actor_system_config cfg;
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  cfg.set("scheduler.max-threads", 4);
  caf::actor_system sys{cfg};
  std::vector<counter_actor> cs;
  for (int i = 0; i < 50; ++i)
    cs.push_back(sys.spawn<counter>());
  for (int round = 0; round < 20; ++round)
    for (int i = 0; i < 50; ++i) {
      caf::anon_send(cs[i], poke_atom::value, i + 1);
      caf::anon_send(cs[i], relay_atom::value, caf::actor_cast<caf::actor>(cs[(i + 1) % 50]), 1);
    }
  caf::scoped_actor self{sys};
  for (int i = 0; i < 50; ++i) {
    CAPTURE(i);
    // Its own pokes (20 x (i + 1)), its relays (20 x 10), the relays of the
    // counter before it (20 x 1).
    int want = 20 * (i + 1) + 200 + 20;
    CHECK(total_of(self, cs[i], want) == want);
  }
  CHECK(built == 1);
  for (auto& c : cs)
    caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}
