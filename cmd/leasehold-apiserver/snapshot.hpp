// The snapshot file of leasehold-apiserver (--snapshot): every stored object
// and the resourceVersion counter as one JSON document.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/object_store.hpp"

namespace leasehold::apiserver {

/// Restores `store` from `file`; an absent file leaves it empty. "" or the error.
std::string load_snapshot(const std::string& file, object_store& store);

/// Writes tmp + fsync + rename, so a reader sees the old or the new file; "" or the error.
std::string write_snapshot(const std::string& file, const nlohmann::json& snap);

} // namespace leasehold::apiserver
