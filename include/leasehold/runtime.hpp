// leasehold embedding API.
//
// Actors talk to the runner through its typed handle, runner_actor
// (leasehold/runner.hpp), which lists what it takes and answers.
// Everything here and in the headers it includes is the public API; nothing
// else under the source tree is (docs/embedding.md).
//
// How a program uses it, in one screen, is shown below, before bounded_by.
#pragma once

#include <chrono>
#include <optional>

#include <caf/all.hpp>

#include "leasehold/events.hpp"
#include "leasehold/lease_transport.hpp"
#include "leasehold/messages.hpp"
#include "leasehold/modules.hpp"
#include "leasehold/runner.hpp"
#include "leasehold/timings.hpp"
#include "leasehold/transports.hpp"

namespace leasehold {

// A program that has a caf::actor_system:
//   auto reg = std::make_shared<leasehold::module_registry>();
//   reg->add({"mywork", /*leader_only*/ true, factory, validator});
//   leasehold::runner_options o;  o.identity = ...; o.lease = {"ns", "name"};
//   o.backend = leasehold::spawn_http_backend(sys, conn);  o.registry = reg;
//     (or, for etcd: leasehold::use_etcd(sys, o, etcd_cfg);)
//   o.modules.modules = {{"mywork", "mywork"}};
//   auto r = leasehold::spawn_runner(sys, o);      // r.errors if invalid
//   leasehold::subscribe(sys, r.runner, my_actor);  // gets leadership_changed
//   auto st = leasehold::status(sys, r.runner);     // runner_status
//   leasehold::apply_config(sys, r.runner, cfg);    // config_result
//   leasehold::yield_leadership(sys, r.runner, "b"); // hand over to b (yield_result)
//   leasehold::shutdown(sys, r.runner);             // stop modules, release lease
//   caf::anon_send_exit(o.backend.transport, caf::exit_reason::user_shutdown);  // then, and
//     only then, end the transport: the program's actor, not the runner's

/// Clamps the HTTP client's connect/read/write timeouts so one blocking
/// request ends within the elector's request timeout: a request the elector
/// gave up on never delays the next one in the transport's queue.
connection_config bounded_by(connection_config c, const election_timings& t);

/// Picks etcd as the lease store: o.backend = spawn_etcd_backend with its
/// HTTP timeouts bounded as above and, unless set, o.identity as the
/// identity header. Instead of setting o.backend to an HTTP backend.
void use_etcd(caf::actor_system& sys, runner_options& o, etcd_config cfg);

/// Scheduler settings for a mostly idle agent (what `leasehold run` uses;
/// an embedding program calls it only if it wants the same). Sets
/// `scheduler.policy` to `sharing` and `scheduler.max-threads` to `threads`
/// (at least 1). CAF 0.17's default, work stealing with max(cores, 4)
/// workers, keeps every idle worker polling: each wakes up 100 times a
/// second (`work-stealing.relaxed-sleep-duration`, 10 ms) even with nothing
/// to do. Work sharing is one queue behind a condition variable: idle
/// workers sleep until a message comes. It suits a few actors doing little
/// work each; a program that keeps many actors busy is better off with work
/// stealing. The leasehold actors never block (HTTP runs in detached
/// actors, which own their threads), so two workers are plenty.
void tune_for_idle(caf::actor_system_config& cfg, size_t threads = 2);

/// Blocking helpers for non-actor code (main(), tests). Never call from an
/// actor's handler.
std::optional<runner_status> status(caf::actor_system& sys, const runner_actor& runner,
                                    caf::timespan timeout = std::chrono::seconds(5));
config_result apply_config(caf::actor_system& sys, const runner_actor& runner, module_config cfg,
                           caf::timespan timeout = std::chrono::seconds(5));
void subscribe(caf::actor_system& sys, const runner_actor& runner, const caf::actor& who);
/// Hands leadership over (yield_atom): to `target`, or to any replica when
/// empty. Waits for the outcome (yield_result); nullopt when the runner did
/// not answer within `timeout` (give it module_stop_timeout +
/// release_timeout + yield_window + preferred_holder_wait at least).
std::optional<yield_result> yield_leadership(caf::actor_system& sys, const runner_actor& runner,
                                             std::string target = {},
                                             caf::timespan timeout = std::chrono::seconds(30));
/// Graceful stop: leader-only modules, then the lease release, then the rest.
/// Returns false when the runner did not confirm within `timeout`. The
/// transport in `runner_options::backend` is not ended: the caller ends it after this
/// returns (a detached actor left running holds the actor_system's destructor).
bool shutdown(caf::actor_system& sys, const runner_actor& runner,
              caf::timespan timeout = std::chrono::seconds(10));

} // namespace leasehold
