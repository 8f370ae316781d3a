#include "modules/settings.hpp"

namespace leasehold::modules {

namespace {
const nlohmann::json& empty_object() {
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}
} // namespace

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
  return integer(field, fallback, min_ms, max_duration_ms);
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
        fail(key, "unknown field");
  return std::move(errors_);
}

} // namespace leasehold::modules
