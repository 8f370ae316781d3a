#include "actors/observer.hpp"

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
    case event_type::config_applied: return "config_applied";
    case event_type::config_rejected: return "config_rejected";
    case event_type::state_changed: return "state_changed";
    case event_type::module_output: return "module_output";
    case event_type::module_unconfirmed: return "module_unconfirmed";
    case event_type::fatal: return "fatal";
    case event_type::watch_changed: return "watch_changed";
    case event_type::identity_conflict: return "identity_conflict";
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

} // namespace leasehold
