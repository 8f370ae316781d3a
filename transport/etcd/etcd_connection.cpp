#include "transport/etcd/etcd_connection.hpp"

#include "transport/etcd/etcd_wire.hpp"
#include "transport/http/http_client.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

/// Errors after which another endpoint may answer.
bool fail_over_on(error_kind k) {
  return k == error_kind::connection_refused || k == error_kind::disconnected
         || k == error_kind::timeout
         || k == error_kind::server_error || k == error_kind::tls_error;
}

} // namespace

std::vector<std::string> validate(const etcd_config& cfg) {
  std::vector<std::string> errs;
  if (cfg.endpoints.empty())
    errs.push_back("etcd.endpoints: must list at least one endpoint");
  for (size_t i = 0; i < cfg.endpoints.size(); ++i) {
    auto& ep = cfg.endpoints[i];
    bool https = ep.rfind("https://", 0) == 0;
    if (!https && ep.rfind("http://", 0) != 0)
      errs.push_back("etcd.endpoints[" + std::to_string(i)
                     + "]: must start with http:// or https:// (is \"" + ep + "\")");
    else if (!https && !cfg.http.ca_file.empty())
      errs.push_back("etcd.endpoints[" + std::to_string(i)
                     + "]: ca_file is set but the endpoint is http://");
  }
  if (cfg.prefix.empty() || cfg.prefix.front() != '/')
    errs.push_back("etcd.prefix: must start with / (is \"" + cfg.prefix + "\")");
  if (cfg.http.client_cert_file.empty() != cfg.http.client_key_file.empty())
    errs.push_back("etcd.cert_file, etcd.key_file: must be set together");
  if (cfg.username.empty() != cfg.password.empty())
    errs.push_back("etcd.username, etcd.password: must be set together");
  return errs;
}

etcd_connection::etcd_connection(etcd_config c) : cfg(std::move(c)) {
  for (auto& ep : cfg.endpoints) {
    auto conn = cfg.http;
    conn.server = ep;
    servers.push_back(std::make_unique<http_client>(std::move(conn)));
  }
}

etcd_connection::~etcd_connection() = default;

/// One exchange with the current server: the body of a 2xx reply (text),
/// or the error (gRPC code mapped) of anything else.
api_result<std::string> etcd_connection::exchange(http_client& server, const std::string& path,
                                                  const std::string& text) {
  http_headers headers;
  if (!token.empty())
    headers.emplace_back("Authorization", token);
  auto r = server.send("POST", path, &text, headers);
  if (!r.ok())
    return api_result<std::string>::failure(r.error);
  int status = r.value->status;
  if (status >= 200 && status < 300)
    return api_result<std::string>::success(std::move(r.value->body));
  auto parsed = json::parse(r.value->body, nullptr, false);
  int code = 0;
  std::string reason = "HTTP " + std::to_string(status);
  if (parsed.is_object()) {
    if (auto c = parsed.find("code"); c != parsed.end() && c->is_number_integer())
      code = c->get<int>();
    if (auto m = parsed.find("message"); m != parsed.end() && m->is_string())
      reason = m->get<std::string>();
  }
  return api_result<std::string>::failure(
    api_error{grpc_kind(code, status), status, "POST", path, reason});
}

std::string etcd_connection::from_endpoint(const std::string& endpoint) {
  return endpoint.empty() ? "" : " (endpoint " + endpoint + ")";
}

api_result<json> etcd_connection::object_of(const std::string& path, const std::string& body,
                                            const std::string& endpoint) {
  auto parsed = json::parse(body, nullptr, false);
  if (!parsed.is_object())
    return api_result<json>::failure(api_error{
      error_kind::malformed_body, 200, "POST", path,
      "body: not a JSON object" + from_endpoint(endpoint)});
  return api_result<json>::success(std::move(parsed));
}

bool etcd_connection::authenticate(http_client& server, api_error& err) {
  const std::string path = "/v3/auth/authenticate";
  json body = {{"name", cfg.username}, {"password", cfg.password}};
  auto t = exchange(server, path, body.dump());
  auto r = t.ok() ? object_of(path, *t.value) : api_result<json>::failure(t.error);
  if (!r.ok()) {
    err = r.error;
    return false;
  }
  auto it = r.value->find("token");
  if (it == r.value->end() || !it->is_string() || it->get<std::string>().empty()) {
    err = api_error{error_kind::malformed_body, 0, "POST", path, "token: missing"};
    return false;
  }
  token = it->get<std::string>();
  return true;
}

api_result<json> etcd_connection::call(const std::string& path, const json& body) {
  auto r = call_text(path, body.dump());
  if (!r.ok())
    return api_result<json>::failure(r.error);
  return object_of(path, *r.value, current_endpoint());
}

api_result<std::string> etcd_connection::call_text(const std::string& path,
                                                   const std::string& text) {
  api_error last = api_error{error_kind::other, 0, "POST", path, "no endpoints"};
  bool reauthenticated = false;
  for (size_t tries = 0; tries < servers.size(); ++tries) {
    auto& server = *servers[current];
    if (!cfg.username.empty() && token.empty() && !authenticate(server, last)) {
      if (!fail_over_on(last.kind))
        return api_result<std::string>::failure(last);
      current = (current + 1) % servers.size();
      continue;
    }
    auto r = exchange(server, path, text);
    if (r.ok())
      return r;
    last = r.error;
    last.reason += " (endpoint " + cfg.endpoints[current] + ")";
    if (r.kind() == error_kind::unauthorized && !cfg.username.empty() && !reauthenticated) {
      token.clear();   // simple tokens expire: authenticate again, once
      reauthenticated = true;
      --tries;
      continue;
    }
    if (!fail_over_on(r.kind()))
      return api_result<std::string>::failure(last);
    current = (current + 1) % servers.size();
  }
  return api_result<std::string>::failure(last);
}

api_error etcd_connection::stream(const std::string& path, const json& body, std::chrono::milliseconds idle,
                                const std::function<void()>& on_open,
                                const std::function<bool(const char*, std::size_t)>& on_data) {
  auto& server = *servers[current];
  api_error err;
  if (!cfg.username.empty() && token.empty() && !authenticate(server, err)) {
    err.reason += " (endpoint " + cfg.endpoints[current] + ")";
    if (fail_over_on(err.kind))
      current = (current + 1) % servers.size();
    return err;
  }
  http_headers headers;
  if (!token.empty())
    headers.emplace_back("Authorization", token);
  auto text = body.dump();
  bool opened = false;
  err = server.stream("POST", path, &text, headers, idle, [&] {
    opened = true;
    on_open();
  }, on_data);
  if (err.kind == error_kind::none)
    return err;
  err.reason += " (endpoint " + cfg.endpoints[current] + ")";
  if (err.kind == error_kind::unauthorized)
    token.clear();   // authenticate again on the next stream
  if (fail_over_on(err.kind) && !(opened && err.kind == error_kind::timeout))
    current = (current + 1) % servers.size();
  return err;
}

void etcd_connection::stream_failed(error_kind kind) {
  if (kind == error_kind::unauthorized)
    token.clear();   // an expired simple token: authenticate again
  if (fail_over_on(kind))
    current = (current + 1) % servers.size();
}

void etcd_connection::stop() {
  for (auto& server : servers)
    server->stop();
}

} // namespace leasehold
