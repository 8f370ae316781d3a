// Blocking helpers of the embedding API (include/leasehold/runtime.hpp).
#include "leasehold/runtime.hpp"

#include <algorithm>

#include "leasehold/blocking_request.hpp"

namespace leasehold {

connection_config bounded_by(connection_config c, const election_timings& t) {
  auto share = std::chrono::duration_cast<std::chrono::milliseconds>(
    t.effective_request_timeout() * 0.3);
  share = std::max(share, std::chrono::milliseconds(1));
  c.connect_timeout = std::min(c.connect_timeout, share);
  c.read_timeout = std::min(c.read_timeout, share);
  c.write_timeout = std::min(c.write_timeout, share);
  return c;
}

void use_etcd(caf::actor_system& sys, runner_options& o, etcd_config cfg) {
  cfg.http = bounded_by(std::move(cfg.http), o.timings);
  if (cfg.http.identity.empty())
    cfg.http.identity = o.identity;
  o.backend = spawn_etcd_backend(sys, std::move(cfg));
}

void tune_for_idle(caf::actor_system_config& cfg, size_t threads) {
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("scheduler.max-threads", std::max(threads, size_t{1}));
}

std::optional<runner_status> status(caf::actor_system& sys, const runner_actor& runner,
                                    caf::timespan timeout) {
  return blocking_request<runner_status>(sys, runner, timeout, get_status_atom::value);
}

config_result apply_config(caf::actor_system& sys, const runner_actor& runner, module_config cfg,
                           caf::timespan timeout) {
  config_result out{false, {"runner: no reply"}};
  caf::scoped_actor self{sys};
  self->request(runner, timeout, std::move(cfg))
    .receive([&](config_result& r) { out = std::move(r); },
             [&](caf::error& e) { out.errors = {"runner: " + sys.render(e)}; });
  return out;
}

void subscribe(caf::actor_system&, const runner_actor& runner, const caf::actor& who) {
  caf::anon_send(runner, subscribe_atom::value, who);
}

std::optional<yield_result> yield_leadership(caf::actor_system& sys, const runner_actor& runner,
                                             std::string target, caf::timespan timeout) {
  return blocking_request<yield_result>(sys, runner, timeout, yield_atom::value, std::move(target));
}

bool shutdown(caf::actor_system& sys, const runner_actor& runner, caf::timespan timeout) {
  return blocking_request<bool>(sys, runner, timeout, shutdown_atom::value).value_or(false);
}

} // namespace leasehold
