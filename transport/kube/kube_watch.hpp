// The Kubernetes watch stream of the lease transport: a namespace's Lease
// collection, shared by its subscribers. Its request, resume and 410 Gone:
// docs/design.md, "Watch streams per backend".
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "leasehold/lease_transport.hpp"
#include "transport/http/http_client.hpp"
#include "transport/lease_watch.hpp"
#include "transport/watch_echoes.hpp"

namespace leasehold {

/// What one line of a watch stream says.
struct watch_line {
  enum class type { added, modified, deleted, bookmark, error } what = type::error;
  std::optional<lease> record;          // added / modified / deleted
  std::string resource_version;         // of the object (every type but error)
  int status_code = 0;                  // error: the Status's code (410: Gone)
  std::string message;                  // error: the Status's message
};

/// Parses one line; the error names what is wrong ("object.spec...: ...").
parse_result<watch_line> parse_watch_line(const std::string& line);

/// The path of the watch request for `k` from `rv` ("" = current state
/// first); `k.name` empty: the namespace's whole Lease collection.
std::string lease_watch_path(const lease_key& k, const std::string& rv, int timeout_seconds);

/// The Kubernetes watch of one Lease, or, with a fanout and an empty lease
/// name, of a namespace's whole Lease collection.
class lease_watcher : public lease_watch_loop {
public:
  /// `echoes`: own renews' answers, whose events the stream drops unparsed.
  lease_watcher(connection_config cfg, lease_watch_request req,
                std::shared_ptr<watch_fanout> fanout = {},
                std::shared_ptr<watch_echoes> echoes = {});
  ~lease_watcher() override;

private:
  request next_request() override;
  api_error open(const request& r, std::chrono::milliseconds idle,
                 const std::function<void()>& on_open,
                 const std::function<bool(const char*, std::size_t)>& on_data) override;
  void abort() override;
  std::optional<api_error> on_line(const std::string& line, const request& r,
                                   bool& delivered) override;

  http_client client_;
  std::shared_ptr<watch_echoes> echoes_;
  std::string rv_;
};

} // namespace leasehold
