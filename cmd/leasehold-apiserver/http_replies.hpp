// Writing answers: a JSON body, a Kubernetes Status, a store reply (as a
// Table when the client asked for one).
#pragma once

#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/object_store.hpp"
#include "cmd/leasehold-apiserver/resources.hpp"

namespace leasehold::apiserver {

void set_json(httplib::Response& res, int code, const nlohmann::json& body);

/// A failure Status with the reason of `code`.
void set_status(httplib::Response& res, int code, const std::string& message);

void send_reply(httplib::Response& res, const reply& r);

/// Sends a reply; a successful object or list as a Table when `table` is set.
void send_reply(httplib::Response& res, const reply& r, const resource_type* table,
                const httplib::Request& req);

} // namespace leasehold::apiserver
