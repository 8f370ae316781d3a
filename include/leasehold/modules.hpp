// Module types (factories), what a module actor is started with, and the
// configuration that enables modules.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "leasehold/events.hpp"
#include "leasehold/messages.hpp"

namespace leasehold {

/// What a module actor is started with.
struct module_context {
  std::string name;                 // instance name (unique in a config)
  std::string type;                 // registry type
  bool leader_only = false;
  nlohmann::json settings;          // validated settings
  fencing_token fence;              // leader-only modules: this term's token
  leadership_publisher runner;      // the supervising runner (to follow leadership)
  std::string identity;             // this replica
  event_sink events;                // report lines (event_type::module_output); may be empty
};

/// Spawns the module actor. It stops on an exit message (default handler or
/// its own exit handler, which must quit within module_stop_timeout) and
/// receives `module_settings` when its settings change.
using module_factory = std::function<caf::actor(caf::actor_system&, const module_context&)>;
/// Returns error messages for bad settings, each starting with the field path
/// relative to settings (e.g. "interval_ms: must be > 0"); empty when valid.
using module_validator = std::function<std::vector<std::string>(const nlohmann::json& settings)>;

/// A settings field that bounds how long the module takes to stop (exec's
/// grace_ms): it must stay below module_stop_timeout, when the supervisor
/// kills the module anyway, so the setting is never cut short silently.
struct stop_bound {
  std::string field;                // settings field, e.g. "grace_ms"
  caf::timespan value{0};
};
using stop_bound_reader = std::function<std::optional<stop_bound>(const nlohmann::json& settings)>;

struct module_type {
  std::string type;
  bool default_leader_only = true;
  module_factory factory;
  module_validator validate;        // optional
  stop_bound_reader stop_time = nullptr;   // optional (valid settings only)
};

class module_registry {
public:
  void add(module_type t);
  const module_type* find(const std::string& type) const;
  std::vector<std::string> types() const;

private:
  std::map<std::string, module_type> types_;
};

/// A module's restart intensity, as OTP's supervisor: a module that crashes
/// more than `max_restarts` times within `within` is not restarted again
/// (`failed`); a leader-only one then makes its replica hand over leadership.
struct restart_policy {
  int max_restarts = 3;
  caf::timespan within = std::chrono::seconds(30);
  bool operator==(const restart_policy& o) const {
    return max_restarts == o.max_restarts && within == o.within;
  }
  bool operator!=(const restart_policy& o) const { return !(*this == o); }
};

/// One configured module instance.
struct module_spec {
  std::string name;
  std::string type;
  bool leader_only = true;
  bool enabled = true;
  nlohmann::json settings = nlohmann::json::object();
  /// `restart: {max_restarts, within_ms}`; unset: the runner's default
  /// (runner_options::supervision).
  std::optional<restart_policy> restart;
  /// Placement, read by `leasehold run` (a runner ignores these): the lease
  /// this module runs under ("": the agent's; check_leases) and the balance
  /// group its lease is spread over ("": none; docs/balance.md).
  std::string lease;
  std::string balance;
  /// `balance: {"group": G, "settle_ms": N}`: the group's settle time (unset:
  /// 1 s), the same in every module of a group that sets it.
  std::optional<std::int64_t> balance_settle_ms;
  static constexpr std::int64_t max_settle_ms = 600000;
  bool operator==(const module_spec& o) const {
    return name == o.name && type == o.type && leader_only == o.leader_only
           && enabled == o.enabled && settings == o.settings && restart == o.restart
           && lease == o.lease && balance == o.balance
           && balance_settle_ms == o.balance_settle_ms;
  }
};

struct module_config {
  std::vector<module_spec> modules;
};

/// Checks a whole config against the registry: unknown types, duplicate or
/// empty names, module settings errors. Each error names its path, e.g.
/// `modules[1].type: unknown module type "tickr" (known: exec, ticker)`.
std::vector<std::string> validate(const module_config& cfg, const module_registry& reg);

/// Errors for every module that names a lease other than `lease_name` (a
/// runner runs the modules of its own lease: one runner per lease), e.g.
/// `modules[2].lease: "reports" is not this runner's lease "main"`.
std::vector<std::string> check_leases(const module_config& cfg, const std::string& lease_name);

/// Parses the "modules" array of a JSON config (shape in README). Every entry
/// goes through every check, so one call reports all errors, each naming its path.
std::vector<std::string> parse_modules(const nlohmann::json& modules, const module_registry& reg,
                                       module_config& out,
                                       std::optional<caf::timespan> module_stop_timeout = {});

struct config_result {
  bool accepted = false;
  std::vector<std::string> errors;
};

} // namespace leasehold

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::module_config)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(leasehold::config_result)
