// The control endpoints, on both listeners (the control one never faulted):
// GET/POST /_leasehold/faults, GET /_leasehold/stats, POST /_leasehold/stats/reset.
#include "cmd/leasehold-apiserver/http_replies.hpp"
#include "cmd/leasehold-apiserver/server_impl.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

void local_api_server::impl::control(const httplib::Request& req, httplib::Response& res) {
  if (req.path == "/_leasehold/faults" && req.method == "GET") {
    std::lock_guard<std::mutex> lock(mu);
    return set_json(res, 200, faults.to_json());
  }
  if (req.path == "/_leasehold/faults" && req.method == "POST")
    return change_faults(req, res);
  bool reset = req.path == "/_leasehold/stats/reset" && req.method == "POST";
  if (reset || (req.path == "/_leasehold/stats" && req.method == "GET")) {
    std::lock_guard<std::mutex> lock(mu);
    if (reset)
      stats.reset();
    auto body = stats.to_json();
    body["held"] = held;   // gauges, not counters: reset leaves them
    return set_json(res, 200, body);
  }
  set_status(res, 404, "unknown control endpoint " + req.method + " " + req.path);
}

void local_api_server::impl::change_faults(const httplib::Request& req, httplib::Response& res) {
  json body = json::parse(req.body, nullptr, false);
  fault_request change;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu);
    error = body.is_discarded() ? "the request body is not valid JSON"
                                : parse_fault_request(body, faults, change);
    if (error.empty()) {
      faults = change.next;
      ++fault_version;
    }
  }
  if (!error.empty())
    return set_status(res, 400, error);
  cv.notify_all();
  store.wake();   // open watch streams see the new faults
  if (change.wipe)
    store.wipe();
  error = set_main_listening(change.next.mode != fault_mode::down);
  log("faults", {{"faults", change.next.to_json()}, {"wipe", change.wipe}, {"error", error}});
  if (!error.empty())
    return set_status(res, 500, error);
  set_json(res, 200, change.next.to_json());
}

} // namespace leasehold
