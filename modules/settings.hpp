// Reading and validating a module's JSON settings in one pass.
//
// Every built-in module parses its settings with a settings_reader: the same
// code applies defaults for the factory and reports errors for the validator.
// Errors start with the field path relative to settings, e.g.
// `interval_ms: must be an integer > 0`, `colour: unknown field`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace leasehold::modules {

/// Largest accepted duration setting (one day), so that any value converts to
/// a caf::timespan without overflow.
constexpr std::int64_t max_duration_ms = 24 * 3600 * 1000;

class settings_reader {
public:
  /// `settings` must outlive the reader. null counts as an empty object.
  explicit settings_reader(const nlohmann::json& settings);

  /// An integer in [min, max]; `fallback` when absent.
  std::int64_t integer(const std::string& field, std::int64_t fallback, std::int64_t min,
                       std::int64_t max);
  /// A duration in milliseconds in [min_ms, max_duration_ms].
  std::int64_t duration_ms(const std::string& field, std::int64_t fallback, std::int64_t min_ms);
  /// An optional string; `required_non_empty` makes absence or "" an error.
  std::optional<std::string> string(const std::string& field, bool required_non_empty = false);
  /// A non-empty array of strings (required).
  std::vector<std::string> string_array(const std::string& field);
  /// An optional object whose values are strings.
  std::map<std::string, std::string> string_map(const std::string& field);

  /// Adds an error for `field` (message without the path).
  void fail(const std::string& field, const std::string& message);
  /// All errors, including one per field no accessor asked for.
  std::vector<std::string> finish();

private:
  const nlohmann::json* get(const std::string& field);

  const nlohmann::json& settings_;
  std::set<std::string> known_;
  std::vector<std::string> errors_;
};

/// Parsed settings of a module type: the value (defaults applied) is
/// meaningful only when `errors` is empty.
template <class Settings>
struct parsed {
  Settings value;
  std::vector<std::string> errors;
};

} // namespace leasehold::modules
