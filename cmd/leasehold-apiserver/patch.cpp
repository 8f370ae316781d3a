#include "cmd/leasehold-apiserver/patch.hpp"

#include "cmd/leasehold-apiserver/resources.hpp"

namespace leasehold::apiserver {

using nlohmann::json;

std::optional<reply> apply_patch(const std::string& content_type, const json& patch, json& object) {
  auto type = content_type.substr(0, content_type.find(';'));
  if (type == "application/json-patch+json") {
    if (!patch.is_array())
      return reply{400, failure_status(400, "BadRequest", "json patch: the body must be a JSON array of operations")};
    try {
      object = object.patch(patch);
    } catch (const json::exception& e) {
      return reply{422, failure_status(422, "Invalid", std::string("json patch: ") + e.what())};
    }
    return std::nullopt;
  }
  // Strategic merge patch on these types has merge-patch semantics (their
  // lists have no merge keys: a list in the patch replaces the stored one).
  if (type == "application/merge-patch+json" || type == "application/strategic-merge-patch+json") {
    if (!patch.is_object())
      return reply{400, failure_status(400, "BadRequest", "merge patch: the body must be a JSON object")};
    object.merge_patch(patch);
    return std::nullopt;
  }
  return reply{415, failure_status(415, "UnsupportedMediaType",
                                   "the body of the request was in an unknown format - accepted media "
                                   "types include: application/json-patch+json, "
                                   "application/merge-patch+json, application/strategic-merge-patch+json")};
}

} // namespace leasehold::apiserver
