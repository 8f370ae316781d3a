#include "actors/observer.hpp"

#include <mutex>

#include <caf/all.hpp>

namespace leasehold {

const char* to_string(event_type t) {
  switch (t) {
    case event_type::term_acquired: return "term_acquired";
    case event_type::term_lost: return "term_lost";
    case event_type::lease_released: return "lease_released";
    case event_type::leader_changed: return "leader_changed";
    case event_type::elector_started: return "elector_started";
    case event_type::api_error: return "api_error";
    case event_type::api_recovered: return "api_recovered";
    case event_type::renewed: return "renewed";
    case event_type::module_started: return "module_started";
    case event_type::module_stopping: return "module_stopping";
    case event_type::module_stopped: return "module_stopped";
    case event_type::module_killed: return "module_killed";
    case event_type::module_crashed: return "module_crashed";
    case event_type::module_restarting: return "module_restarting";
    case event_type::module_failed: return "module_failed";
    case event_type::leadership_handed_over: return "leadership_handed_over";
    case event_type::config_applied: return "config_applied";
    case event_type::config_rejected: return "config_rejected";
    case event_type::state_changed: return "state_changed";
    case event_type::module_output: return "module_output";
    case event_type::module_unconfirmed: return "module_unconfirmed";
    case event_type::fatal: return "fatal";
    case event_type::watch_changed: return "watch_changed";
    case event_type::identity_conflict: return "identity_conflict";
    case event_type::outside_write: return "outside_write";
    case event_type::creation_hold: return "creation_hold";
    case event_type::api_request_failed: return "api_request_failed";
  }
  return "?";
}

event_sink fan_out(std::vector<event_sink> sinks) {
  return [sinks = std::move(sinks)](const runtime_event& ev) {
    for (auto& s : sinks)
      if (s)
        s(ev);
  };
}

event_sink default_event_sink(std::FILE* out) {
  auto mx = std::make_shared<std::mutex>();
  return [out, mx](const runtime_event& ev) {
    std::string what;
    auto term = " (term " + std::to_string(ev.term) + ")";
    auto because = ev.reason.empty() ? std::string{} : ": " + ev.reason;
    switch (ev.type) {
      case event_type::term_acquired: what = "became leader" + term; break;
      case event_type::term_lost: what = "stopped leading" + term + because; break;
      case event_type::lease_released: what = "released the lease" + term; break;
      case event_type::leader_changed:
        what = ev.holder.empty() ? "the lease is free" : "leader is " + ev.holder;
        break;
      case event_type::api_error:
        if (is_lost_race(ev.error.kind))
          return;   // a lost race, not a failure
        what = "API request failed: " + ev.error.describe();
        break;
      case event_type::api_recovered: what = "API reachable again"; break;
      case event_type::module_started: what = "module " + ev.module + " started"; break;
      case event_type::module_stopped: what = "module " + ev.module + " stopped" + because; break;
      case event_type::module_killed: what = "module " + ev.module + " killed (did not stop in time)"; break;
      case event_type::module_crashed: what = "module " + ev.module + " crashed" + because; break;
      case event_type::module_failed:
        what = "module " + ev.module + " failed: over its restart intensity, not restarted";
        break;
      case event_type::leadership_handed_over:
        what = "handed leadership over: module " + ev.module + " is crash-looping";
        break;
      case event_type::config_rejected: what = "config rejected: " + ev.detail; break;
      case event_type::identity_conflict:
        what = "another process renews this replica's identity (" + ev.holder + "): stepping down";
        break;
      case event_type::fatal: what = "fatal: " + ev.reason; break;
      case event_type::outside_write: what = "lease written from outside: " + ev.reason; break;
      case event_type::creation_hold:
        what = "created the lease and holds it: term " + std::to_string(ev.term) + " starts in "
               + std::to_string(static_cast<long long>(ev.value)) + " ms (creation hold)";
        break;
      default: return;   // renewals, state changes, module output: too chatty for a default
    }
    std::lock_guard<std::mutex> g(*mx);
    std::fprintf(out, "leasehold [%s %s] %s\n", ev.identity.c_str(), ev.lease.c_str(), what.c_str());
    std::fflush(out);
  };
}

exit_description describe_exit(const caf::error& e, caf::actor_system& sys) {
  if (!e)
    return {"exited normally", {}};
  exit_description d{{}, sys.render(e)};
  if (e.category() == caf::atom("exit")) {
    switch (static_cast<caf::exit_reason>(e.code())) {
      case caf::exit_reason::normal: d.words = "exited normally"; break;
      case caf::exit_reason::user_shutdown: d.words = "stopped on request"; break;
      case caf::exit_reason::kill: d.words = "killed"; break;
      case caf::exit_reason::unhandled_exception: d.words = "threw an exception"; break;
      case caf::exit_reason::unknown: d.words = "ended for an unknown reason"; break;
      default: d.words = "ended unexpectedly"; break;
    }
    return d;
  }
  // An error the actor chose (caf::make_error(code, "text")): its own text.
  auto& ctx = e.context();
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx.match_element<std::string>(i)) {
      d.words = ctx.get_as<std::string>(i);
      return d;
    }
  d.words = "failed";
  return d;
}

} // namespace leasehold
