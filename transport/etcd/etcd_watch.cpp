#include "transport/etcd/etcd_watch.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

namespace {

using json = nlohmann::json;
using kind = lease_watch_event::kind;

/// The etcd watch of one namespace's keys, which keeps each key's last
/// record (keys_) so a joiner hears its key's state at once and a re-read
/// tells only what changed. Its rules: docs/design.md, "Watch streams per
/// backend".
class etcd_watch : public lease_watch_loop {
public:
  etcd_watch(etcd_config cfg, lease_watch_request req, std::shared_ptr<watch_fanout> fanout)
    : lease_watch_loop(std::move(req), std::move(fanout)), client_(std::move(cfg)),
      scope_(client_.scope(watch_request().lease.ns)) {
    start();
  }
  ~etcd_watch() override { halt(); }

  /// Runs on the transport actor. Before the first read nothing: that read
  /// tells the subscriber.
  void join(const lease_watch_request& req) override {
    std::lock_guard<std::mutex> g(mx_);
    fanout()->add(req.lease.name, req.subscriber);
    bool believed_present = !req.resource_version.empty();
    if (!known_) {
      if (believed_present)
        believed_.insert(req.lease.name);
      return;
    }
    auto it = keys_.find(req.lease.name);
    if (it != keys_.end())
      caf::anon_send(req.subscriber,
                     lease_watch_event{kind::record, it->second.to_lease(req.lease), {}});
    else if (believed_present)
      caf::anon_send(req.subscriber, lease_watch_event{kind::deleted, std::nullopt, {}});
  }

private:
  api_error prepare() override {
    if (next_ > 0 && quiet_) {
      // Quiet for idle_timeout: did the stream miss anything? (docs/design.md,
      // "Watch streams per backend")
      auto c = client_.changed_since(scope_.ns, next_);
      if (!c.ok())
        return c.error;   // asked again (next endpoint) before the stream reopens
      quiet_ = false;
      std::lock_guard<std::mutex> g(mx_);
      if (!c.value->written && c.value->count == static_cast<std::int64_t>(keys_.size()))
        return {};   // nothing missed: resume where it was
      next_ = 0;     // something the stream did not deliver: read it all again
    }
    if (next_ > 0)
      return {};
    auto st = client_.read_scope(scope_.ns);   // fails over by itself
    if (!st.ok())
      return st.error;
    std::lock_guard<std::mutex> g(mx_);
    auto& now = st.value->records;
    for (auto& name : fanout()->names()) {
      auto is = now.find(name);
      auto was = keys_.find(name);
      if (is != now.end()) {
        if (was == keys_.end() || was->second.resource_version != is->second.resource_version)
          send_for(name, {kind::record, is->second.to_lease({scope_.ns, name}), {}});
      } else if (was != keys_.end() || (!known_ && believed_.count(name))) {
        send_for(name, {kind::deleted, std::nullopt, {}});   // gone while we were not watching
      }
    }
    keys_ = std::move(now);
    known_ = true;
    believed_.clear();
    next_ = st.value->revision + 1;
    return {};
  }

  request next_request() override { return {"POST", "/v3/watch"}; }

  std::string endpoint_note() const override {
    return " (endpoint " + client_.current_endpoint() + ")";
  }

  api_error open(const request& r, std::chrono::milliseconds idle,
                 const std::function<void()>& on_open,
                 const std::function<bool(const char*, std::size_t)>& on_data) override {
    json body = {{"create_request",
                  {{"key", encode_base64(scope_.dir())},
                   {"range_end", encode_base64(scope_.range_end())},
                   {"start_revision", std::to_string(next_)},
                   {"progress_notify", true}}}};
    bool opened = false;
    auto err = client_.stream(r.path, body, idle, [&] {
      opened = true;
      on_open();
    }, on_data);
    if (opened && err.kind == error_kind::timeout) {
      // Quiet, not broken: check the store before watching on (prepare()).
      quiet_ = true;
      return api_error{};
    }
    return err;
  }

  void abort() override { client_.stop(); }

  std::optional<api_error> on_line(const std::string& line, const request& r,
                                   bool& delivered) override {
    auto parsed = parse_etcd_watch_line(line, scope_);
    if (!parsed.ok())
      return malformed(r, "malformed watch message: " + parsed.error + endpoint_note());
    auto& m = *parsed.value;
    if (m.error) {
      api_error err{grpc_kind(m.grpc_code, m.http_code), m.http_code, r.verb, r.path,
                    "watch error: " + m.message + endpoint_note(), 0};
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
                         + endpoint_note(), 0};
    }
    delivered = true;
    std::lock_guard<std::mutex> g(mx_);
    for (auto& ev : m.events) {
      if (!ev.error.empty()) {
        // No lease record: a stream fault only for whoever follows that key.
        if (fanout()->follows(ev.name))
          return malformed(r, "malformed watch message: " + ev.error + endpoint_note());
        keys_.erase(ev.name);
        next_ = std::max(next_, ev.mod_revision + 1);
        continue;
      }
      next_ = std::max(next_, ev.mod_revision + 1);
      if (ev.deleted) {
        keys_.erase(ev.name);
        send_for(ev.name, {kind::deleted, std::nullopt, {}});
      } else {
        keys_[ev.name] = etcd_record::of(*ev.record);
        send_for(ev.name, {kind::record, std::move(ev.record), {}});
      }
    }
    return std::nullopt;
  }

  etcd_client client_;
  etcd_scope scope_;
  std::int64_t next_ = 0;   // the revision the next stream starts at (0: read first)
  bool quiet_ = false;      // the last stream was quiet for idle_timeout: check first
  std::mutex mx_;           // keys_, known_, believed_ and deliveries vs join()
  std::map<std::string, etcd_record> keys_;   // every key of the scope, as last seen
  bool known_ = false;                  // keys_ has been read
  std::set<std::string> believed_;      // joined before the first read, knowing a record
};

} // namespace

std::unique_ptr<lease_watch_loop> make_etcd_watch(etcd_config cfg, const std::string& ns,
                                                  caf::timespan idle_timeout,
                                                  std::shared_ptr<watch_fanout> fanout) {
  lease_watch_request req;
  req.lease = {ns, ""};
  req.idle_timeout = idle_timeout;
  return std::make_unique<etcd_watch>(std::move(cfg), std::move(req), std::move(fanout));
}

} // namespace leasehold
