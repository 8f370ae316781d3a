#include "transport/etcd_watch.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/etcd_client.hpp"
#include "transport/etcd_wire.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;

/// The etcd watch of one lease key: POST /v3/watch on the gateway from the
/// revision after the last one delivered (no revision: the key is read
/// first and its state delivered, then watched from the read's revision +
/// 1). PUT events are records, DELETE events (a revoked or expired etcd
/// lease, too) `deleted`. A watch canceled because its start revision was
/// compacted re-reads the current state; so does a stream that opened and
/// then stayed quiet for idle_timeout (a renew on etcd writes nothing: a
/// healthy leader's key is silent), without going down: a member that
/// stopped answering, or lost its quorum (a watch on it would stay open and
/// silent), fails that read, which moves to the next endpoint; so does a
/// broken or failed stream. The loop itself is lease_watch_loop's.
class etcd_lease_watcher : public lease_watch_loop {
public:
  etcd_lease_watcher(etcd_config cfg, lease_watch_request req)
    : lease_watch_loop(std::move(req)), client_(std::move(cfg)) {
    auto& rv = watch_request().resource_version;
    auto last = parse_revision(rv);
    next_ = last > 0 ? last + 1 : 0;
    present_ = last > 0;
    start();
  }
  ~etcd_lease_watcher() override { halt(); }

private:
  static std::int64_t parse_revision(const std::string& rv) {
    if (rv.empty() || rv.size() > 18 || rv.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    return std::stoll(rv);
  }

  api_error prepare() override {
    if (next_ > 0)
      return {};
    auto st = client_.read_lease(watch_request().lease);   // fails over by itself
    if (!st.ok())
      return st.error;
    if (st.value->record) {
      present_ = true;
      send({lease_watch_event::kind::record, std::move(st.value->record), {}});
    } else if (present_) {
      present_ = false;   // gone while we were not watching (compacted away)
      send({lease_watch_event::kind::deleted, std::nullopt, {}});
    }
    next_ = st.value->revision + 1;
    return {};
  }

  request next_request() override { return {"POST", "/v3/watch"}; }

  api_error open(const request& r, std::chrono::milliseconds idle,
                 const std::function<void()>& on_open,
                 const std::function<bool(const char*, std::size_t)>& on_data) override {
    json body = {{"create_request",
                  {{"key", encode_base64(client_.key_of(watch_request().lease))},
                   {"start_revision", std::to_string(next_)},
                   {"progress_notify", true}}}};
    bool opened = false;
    auto err = client_.stream(r.path, body, idle, [&] {
      opened = true;
      on_open();
    }, on_data);
    if (opened && err.kind == error_kind::timeout) {
      // Quiet, not broken: read the key again (a linearizable range, so a
      // member cut off from its quorum fails it and the read, then the
      // stream, move to the next endpoint), then watch on from that read.
      next_ = 0;
      return api_error{};
    }
    return err;
  }

  void abort() override { client_.stop(); }

  std::optional<api_error> on_line(const std::string& line, const request& r,
                                   bool& delivered) override {
    auto parsed = parse_etcd_watch_line(line, watch_request().lease);
    if (!parsed.ok())
      return malformed(r, "malformed watch message: " + parsed.error + " (endpoint "
                          + client_.current_endpoint() + ")");
    auto& m = *parsed.value;
    if (m.error) {
      api_error err{grpc_kind(m.grpc_code, m.http_code), m.http_code, r.verb, r.path,
                    "watch error: " + m.message + " (endpoint " + client_.current_endpoint() + ")",
                    0};
      client_.stream_failed(err.kind);
      return err;
    }
    if (m.canceled) {
      if (m.compact_revision > 0) {
        next_ = 0;   // the revision we wanted is gone: read the current state again
        return api_error{};
      }
      return api_error{error_kind::other, 200, r.verb, r.path,
                       "watch canceled by the server"
                         + (m.cancel_reason.empty() ? std::string{} : ": " + m.cancel_reason)
                         + " (endpoint " + client_.current_endpoint() + ")",
                       0};
    }
    delivered = true;
    for (auto& ev : m.events) {
      next_ = std::max(next_, ev.mod_revision + 1);
      present_ = !ev.deleted;
      if (ev.deleted)
        send({lease_watch_event::kind::deleted, std::nullopt, {}});
      else
        send({lease_watch_event::kind::record, std::move(ev.record), {}});
    }
    return std::nullopt;
  }

  etcd_client client_;
  std::int64_t next_ = 0;   // the revision the next stream starts at (0: read first)
  bool present_ = false;    // what the subscriber was last told: the key exists
};

} // namespace

std::unique_ptr<lease_watch_loop> make_etcd_lease_watch(etcd_config cfg, lease_watch_request req) {
  return std::make_unique<etcd_lease_watcher>(std::move(cfg), std::move(req));
}

} // namespace leasehold
