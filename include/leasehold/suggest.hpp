// What a config error adds for a person: the known name closest to an
// unknown one, and why a quoted "true"/"false" is not a boolean.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace leasehold {

/// Edit distance (insert, delete, replace), one row at a time.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      diag = std::exchange(row[j], std::min({row[j] + 1, row[j - 1] + 1,
                                             diag + (a[i - 1] == b[j - 1] ? 0 : 1)}));
  }
  return row[b.size()];
}

inline bool one_of(const std::string& name, const std::vector<std::string>& known) {
  return std::find(known.begin(), known.end(), name) != known.end();
}

/// " (did you mean \"lease_name\"?)" for the closest of `known` within a
/// third of the name's length (at least 1, at most 3 edits), or "".
inline std::string did_you_mean(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  auto limit = std::min<std::size_t>(3, std::max<std::size_t>(1, name.size() / 3));
  auto best_d = limit + 1;
  for (auto& k : known)
    if (auto dist = edit_distance(name, k); dist < best_d) {
      best_d = dist;
      best = k;
    }
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

/// For a value that must be a boolean: why a quoted "true" or "false" is
/// not one ("" for any other value).
inline std::string quoted_boolean(const nlohmann::json& v) {
  auto s = v.is_string() ? v.get<std::string>() : "";
  return s != "true" && s != "false"
           ? ""
           : ": \"" + s + "\" was read as a string (quoted); write " + s + " without quotes";
}

} // namespace leasehold
