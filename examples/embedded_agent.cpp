// Embedding leasehold in a program that has its own caf::actor_system.
//
//   embedded-agent --server http://127.0.0.1:PORT --identity me [--seconds N]
//
// It registers its own leader-only module ("greeter": prints a line per
// second while this replica leads, with the fencing term), subscribes to
// leadership changes, prints the runner's state, and shuts down gracefully
// (modules stopped, lease released) on SIGTERM or SIGINT, or after N seconds
// (0: only on a signal). It keeps the rules of
// docs/embedding.md: the greeter checks its fence right before each side
// effect (its line), and the program ends the transport it spawned only
// after the runner confirmed its shutdown.
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

#include <caf/all.hpp>

#include "leasehold/runtime.hpp"

using namespace std::chrono_literals;

namespace {

using greet_atom = caf::atom_constant<caf::atom("greet")>;

/// Prints one whole line. Actors run on several scheduler threads: pieces
/// streamed to std::cout from two of them interleave within a line, so each
/// line is built first and written in one locked call.
template <class... Parts>
void say(const Parts&... parts) {
  static std::mutex mx;
  std::ostringstream line;
  (line << ... << parts) << '\n';
  std::lock_guard<std::mutex> g(mx);
  std::fputs(line.str().c_str(), stdout);
  std::fflush(stdout);
}

/// The application's own leader-only work: an ordinary CAF actor.
caf::behavior greeter(caf::event_based_actor* self, leasehold::module_context ctx) {
  say("greeter started: term ", ctx.fence.term, " holder ", ctx.fence.identity);
  self->send(self, greet_atom::value, 1);
  self->attach_functor([name = ctx.name] { say(name, " stopped"); });
  return {
    [=](greet_atom, int n) {
      // Leader-only work checks the fence right before its side effect: once
      // a renew deadline passed or the process was paused, the term may be
      // another replica's, and the line is not written.
      if (ctx.fence.valid(self->clock().now()))
        say("hello ", n, " from the leader (term ", ctx.fence.term, ")");
      else
        say("greeting ", n, " skipped: the fence of term ", ctx.fence.term, " is no longer valid");
      self->delayed_send(self, 1s, greet_atom::value, n + 1);
    },
    [=](leasehold::module_settings& s) {
      say("greeter settings now ", s.settings.dump());
    },
  };
}

/// Prints every leadership change the runner announces.
caf::behavior watcher(caf::event_based_actor*) {
  return {
    [](const leasehold::leadership_changed& c) {
      say(c.leading ? "became leader" : "not leading", " (holder \"", c.holder, "\", term ", c.term,
          c.reason.empty() ? "" : ", " + c.reason, ")");
    },
  };
}

} // namespace

int main(int argc, char** argv) {
  std::string server, identity = "embedded", ns = "default", lease_name = "embedded-example";
  int seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--server") server = v;
    else if (k == "--identity") identity = v;
    else if (k == "--namespace") ns = v;
    else if (k == "--lease-name") lease_name = v;
    else if (k == "--seconds") seconds = std::stoi(v);
    else { std::cerr << "unknown option " << k << "\n"; return 2; }
  }
  if (server.empty()) {
    std::cerr << "usage: embedded-agent --server URL [--identity ID] [--seconds N]\n";
    return 2;
  }

  // SIGTERM (a container's stop, systemd) and SIGINT end the program as N
  // seconds do: release the lease, then exit. Blocked before any thread
  // starts, so that every CAF thread inherits the mask and main alone
  // takes them, with sigtimedwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  // 1. The module types this program brings.
  auto registry = std::make_shared<leasehold::module_registry>();
  registry->add({"greeter", /*default_leader_only*/ true,
                 [](caf::actor_system& s, const leasehold::module_context& ctx) {
                   return s.spawn(greeter, ctx);
                 },
                 nullptr});

  // 2. The runner, with an HTTP transport to the API server.
  leasehold::runner_options o;
  o.identity = identity;
  o.lease = {ns, lease_name};
  o.timings.lease_duration = 2s;
  o.timings.renew_deadline = 1500ms;
  o.timings.retry_period = 300ms;
  o.timings.module_stop_timeout = 400ms;
  leasehold::connection_config conn;
  conn.server = server;
  conn.identity = identity;
  o.backend = leasehold::spawn_http_backend(sys, leasehold::bounded_by(conn, o.timings));
  o.registry = registry;
  leasehold::module_spec greet;
  greet.name = "greeter";
  greet.type = "greeter";
  o.modules.modules = {greet};
  auto spawned = leasehold::spawn_runner(sys, o);
  if (!spawned.errors.empty()) {
    for (auto& e : spawned.errors)
      std::cerr << "error: " << e << "\n";
    return 1;
  }
  auto runner = spawned.runner;

  // 3. Leadership changes as messages to one of our actors.
  auto w = sys.spawn(watcher);
  leasehold::subscribe(sys, runner, w);

  timespec wait{seconds > 0 ? seconds : 365 * 24 * 3600, 0};
  int sig = sigtimedwait(&stop_signals, nullptr, &wait);
  if (sig > 0)
    say(sig == SIGTERM ? "SIGTERM" : "SIGINT", ": stopping");
  if (auto st = leasehold::status(sys, runner))
    say("state ", leasehold::to_string(st->state), " holder \"", st->holder, "\" term ", st->term);

  // 4. Graceful stop: the greeter stops first, then the lease is released.
  bool ok = leasehold::shutdown(sys, runner, 5s);
  say(ok ? "released" : "shutdown timed out");
  // The transport is this program's actor, not the runner's: it must be
  // ended, and only now, after `shutdown` answered (the release went through
  // it). A transport left running is a detached actor the actor_system's
  // destructor waits for at the end of main, for ever.
  caf::anon_send_exit(o.backend.transport, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  return ok ? 0 : 1;
}
