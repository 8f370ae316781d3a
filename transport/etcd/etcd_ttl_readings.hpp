// etcd: the remaining-TTL readings (/v3/lease/timetolive) of a transport,
// one per etcd lease ID, each with the time its read was SENT, shared by the
// transport's workers (transport/etcd/etcd_client.cpp) and modelled as such by the
// simulator (tests/sim/sim_etcd.cpp). Keys bound to one etcd lease (a
// holder's session lease) then cost one TTL read between them, not one each.
// The rest of its rules: the comment on ttl_readings below.
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

/// The readings by etcd lease ID; TimePoint is the clock the reads are
/// timed by (steady_clock; the simulator's clock). Thread-safe.
///
/// Besides its latest reading, an etcd lease has at most one read marked
/// in flight: a follower whose turn it is to read marks it (begin) before
/// its read goes out and ends the mark when its answer is back (end), and
/// the followers of the same etcd lease whose turn comes meanwhile wait
/// for that read's reading instead of sending their own
/// (etcd_evidence::answer_without_read), for a request timeout at most.
template <class TimePoint>
/// A reading serves a later read only while it is young enough for the
/// follower rules that use it (transport/etcd/etcd_evidence.hpp), and the follower
/// is told its age (lease::ttl_age), so its rules count from the reading's
/// real send time, never a later one:
///   - a reading of n >= 2 s serves for (n - 0.5 s) / 2: next_ttl_read reads
///     again n - 0.5 s after a reading's send, by when the reading no longer
///     serves, so that read goes to etcd;
///   - a reading of 0 or 1 s (a lease's last seconds) serves for 50 ms only:
///     every key of a session lease that runs out is in its last second at
///     once, and each of its followers reads it every half request timeout
///     (at least 100 ms) there, so one reading per 50 ms serves them all
///     (1,000 keys of a killed process were 1,000 timetolive reads per
///     round), and the next round still goes to etcd.
/// A served reading counts from its real send (judge_vanished_key's freshness
/// and gapless watch are judged from it: an older reading can only fail
/// them), and the follower's first read of 0 is its own reply to it, no
/// earlier than the reading's: stale readings cost time, never safety.
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
    auto i = leases_.find(id);
    if (i == leases_.end() || !i->second.latest)
      return std::nullopt;
    auto& r = *i->second.latest;
    auto age = now > r.sent ? now - r.sent : decltype(now - now){0};
    if (!ttl_reading_serves(r.ttl_seconds, age))
      return std::nullopt;
    return r;
  }

  /// What a follower looks up (etcd_shared_readings::status_of), as ages at
  /// `now`: the latest reading of lease `id`, however old (it judges its
  /// use itself: etcd_evidence::answer_without_read), and the read
  /// marked in flight, if any.
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

  /// The read of lease `id` marked at `begun` is answered (whatever it
  /// found): its mark ends, unless a later one replaced it.
  void end(const std::string& id, TimePoint begun) {
    std::lock_guard<std::mutex> g(mx_);
    auto i = leases_.find(id);
    if (i != leases_.end() && i->second.begun == begun)
      i->second.begun.reset();
  }

  /// A read of lease `id` sent at `sent` said `ttl_seconds` (kept unless a
  /// later-sent reading is there). Readings that no longer serve (and
  /// marks older than a minute: reads that never got done) are dropped
  /// whenever the map has doubled since the last sweep, so it holds about
  /// the leases read within the last half TTL.
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
