#include "cmd/leasehold-apiserver/http_replies.hpp"

namespace leasehold::apiserver {

using nlohmann::json;

void set_json(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void set_status(httplib::Response& res, int code, const std::string& message) {
  set_json(res, code, failure_status(code, reason_for(code), message));
}

void send_reply(httplib::Response& res, const reply& r) {
  res.status = r.code;
  res.set_content(r.text.empty() ? r.value().dump() : r.text, "application/json");
}

void send_reply(httplib::Response& res, const reply& r, const resource_type* table,
                const httplib::Request& req) {
  if (table == nullptr || r.code != 200)
    return send_reply(res, r);
  bool whole = req.get_param_value("includeObject") == "Object";
  const json& body = r.value();
  if (body.contains("items"))
    return set_json(res, 200, as_table(*table, body["items"], body["metadata"], whole));
  json metadata = {{"resourceVersion", body["metadata"]["resourceVersion"]}};
  set_json(res, 200, as_table(*table, json::array({body}), metadata, whole));
}

} // namespace leasehold::apiserver
