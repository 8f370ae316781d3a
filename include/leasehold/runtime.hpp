// leasehold embedding API: everything here and in the headers it includes
// is the public API; nothing else under the source tree is. How a program
// uses it: docs/embedding.md, 'A runner in five steps'.
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

/// Clamps the HTTP client's connect/read/write timeouts so one blocking
/// request ends within the elector's request timeout: a request the elector
/// gave up on never delays the next one in the transport's queue.
connection_config bounded_by(connection_config c, const election_timings& t);

/// Picks etcd as the lease store: o.backend = spawn_etcd_backend with its
/// HTTP timeouts bounded as above and, unless set, o.identity as the
/// identity header. Instead of setting o.backend to an HTTP backend.
void use_etcd(caf::actor_system& sys, runner_options& o, etcd_config cfg);

/// Sets `scheduler.policy` to `sharing` and `scheduler.max-threads` to
/// `threads` (at least 1); why: docs/embedding.md, 'Scheduler'.
void tune_for_idle(caf::actor_system_config& cfg, size_t threads = 2);

/// Blocking helpers for non-actor code (main(), tests). Never call from an
/// actor's handler.
std::optional<runner_status> status(caf::actor_system& sys, const runner_actor& runner,
                                    caf::timespan timeout = std::chrono::seconds(5));
config_result apply_config(caf::actor_system& sys, const runner_actor& runner, module_config cfg,
                           caf::timespan timeout = std::chrono::seconds(5));
void subscribe(caf::actor_system& sys, const runner_actor& runner, const caf::actor& who);
/// yield_atom, waiting for the outcome; nullopt when the runner did not
/// answer within `timeout` (docs/embedding.md, 'Handing leadership over').
std::optional<yield_result> yield_leadership(caf::actor_system& sys, const runner_actor& runner,
                                             std::string target = {},
                                             caf::timespan timeout = std::chrono::seconds(30));
/// shutdown_atom; false when the runner did not confirm within `timeout`.
/// The caller then ends the transport (docs/embedding.md, step 5).
bool shutdown(caf::actor_system& sys, const runner_actor& runner,
              caf::timespan timeout = std::chrono::seconds(10));

} // namespace leasehold
