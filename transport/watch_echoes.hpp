// The answers of a transport's own renews, so its shared watch stream drops
// their echoes unparsed (parsing them cost 14 % of a 10,000-Lease holder's
// CPU). Rules and why it is safe: docs/safety.md, "Followers that watch".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace leasehold {

class watch_echoes {
public:
  /// Of one noted answer.
  struct echo {
    std::string name;
    std::string resource_version;
  };

  /// Keeps the last `capacity` answers (an echo arrives within milliseconds).
  explicit watch_echoes(std::size_t capacity = 4096,
                        std::chrono::milliseconds max_wait = std::chrono::milliseconds(500))
    : capacity_(capacity), max_wait_(max_wait) {}

  /// A batch of renews on its way, from depart() until it is destroyed
  /// (after its answers were noted): it lands then.
  class flight {
  public:
    flight() = default;
    flight(flight&& o) noexcept : of_(o.of_), names_(std::move(o.names_)) { o.of_ = nullptr; }
    flight& operator=(flight&&) = delete;
    flight(const flight&) = delete;
    ~flight();

  private:
    friend class watch_echoes;
    flight(watch_echoes* of, std::vector<std::uint64_t> names)
      : of_(of), names_(std::move(names)) {}
    watch_echoes* of_ = nullptr;
    std::vector<std::uint64_t> names_;   // the Leases' name hashes
  };
  /// Renews of the Leases `names` are about to be sent: the event can come
  /// before their answers are noted, so take() waits for them.
  flight depart(const std::vector<std::string_view>& names);

  void note(std::string_view answer, const std::string& name, const std::string& rv);
  /// The noted answer that the watch line `line` repeats byte for byte as
  /// a MODIFIED event (used up), or nullopt; waits while its Lease is in flight.
  std::optional<echo> take(std::string_view line);
  /// Lines take() matched so far.
  std::uint64_t taken() const;
  /// Lines take() waited for (a flight of their Lease was out).
  std::uint64_t waited() const;

  /// The object of a MODIFIED watch line, in either key order, without
  /// trailing whitespace; an empty view for anything else.
  static std::string_view modified_object(std::string_view line);
  /// metadata.name of a Lease object's JSON text, unparsed; empty when not a
  /// plain string (a hint: only whether take() waits depends on it).
  static std::string_view object_name(std::string_view object);

private:
  struct entry {
    std::size_t size = 0;
    echo what;
  };
  /// The flights out carrying one Lease name hash (a collision only waits).
  struct aloft {
    int flights = 0;
    std::chrono::steady_clock::time_point last_departed;
  };
  void land(const std::vector<std::uint64_t>& names);

  const std::size_t capacity_;
  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mx_;
  std::condition_variable changed_;   // a note or a landing, while take() waits
  std::unordered_map<std::uint64_t, entry> by_digest_;
  std::deque<std::uint64_t> order_;   // noted digests, oldest first
  std::unordered_map<std::uint64_t, aloft> aloft_;   // by name hash
  int waiting_ = 0;   // take() calls waiting (they are notified)
  std::uint64_t taken_ = 0;
  std::uint64_t waited_ = 0;
};

} // namespace leasehold
