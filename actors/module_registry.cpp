#include "leasehold/modules.hpp"

#include <set>

#include "leasehold/suggest.hpp"

namespace leasehold {

void module_registry::add(module_type t) {
  auto key = t.type;
  types_[key] = std::move(t);
}

const module_type* module_registry::find(const std::string& type) const {
  auto i = types_.find(type);
  return i == types_.end() ? nullptr : &i->second;
}

std::vector<std::string> module_registry::types() const {
  std::vector<std::string> out;
  for (auto& kv : types_)
    out.push_back(kv.first);
  return out;
}

namespace {
/// The integer `j[key]` in [min, max] into `dst` (true); absent: false; else
/// an error naming `path.key` and the bounds (false).
bool bounded_integer(const nlohmann::json& j, const std::string& path, const char* key,
                     std::int64_t min, std::int64_t max, std::int64_t& dst,
                     std::vector<std::string>& errs) {
  auto it = j.find(key);
  if (it == j.end())
    return false;
  if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
    errs.push_back(path + "." + key + ": must be an integer in [" + std::to_string(min) + ", "
                   + std::to_string(max) + "]");
    return false;
  }
  dst = it->get<std::int64_t>();
  return true;
}

/// `restart: {"max_restarts": N >= 0, "within_ms": T > 0}`, both optional
/// (defaults: restart_policy's); errors name the JSON path.
void parse_restart(const nlohmann::json& j, const std::string& path, restart_policy& out,
                   std::vector<std::string>& errs) {
  if (!j.is_object()) {
    errs.push_back(path + ": must be an object {\"max_restarts\": N, \"within_ms\": T}");
    return;
  }
  std::int64_t n = out.max_restarts;
  if (bounded_integer(j, path, "max_restarts", 0, 1000, n, errs))
    out.max_restarts = static_cast<int>(n);
  std::int64_t ms = 0;
  if (bounded_integer(j, path, "within_ms", 1, 24LL * 3600 * 1000, ms, errs))
    out.within = std::chrono::milliseconds(ms);
  static const std::vector<std::string> fields{"max_restarts", "within_ms"};
  for (auto& kv : j.items())
    if (!one_of(kv.key(), fields))
      errs.push_back(path + "." + kv.key() + ": unknown field (known: max_restarts, within_ms)"
                     + did_you_mean(kv.key(), fields));
}

/// `balance: {"group": G, "settle_ms": N}` (the plain string is the group
/// alone); every error names its field. True when valid.
bool parse_balance(const nlohmann::json& j, const std::string& path, module_spec& m,
                   std::vector<std::string>& errs) {
  auto before = errs.size();
  auto g = j.find("group");
  if (g == j.end())
    errs.push_back(path + ".group: missing (the balance group's name)");
  else if (!g->is_string())
    errs.push_back(path + ".group: must be a string");
  else
    m.balance = g->get<std::string>();
  std::int64_t ms = 0;
  if (bounded_integer(j, path, "settle_ms", 0, module_spec::max_settle_ms, ms, errs))
    m.balance_settle_ms = ms;
  static const std::vector<std::string> fields{"group", "settle_ms"};
  for (auto& kv : j.items())
    if (!one_of(kv.key(), fields))
      errs.push_back(path + "." + kv.key() + ": unknown field (known: group, settle_ms)"
                     + did_you_mean(kv.key(), fields));
  return errs.size() == before;
}

std::string known_types(const module_registry& reg) {
  std::string s;
  for (auto& t : reg.types())
    s += (s.empty() ? "" : ", ") + t;
  return s;
}

/// One module's registry checks (name, type, settings), at its JSON `path`.
void validate_module(const module_spec& m, const std::string& path, const module_registry& reg,
                     std::set<std::string>& names, std::vector<std::string>& errs) {
  if (m.name.empty())
    errs.push_back(path + ".name: must not be empty");
  else if (!names.insert(m.name).second)
    errs.push_back(path + ".name: duplicate module name \"" + m.name + "\"");
  auto* t = reg.find(m.type);
  if (t == nullptr) {
    errs.push_back(path + ".type: unknown module type \"" + m.type + "\" (known: "
                   + known_types(reg) + ")");
    return;
  }
  if (!m.settings.is_object())
    errs.push_back(path + ".settings: must be an object");
  else if (t->validate)
    for (auto& e : t->validate(m.settings))
      errs.push_back(path + ".settings." + e);
}

/// An error when the module's stop_time is not below `module_stop_timeout`
/// (the limit named in the message), e.g. "modules[0].settings.grace_ms:
/// 5000ms must be below timings.module_stop_timeout (4000ms)".
void check_stop_bound(const module_spec& m, const std::string& path, const module_registry& reg,
                      caf::timespan module_stop_timeout, std::vector<std::string>& errs) {
  auto ms = [](caf::timespan d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
  };
  auto* t = reg.find(m.type);
  if (t == nullptr || !t->stop_time || !m.settings.is_object())
    return;
  if (auto b = t->stop_time(m.settings); b && b->value >= module_stop_timeout)
    errs.push_back(path + ".settings." + b->field + ": " + ms(b->value)
                   + " must be below timings.module_stop_timeout (" + ms(module_stop_timeout)
                   + "), when the module is killed anyway");
}
} // namespace

