#include "cmd/leasehold-apiserver/selectors.hpp"

#include <algorithm>

namespace leasehold::apiserver {

using nlohmann::json;

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// Splits at commas outside parentheses.
std::vector<std::string> split_terms(const std::string& s) {
  std::vector<std::string> terms;
  std::string current;
  int depth = 0;
  for (char c : s) {
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    if (c == ',' && depth == 0) {
      terms.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  terms.push_back(trim(current));
  return terms;
}

/// The field labels a fieldSelector may name (an Event's as `kubectl describe
/// lease` sends them), each with the JSON path it reads.
const std::vector<std::pair<std::string, std::vector<std::string>>>& field_labels() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> labels{
    {"metadata.name", {"metadata", "name"}},
    {"metadata.namespace", {"metadata", "namespace"}},
    {"involvedObject.kind", {"involvedObject", "kind"}},
    {"involvedObject.namespace", {"involvedObject", "namespace"}},
    {"involvedObject.name", {"involvedObject", "name"}},
    {"involvedObject.uid", {"involvedObject", "uid"}},
    {"involvedObject.apiVersion", {"involvedObject", "apiVersion"}},
    {"involvedObject.resourceVersion", {"involvedObject", "resourceVersion"}},
    {"involvedObject.fieldPath", {"involvedObject", "fieldPath"}},
    {"reason", {"reason"}},
    {"reportingComponent", {"reportingComponent"}},
    {"source", {"source", "component"}},
    {"type", {"type"}},
  };
  return labels;
}

const std::vector<std::string>* field_path(const std::string& key) {
  for (auto& [k, path] : field_labels())
    if (k == key)
      return &path;
  return nullptr;
}

/// A field's value as the API compares it: a missing field is "".
std::string field_value(const json& object, const std::vector<std::string>& path) {
  const json* at = &object;
  for (auto& p : path) {
    if (!at->is_object())
      return "";
    auto it = at->find(p);
    if (it == at->end())
      return "";
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : "";
}

std::string supported_fields() {
  std::string out;
  for (auto& [k, path] : field_labels())
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

} // namespace

bool object_filter::requirement::holds(const std::optional<std::string>& value) const {
  bool listed = value && std::find(values.begin(), values.end(), *value) != values.end();
  switch (how) {
    case op::equals:
    case op::in: return listed;
    case op::not_equals:
    case op::not_in: return !listed;
    case op::exists: return value.has_value();
    case op::not_exists: return !value.has_value();
  }
  return false;
}

std::string object_filter::parse(const std::string& ns, const std::string& label_selector,
                                 const std::string& field_selector) {
  ns_ = ns;
  labels_.clear();
  fields_.clear();
  if (!trim(label_selector).empty()) {
    for (const auto& term : split_terms(label_selector)) {
      std::string error = "labelSelector: cannot parse \"" + term + "\"";
      if (term.empty())
        return error;
      requirement r;
      auto space = term.find(' ');
      std::size_t eq = term.find_first_of("!=");
      if (term[0] == '!') {
        r.key = trim(term.substr(1));
        r.how = op::not_exists;
      } else if (eq != std::string::npos && (space == std::string::npos || eq < space)) {
        r.key = trim(term.substr(0, eq));
        bool negated = term[eq] == '!';
        if (negated && term.compare(eq, 2, "!=") != 0)
          return error;
        std::size_t value_at = eq + (negated || term.compare(eq, 2, "==") == 0 ? 2 : 1);
        r.how = negated ? op::not_equals : op::equals;
        r.values = {trim(term.substr(value_at))};
      } else if (space != std::string::npos) {
        r.key = term.substr(0, space);
        std::string rest = trim(term.substr(space));
        bool notin = rest.rfind("notin", 0) == 0;
        if (!notin && rest.rfind("in", 0) != 0)
          return error;
        rest = trim(rest.substr(notin ? 5 : 2));
        if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')')
          return error;
        for (auto& v : split_terms(rest.substr(1, rest.size() - 2)))
          r.values.push_back(v);
        r.how = notin ? op::not_in : op::in;
      } else {
        r.key = term;
        r.how = op::exists;
      }
      if (r.key.empty() || r.key.find_first_of(" ()=!") != std::string::npos)
        return error;
      labels_.push_back(std::move(r));
    }
  }
  if (!trim(field_selector).empty()) {
    for (const auto& term : split_terms(field_selector)) {
      auto eq = term.find_first_of("!=");
      if (eq == std::string::npos)
        return "fieldSelector: cannot parse \"" + term + "\"";
      requirement r;
      r.key = trim(term.substr(0, eq));
      bool negated = term[eq] == '!';
      std::size_t value_at = eq + (negated || term.compare(eq, 2, "==") == 0 ? 2 : 1);
      r.how = negated ? op::not_equals : op::equals;
      r.values = {trim(term.substr(value_at))};
      if (field_path(r.key) == nullptr)
        return "fieldSelector: field label not supported: " + r.key + " (supported: "
               + supported_fields() + ")";
      fields_.push_back(std::move(r));
    }
  }
  return "";
}

bool object_filter::matches(const json& object) const {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object())
    return false;
  // Looked up in place: every event is matched for every watcher, twice
  // for a MODIFIED one (its object and the one before).
  if (!ns_.empty()) {
    auto ns = md->find("namespace");
    if (ns == md->end() || !ns->is_string() || ns->get_ref<const std::string&>() != ns_)
      return false;
  }
  for (auto& r : fields_)
    if (!r.holds(field_value(object, *field_path(r.key))))
      return false;
  if (labels_.empty())
    return true;
  auto labels = md->find("labels");
  bool any = labels != md->end() && labels->is_object();
  for (auto& r : labels_) {
    std::optional<std::string> v;
    if (any)
      if (auto it = labels->find(r.key); it != labels->end() && it->is_string())
        v = it->get<std::string>();
    if (!r.holds(v))
      return false;
  }
  return true;
}

} // namespace leasehold::apiserver
