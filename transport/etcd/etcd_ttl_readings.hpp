// etcd: the remaining-TTL readings (/v3/lease/timetolive) of a transport, one
// per etcd lease ID with its read's SEND time, shared by its workers and
// modelled by the simulator. Why: docs/safety.md, "One TTL reading per etcd lease".
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>

#include "transport/etcd/etcd_evidence.hpp"

namespace leasehold {

/// Whether a TTL reading of `ttl_seconds`, sent `age` ago, may answer a read.
inline bool ttl_reading_serves(std::int64_t ttl_seconds, std::chrono::nanoseconds age) {
  using namespace std::chrono_literals;
  if (ttl_seconds < 2)
    return age <= 50ms;
  return age <= (std::chrono::seconds(ttl_seconds) - 500ms) / 2;
}

/// The readings by etcd lease ID, timed by TimePoint's clock, and at most one
/// read marked in flight per lease (begin/end). Thread-safe.
template <class TimePoint>
class ttl_readings {
public:
  struct reading {
    TimePoint sent;
    std::int64_t ttl_seconds = 0;
  };

  /// A reading of lease `id` that serves a read begun at `now`, if any.
  std::optional<reading> find(const std::string& id, TimePoint now) const {
    std::lock_guard<std::mutex> g(mx_);
    auto i = leases_.find(id);
    if (i == leases_.end() || !i->second.latest)
      return std::nullopt;
    auto& r = *i->second.latest;
    auto age = now > r.sent ? now - r.sent : decltype(now - now){0};
    if (!ttl_reading_serves(r.ttl_seconds, age))
      return std::nullopt;
    return r;
  }

  /// The latest reading of lease `id`, however old, and the read in
  /// flight, as ages at `now`: the follower judges their use itself.
  etcd_ttl_status status(const std::string& id, TimePoint now) const {
    auto age = [now](TimePoint t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(now > t ? now - t : now - now);
    };
    etcd_ttl_status s;
    std::lock_guard<std::mutex> g(mx_);
    auto i = leases_.find(id);
    if (i == leases_.end())
      return s;
    if (auto& r = i->second.latest)
      s.latest = etcd_ttl_status::reading{age(r->sent), r->ttl_seconds};
    if (auto& b = i->second.begun)
      s.read_begun = age(*b);
    return s;
  }

  /// A follower's read of lease `id` goes out at `now`: marked in flight.
  void begin(const std::string& id, TimePoint now) {
    std::lock_guard<std::mutex> g(mx_);
    auto& l = leases_[id];
    if (!l.begun || *l.begun < now)
      l.begun = now;
  }

  /// The read marked at `begun` is answered: its mark ends, unless replaced.
  void end(const std::string& id, TimePoint begun) {
    std::lock_guard<std::mutex> g(mx_);
    auto i = leases_.find(id);
    if (i != leases_.end() && i->second.begun == begun)
      i->second.begun.reset();
  }

  /// A read of lease `id` sent at `sent` said `ttl_seconds`. Whenever the
  /// map doubled since the last sweep, stale readings and marks are dropped.
  void note(const std::string& id, TimePoint sent, std::int64_t ttl_seconds) {
    using namespace std::chrono_literals;
    std::lock_guard<std::mutex> g(mx_);
    auto& l = leases_[id];
    if (!l.latest || l.latest->sent <= sent)
      l.latest = reading{sent, ttl_seconds};
    if (leases_.size() < 2 * swept_size_)
      return;
    for (auto j = leases_.begin(); j != leases_.end();) {
      auto& e = j->second;
      bool serves = e.latest
                    && (e.latest->sent >= sent || ttl_reading_serves(e.latest->ttl_seconds, sent - e.latest->sent));
      bool marked = e.begun && *e.begun + 60s >= sent;
      j = serves || marked ? std::next(j) : leases_.erase(j);
    }
    swept_size_ = std::max<std::size_t>(leases_.size(), 64);
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> g(mx_);
    return leases_.size();
  }

private:
  struct lease_readings {
    std::optional<reading> latest;
    std::optional<TimePoint> begun;   // a read marked in flight (begin)
  };
  mutable std::mutex mx_;
  std::map<std::string, lease_readings> leases_;
  std::size_t swept_size_ = 64;
};

} // namespace leasehold
