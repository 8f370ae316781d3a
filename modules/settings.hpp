// Reading and validating a module's JSON settings in one pass: the same code
// applies defaults for the factory and reports errors for the validator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/timespan.hpp>
#include <nlohmann/json.hpp>

namespace leasehold::modules {

/// Parses Go-style durations: "15s", "500ms", "1m30s", "1.5s", "0".
/// Units: ns, us, ms, s, m, h. nullopt on error.
std::optional<caf::timespan> parse_duration(const std::string& text);
/// The largest duration any setting accepts (a lease of a day is already
/// far beyond any use; larger values are typos).
constexpr std::chrono::hours max_duration{24};
/// Why parse_duration rejects `text`, with the rule or bound broken ("" when
/// it parses): "negative; durations are 0 or more", "missing unit after
/// \"2\" (ns, us, ms, s, m or h), e.g. \"2s\"", "above the maximum of ...".
std::string duration_error(const std::string& text);
/// The same in milliseconds, so that any value converts to a caf::timespan
/// without overflow.
constexpr std::int64_t max_duration_ms = 24 * 3600 * 1000;

class settings_reader {
public:
  /// `settings` must outlive the reader. null counts as an empty object.
  explicit settings_reader(const nlohmann::json& settings);

  /// An integer in [min, max]; `fallback` when absent.
  std::int64_t integer(const std::string& field, std::int64_t fallback, std::int64_t min,
                       std::int64_t max);
  /// A duration in milliseconds in [min_ms, max_duration_ms]. A field named
  /// "x_ms" may also be given as "x" (not both); either takes an integer of
  /// milliseconds or a duration string like the timings' ("2s", "1m30s").
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
