// How a built-in module type is declared and how it takes new settings,
// written once for every module.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "leasehold/modules.hpp"
#include "modules/output.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

/// `parse`: parsed<S>(const nlohmann::json&); `spawn`:
/// caf::actor(caf::actor_system&, const module_context&, S).
template <class Parse, class Spawn>
module_type make_module_type(std::string type, bool default_leader_only, Parse parse, Spawn spawn) {
  module_type t;
  t.type = std::move(type);
  t.default_leader_only = default_leader_only;
  t.factory = [parse, spawn](caf::actor_system& sys, const module_context& ctx) {
    return spawn(sys, ctx, parse(ctx.settings).value);
  };
  t.validate = [parse](const nlohmann::json& s) { return parse(s).errors; };
  return t;
}

/// A running module's new settings (module_settings), parsed: the value, or
/// nothing when they are invalid, the first error reported as a
/// "settings rejected: ..." line (the module keeps its settings).
template <class Parse>
auto accept_settings(Parse parse, const nlohmann::json& settings, const output_reporter& out)
  -> std::optional<decltype(parse(settings).value)> {
  auto p = parse(settings);
  if (!p.errors.empty()) {
    out.line("settings rejected: " + p.errors.front());
    return std::nullopt;
  }
  return std::move(p.value);
}

} // namespace leasehold::modules
