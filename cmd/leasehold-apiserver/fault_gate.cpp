// The fault gate every Kubernetes API request passes before it is served:
// latency, then mode down/hang/error and partitions (faults.hpp).
#include "cmd/leasehold-apiserver/http_replies.hpp"
#include "cmd/leasehold-apiserver/resources.hpp"
#include "cmd/leasehold-apiserver/server_impl.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

local_api_server::impl::outcome local_api_server::impl::apply_faults(
    const std::string& user_agent, const std::string& identity, httplib::Response& res) {
  std::unique_lock<std::mutex> lock(mu);
  if (faults.latency_ms > 0)
    cv.wait_for(lock, std::chrono::milliseconds(faults.latency_ms), [&] { return stopping; });
  auto deadline = std::chrono::steady_clock::now() + opts.hang_limit;
  for (;;) {
    if (stopping)
      return outcome::dropped;
    bool partitioned = faults.partition.matches(user_agent, identity);
    if (faults.mode == fault_mode::down || (partitioned && !faults.partition.hang))
      return outcome::dropped;
    if (faults.mode == fault_mode::hang || partitioned) {
      auto version = fault_version;
      ++held[user_agent];
      bool changed = cv.wait_until(lock, deadline, [&] { return stopping || fault_version != version; });
      if (--held[user_agent] == 0)
        held.erase(user_agent);
      if (!changed)
        return outcome::dropped;
      continue;
    }
    if (faults.mode == fault_mode::error) {
      int code = faults.error_status;
      json details = json::object();
      if (faults.retry_after_seconds > 0) {
        details["retryAfterSeconds"] = faults.retry_after_seconds;
        res.set_header("Retry-After", std::to_string(faults.retry_after_seconds));
      }
      set_json(res, code, failure_status(code, reason_for(code),
                                         "injected fault: " + reason_for(code), details));
      return outcome::answered;
    }
    return outcome::serve;
  }
}

} // namespace leasehold
