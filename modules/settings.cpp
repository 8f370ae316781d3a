#include "modules/settings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "leasehold/suggest.hpp"

namespace leasehold::modules {

namespace {
const nlohmann::json& empty_object() {
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}

/// Reads `text` as parse_duration does; on failure `why` says why.
std::optional<caf::timespan> read_duration(const std::string& text, std::string& why) {
  static const std::string units = "ns, us, ms, s, m or h";
  if (text == "0")
    return caf::timespan{0};
  if (text.empty())
    why = "empty; write a number and a unit (" + units + "), e.g. \"15s\"";
  else if (text.front() == '-')
    why = "negative; durations are 0 or more";
  else if (text.front() == '+')
    why = "a sign is not allowed; write e.g. \"15s\"";
  if (!why.empty())
    return std::nullopt;
  static const std::map<std::string, double> scales = {
    {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
  auto digit = [&](std::size_t i) {
    return std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.';
  };
  double total_ns = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t start = i;
    while (i < text.size() && digit(i))
      ++i;
    if (i == start) {
      why = "expected a number at \"" + text.substr(start) + "\"";
      return std::nullopt;
    }
    auto number = text.substr(start, i - start);
    if (std::count(number.begin(), number.end(), '.') > 1 || number == ".") {
      why = "malformed number \"" + number + "\"";
      return std::nullopt;
    }
    std::size_t unit_start = i;
    while (i < text.size() && !digit(i))
      ++i;
    auto unit = text.substr(unit_start, i - unit_start);
    auto scale = scales.find(unit);
    if (unit.empty())
      why = "missing unit after \"" + number + "\" (" + units + "), e.g. \"" + number + "s\"";
    else if (scale == scales.end())
      why = "unknown unit \"" + unit + "\" (" + units + ")";
    if (!why.empty())
      return std::nullopt;
    total_ns += std::stod(number) * scale->second;
  }
  if (total_ns > static_cast<double>(caf::timespan{max_duration}.count())) {
    why = "above the maximum of " + std::to_string(max_duration.count()) + "h";
    return std::nullopt;
  }
  return caf::timespan{static_cast<caf::timespan::rep>(std::llround(total_ns))};
}

} // namespace

std::string duration_error(const std::string& text) {
  std::string why;
  read_duration(text, why);
  return why;
}

std::optional<caf::timespan> parse_duration(const std::string& text) {
  std::string why;
  return read_duration(text, why);
}

settings_reader::settings_reader(const nlohmann::json& settings)
  : settings_(settings.is_null() ? empty_object() : settings) {
  if (!settings_.is_object())
    errors_.push_back("settings: must be an object");
}

const nlohmann::json* settings_reader::get(const std::string& field) {
  known_.insert(field);
  if (!settings_.is_object())
    return nullptr;
  auto i = settings_.find(field);
  return i == settings_.end() ? nullptr : &*i;
}

void settings_reader::fail(const std::string& field, const std::string& message) {
  errors_.push_back(field + ": " + message);
}

std::int64_t settings_reader::integer(const std::string& field, std::int64_t fallback,
                                      std::int64_t min, std::int64_t max) {
  auto j = get(field);
  if (j == nullptr)
    return fallback;
  // nlohmann keeps non-negative integers as unsigned: clamp before converting.
  auto big = j->is_number_unsigned()
             && j->get<std::uint64_t>() > static_cast<std::uint64_t>(max);
  auto v = j->is_number_integer() && !big ? j->get<std::int64_t>() : std::int64_t{0};
  if (!j->is_number_integer() || (!big && v < min)) {
    fail(field, "must be an integer " + (min == 1 ? std::string{"> 0"} : ">= " + std::to_string(min)));
    return fallback;
  }
  if (big || v > max) {
    fail(field, "must be at most " + std::to_string(max));
    return fallback;
  }
  return v;
}

std::int64_t settings_reader::duration_ms(const std::string& field, std::int64_t fallback,
                                          std::int64_t min_ms) {
  // "grace_ms": also "grace"; either an integer of milliseconds or a
  // duration string like the timings' ("2s", "1m30s").
  bool suffixed = field.size() > 3 && field.compare(field.size() - 3, 3, "_ms") == 0;
  auto base = suffixed ? field.substr(0, field.size() - 3) : field;
  auto* with_ms = get(field);
  auto* plain = suffixed ? get(base) : nullptr;
  if (with_ms != nullptr && plain != nullptr) {
    fail(base, "give " + base + " or " + field + ", not both");
    return fallback;
  }
  auto name = plain != nullptr ? base : field;
  auto* j = plain != nullptr ? plain : with_ms;
  if (j == nullptr)
    return fallback;
  if (j->is_string()) {
    auto text = j->get<std::string>();
    auto d = parse_duration(text);
    auto ms = d ? std::chrono::duration_cast<std::chrono::milliseconds>(*d).count() : 0;
    if (!d)
      fail(name, "invalid duration \"" + text + "\": " + duration_error(text));
    else if (ms < min_ms)
      fail(name, "must be at least " + std::to_string(min_ms) + "ms");
    return d && ms >= min_ms ? ms : fallback;
  }
  return integer(name, fallback, min_ms, max_duration_ms);   // milliseconds
}

std::optional<std::string> settings_reader::string(const std::string& field,
                                                   bool required_non_empty) {
  auto j = get(field);
  if (j != nullptr && j->is_string() && !(required_non_empty && j->get<std::string>().empty()))
    return j->get<std::string>();
  if (j != nullptr || required_non_empty)
    fail(field, required_non_empty ? "must be a non-empty string" : "must be a string");
  return std::nullopt;
}

std::vector<std::string> settings_reader::string_array(const std::string& field) {
  auto j = get(field);
  std::vector<std::string> out;
  if (j != nullptr && j->is_array() && !j->empty()) {
    for (auto& e : *j) {
      if (!e.is_string())
        break;
      out.push_back(e.get<std::string>());
    }
    if (out.size() == j->size())
      return out;
  }
  fail(field, "must be a non-empty array of strings");
  return {};
}

std::map<std::string, std::string> settings_reader::string_map(const std::string& field) {
  auto j = get(field);
  std::map<std::string, std::string> out;
  if (j == nullptr)
    return out;
  if (!j->is_object()) {
    fail(field, "must be an object of strings");
    return out;
  }
  for (auto& [key, value] : j->items()) {
    if (value.is_string())
      out.emplace(key, value.get<std::string>());
    else
      fail(field + "." + key, "must be a string");
  }
  return out;
}

std::vector<std::string> settings_reader::finish() {
  if (settings_.is_object())
    for (auto& [key, value] : settings_.items())
      if (known_.count(key) == 0)
        fail(key, "unknown field" + did_you_mean(key, {known_.begin(), known_.end()}));
  return std::move(errors_);
}

} // namespace leasehold::modules
