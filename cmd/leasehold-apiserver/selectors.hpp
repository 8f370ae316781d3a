// Label and field selectors, as list and watch requests carry them
// (?labelSelector=a=b,c!=d,e in (x,y),f,!g and ?fieldSelector=metadata.name=n,
// involvedObject.name==x,type!=Normal: `=`, `==`, `!=`, comma-joined).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace leasehold::apiserver {

/// The objects a list or watch request asks for: one namespace (or all),
/// a label selector and a field selector. Empty parts match everything.
class object_filter {
public:
  /// Parses both selectors; returns an error text naming the bad part, or "".
  std::string parse(const std::string& ns, const std::string& label_selector,
                    const std::string& field_selector);
  bool matches(const nlohmann::json& object) const;

private:
  enum class op { equals, not_equals, in, not_in, exists, not_exists };
  struct requirement {
    std::string key;
    op how = op::equals;
    std::vector<std::string> values;
    bool holds(const std::optional<std::string>& value) const;
  };
  std::string ns_;
  std::vector<requirement> labels_;
  std::vector<requirement> fields_;   // metadata.name/namespace, an Event's involvedObject.*, ...
};

} // namespace leasehold::apiserver
