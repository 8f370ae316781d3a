// PATCH bodies: JSON patch (RFC 6902), merge patch (RFC 7386) and strategic
// merge patch (merge semantics for the types served here).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/object_store.hpp"

namespace leasehold::apiserver {

/// A PATCH body applied to `object` per its Content-Type; an error reply or nullopt.
std::optional<reply> apply_patch(const std::string& content_type, const nlohmann::json& patch,
                                 nlohmann::json& object);

} // namespace leasehold::apiserver
