// The answers of a transport's own renews, for its shared watch stream.
//
// The API streams every write as an event, the writer's own included: a
// process holding 10,000 Leases got 5,000 events a second of its own
// renews on its stream, each parsed in full on the watch thread and handed
// to an elector that already had that record from the write's answer and
// dropped it (measured: 14 % of the process's CPU). A renew whose elector follows the stream asks for no echo
// (lease::skip_watch_echo); its client notes the answer's bytes (a 64-bit
// hash and the length), the Lease's name and resourceVersion here, and the
// stream drops, unparsed, a MODIFIED event whose object is exactly those
// bytes, provided one subscriber alone follows that Lease (the writer: it
// asked, so it follows).
// The rest of its rules: the comment on watch_echoes below.
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

/// The event can come first: the API writes it to the stream while the
/// answer is on its way, and a pipelined batch's answers are all read before
/// any is noted (more than half of the echoes came first, and were parsed, at
/// 10,000 Leases). So a batch of such renews is registered before it is sent
/// (depart(), landed when its answers are noted), and take() of a MODIFIED
/// line that nothing noted matches, for a Lease of a batch in flight, waits
/// for that batch's answers, at most `max_wait` after the batch left. A line
/// of any other Lease never waits. Anything else is parsed and delivered as before:
/// another writer's event, a version nobody noted, a Lease two electors of
/// the process follow, an event that arrives before the answer was noted,
/// an API that words the two differently. A dropped event can only be one
/// the writer already has; and no rule of the elector depends on the
/// stream (docs/safety.md, "Followers that watch").
class watch_echoes {
public:
  /// Of one noted answer.
  struct echo {
    std::string name;
    std::string resource_version;
  };

  /// Keeps the last `capacity` answers (an echo arrives within
  /// milliseconds; an older one is delivered as any event); take() waits
  /// for a batch in flight at most `max_wait` after it left.
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
  /// Renews of the Leases `names` (their echoes asked for) are about to be
  /// sent; called by the transport's workers before sending.
  flight depart(const std::vector<std::string_view>& names);

  /// A renew of Lease `name` was answered `answer` (the response body)
  /// with resourceVersion `rv`. Called by the transport's workers.
  void note(std::string_view answer, const std::string& name, const std::string& rv);
  /// The noted answer that the watch line `line` repeats byte for byte as
  /// a MODIFIED event (the entry is used up), or nullopt. Called by the
  /// watch thread; waits as the header says when the line's Lease is in a
  /// flight.
  std::optional<echo> take(std::string_view line);
  /// Lines take() matched so far.
  std::uint64_t taken() const;
  /// Lines take() waited for (a flight of their Lease was out).
  std::uint64_t waited() const;

  /// The object of a MODIFIED watch line, in either key order the APIs
  /// write ({"type":"MODIFIED","object":{...}} or
  /// {"object":{...},"type":"MODIFIED"}), without trailing whitespace; an
  /// empty view for anything else.
  static std::string_view modified_object(std::string_view line);
  /// metadata.name of a Lease object's JSON text, read without parsing the
  /// rest; an empty view when it is not found as a plain string (a hint:
  /// only whether take() waits depends on it).
  static std::string_view object_name(std::string_view object);

private:
  struct entry {
    std::size_t size = 0;
    echo what;
  };
  /// The flights out carrying one Lease name (by its hash: a collision
  /// only makes a line wait that need not).
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
