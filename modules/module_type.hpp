// How a built-in module type is declared and how it takes new settings,
// written once for every module (ticker, exec, webhook, leader_endpoint):
// its name, whether it is leader-only by default, its settings parser
// (modules/settings.hpp: one pass that applies defaults and reports errors)
// and how it spawns with the parsed settings.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "leasehold/modules.hpp"
#include "modules/output.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

/// A module_type whose factory spawns with the parsed settings (defaults
/// applied; the registry validated them first) and whose validator reports
/// the parser's errors. `parse`: parsed<S>(const nlohmann::json&); `spawn`:
/// caf::actor(caf::actor_system&, const module_context&, S). A type with
/// more to check (exec: the command exists) or a stop bound adds it to the
/// result.
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
