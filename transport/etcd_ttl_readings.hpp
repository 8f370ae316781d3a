// etcd: the remaining-TTL readings (/v3/lease/timetolive) of a transport,
// one per etcd lease ID, each with the time its read was SENT, shared by the
// transport's workers (transport/etcd_client.cpp) and modelled as such by the
// simulator (tests/sim/sim_etcd.cpp). Keys bound to one etcd lease (a
// holder's session lease) then cost one TTL read between them, not one each.
//
// A reading serves a later read only while it is young enough for the
// follower rules that use it (actors/outside_writes.hpp), and the follower
// is told its age (lease::ttl_age), so its rules count from the reading's
// real send time, never a later one:
//   - a reading of n >= 2 s serves for (n - 0.5 s) / 2: next_ttl_read reads
//     again n - 0.5 s after a reading's send, by when the reading no longer
//     serves, so that read goes to etcd;
//   - a reading of 0 or 1 s (a lease's last seconds) serves for 50 ms only:
//     every key of a session lease that runs out is in its last second at
//     once, and each of its followers reads it every half request timeout
//     (at least 100 ms) there, so one reading per 50 ms serves them all
//     (1,000 keys of a killed process were 1,000 timetolive reads per
//     round), and the next round still goes to etcd.
// A served reading counts from its real send (judge_vanished_key's freshness
// and gapless watch are judged from it: an older reading can only fail
// them), and the follower's first read of 0 is its own reply to it, no
// earlier than the reading's: stale readings cost time, never safety.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>

namespace leasehold {

/// Whether a TTL reading of `ttl_seconds`, sent `age` ago, may answer a read.
inline bool ttl_reading_serves(std::int64_t ttl_seconds, std::chrono::nanoseconds age) {
  using namespace std::chrono_literals;
  if (ttl_seconds < 2)
    return age <= 50ms;
  return age <= (std::chrono::seconds(ttl_seconds) - 500ms) / 2;
}

/// The readings by etcd lease ID; TimePoint is the clock the reads are
/// timed by (steady_clock; the simulator's clock). Thread-safe.
template <class TimePoint>
class ttl_readings {
public:
  struct reading {
    TimePoint sent;
    std::int64_t ttl_seconds = 0;
  };

  /// A reading of lease `id` that serves a read begun at `now`
  /// (ttl_reading_serves), if any.
  std::optional<reading> find(const std::string& id, TimePoint now) const {
    std::lock_guard<std::mutex> g(mx_);
    auto i = readings_.find(id);
    if (i == readings_.end())
      return std::nullopt;
    auto age = now > i->second.sent ? now - i->second.sent : decltype(now - now){0};
    if (!ttl_reading_serves(i->second.ttl_seconds, age))
      return std::nullopt;
    return i->second;
  }

  /// The latest reading of lease `id`, however old (a follower judges
  /// its use itself: elector_actor::follow_shared_reading), if any.
  std::optional<reading> latest(const std::string& id) const {
    std::lock_guard<std::mutex> g(mx_);
    auto i = readings_.find(id);
    if (i == readings_.end())
      return std::nullopt;
    return i->second;
  }

  /// A read of lease `id` sent at `sent` said `ttl_seconds` (kept unless a
  /// later-sent reading is there). Readings that no longer serve are
  /// dropped whenever the map has doubled since the last sweep, so it
  /// holds about the leases read within the last half TTL.
  void note(const std::string& id, TimePoint sent, std::int64_t ttl_seconds) {
    std::lock_guard<std::mutex> g(mx_);
    auto [i, added] = readings_.try_emplace(id, reading{sent, ttl_seconds});
    if (!added && i->second.sent <= sent)
      i->second = reading{sent, ttl_seconds};
    if (readings_.size() < 2 * swept_size_)
      return;
    for (auto j = readings_.begin(); j != readings_.end();) {
      auto& r = j->second;
      bool serves = r.sent >= sent || ttl_reading_serves(r.ttl_seconds, sent - r.sent);
      j = serves ? std::next(j) : readings_.erase(j);
    }
    swept_size_ = std::max<std::size_t>(readings_.size(), 64);
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> g(mx_);
    return readings_.size();
  }

private:
  mutable std::mutex mx_;
  std::map<std::string, reading> readings_;
  std::size_t swept_size_ = 64;
};

} // namespace leasehold