std::vector<std::string> validate(const module_config& cfg, const module_registry& reg) {
  std::vector<std::string> errs;
  std::set<std::string> names;
  for (size_t i = 0; i < cfg.modules.size(); ++i)
    validate_module(cfg.modules[i], "modules[" + std::to_string(i) + "]", reg, names, errs);
  return errs;
}

std::vector<std::string> check_leases(const module_config& cfg, const std::string& lease_name) {
  std::vector<std::string> errs;
  for (size_t i = 0; i < cfg.modules.size(); ++i)
    if (auto& l = cfg.modules[i].lease; !l.empty() && l != lease_name)
      errs.push_back("modules[" + std::to_string(i) + "].lease: \"" + l
                     + "\" is not this runner's lease \"" + lease_name
                     + "\" (one runner per lease: give the module to its lease's runner)");
  return errs;
}

std::vector<std::string> parse_modules(const nlohmann::json& modules, const module_registry& reg,
                                       module_config& out,
                                       std::optional<caf::timespan> module_stop_timeout) {
  std::vector<std::string> errs;
  std::vector<std::pair<std::string, module_spec>> seen;   // every object entry, by JSON path
  out.modules.clear();
  if (!modules.is_array()) {
    errs.push_back("modules: must be an array");
    return errs;
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    auto& j = modules[i];
    auto path = "modules[" + std::to_string(i) + "]";
    if (!j.is_object()) {
      errs.push_back(path + ": must be an object");
      continue;
    }
    module_spec m;
    bool ok = true;
    auto str = [&](const char* key, std::string& dst, bool required) {
      auto it = j.find(key);
      if (it == j.end()) {
        if (required) { errs.push_back(path + "." + key + ": missing"); ok = false; }
      } else if (!it->is_string()) {
        errs.push_back(path + "." + key + ": must be a string"); ok = false;
      } else {
        dst = it->get<std::string>();
      }
    };
    auto boolean = [&](const char* key, bool& dst) {
      auto it = j.find(key);
      if (it == j.end())
        return;
      if (!it->is_boolean()) {
        errs.push_back(path + "." + key + ": must be true or false" + quoted_boolean(*it));
        ok = false;
      }
      else dst = it->get<bool>();
    };
    str("type", m.type, true);
    m.name = m.type;
    str("name", m.name, false);
    auto* t = reg.find(m.type);
    m.leader_only = t != nullptr ? t->default_leader_only : true;
    boolean("leader_only", m.leader_only);
    boolean("enabled", m.enabled);
    str("lease", m.lease, false);
    if (auto it = j.find("balance"); it != j.end() && it->is_object()) {
      ok = parse_balance(*it, path + ".balance", m, errs) && ok;
    } else if (it != j.end() && !it->is_string()) {
      errs.push_back(path + ".balance: must be a group name or an object {\"group\": G, "
                            "\"settle_ms\": N}");
      ok = false;
    } else {
      str("balance", m.balance, false);
    }
    if (auto it = j.find("settings"); it != j.end())
      m.settings = *it;
    if (auto it = j.find("restart"); it != j.end()) {
      auto before = errs.size();
      restart_policy p;
      parse_restart(*it, path + ".restart", p, errs);
      if (errs.size() == before)
        m.restart = p;
      else
        ok = false;
    }
    static const std::vector<std::string> fields{"type",     "name",    "leader_only", "enabled",
                                                 "settings", "restart", "lease",       "balance"};
    for (auto& kv : j.items())
      if (!one_of(kv.key(), fields))
        errs.push_back(path + "." + kv.key() + ": unknown field" + did_you_mean(kv.key(), fields));
    for (auto* key : {"lease", "balance"})
      if (j.contains(key) && !m.leader_only)
        errs.push_back(path + "." + key + ": only a leader-only module runs under a lease of "
                       "its own (leader_only is false)");
    if (auto it = j.find("type"); it != j.end() && it->is_string())
      seen.emplace_back(path, m);   // (a missing type is one error, not two)
    if (ok)
      out.modules.push_back(std::move(m));
  }
  // Every stage for every entry, so one run reports every error: a bad
  // entry's shape does not hide another's settings or stop bound.
  std::set<std::string> names;
  for (auto& [path, m] : seen) {
    auto before = errs.size();
    validate_module(m, path, reg, names, errs);
    if (module_stop_timeout && errs.size() == before)
      check_stop_bound(m, path, reg, *module_stop_timeout, errs);
  }
  return errs;
}

} // namespace leasehold
