// The answers of a transport's own renews, for its shared watch stream.
//
// The API streams every write as an event, the writer's own included: a
// process holding 10,000 Leases got 5,000 events a second of its own
// renews on its stream, each parsed in full on the watch thread and handed
// to an elector that already had that record from the write's answer and
// dropped it (bench/README.md, "cheaper renewals": 14 % of the process's
// CPU). A renew whose elector follows the stream asks for no echo
// (lease::skip_watch_echo); its client notes the answer's bytes (a 64-bit
// hash and the length), the Lease's name and resourceVersion here, and the
// stream drops, unparsed, a MODIFIED event whose object is exactly those
// bytes, provided one subscriber alone follows that Lease (the writer: it
// asked, so it follows). Anything else is parsed and delivered as before:
// another writer's event, a version nobody noted, a Lease two electors of
// the process follow, an event that arrives before the answer was noted,
// an API that words the two differently. A dropped event can only be one
// the writer already has; and no rule of the elector depends on the
// stream (docs/safety.md, "Followers that watch").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace leasehold {

class watch_echoes {
public:
  /// Of one noted answer.
  struct echo {
    std::string name;
    std::string resource_version;
  };

  /// Keeps the last `capacity` answers (an echo arrives within
  /// milliseconds; an older one is delivered as any event).
  explicit watch_echoes(std::size_t capacity = 4096) : capacity_(capacity) {}

  /// A renew of Lease `name` was answered `answer` (the response body)
  /// with resourceVersion `rv`. Called by the transport's workers.
  void note(std::string_view answer, const std::string& name, const std::string& rv);
  /// The noted answer that the watch line `line` repeats byte for byte as
  /// a MODIFIED event (the entry is used up), or nullopt. Called by the
  /// watch thread.
  std::optional<echo> take(std::string_view line);
  /// Lines take() matched so far.
  std::uint64_t taken() const;

  /// The object of a MODIFIED watch line, in either key order the APIs
  /// write ({"type":"MODIFIED","object":{...}} or
  /// {"object":{...},"type":"MODIFIED"}), without trailing whitespace; an
  /// empty view for anything else.
  static std::string_view modified_object(std::string_view line);

private:
  struct entry {
    std::size_t size = 0;
    echo what;
  };
  const std::size_t capacity_;
  mutable std::mutex mx_;
  std::unordered_map<std::uint64_t, entry> by_digest_;
  std::deque<std::uint64_t> order_;   // noted digests, oldest first
  std::uint64_t taken_ = 0;
};

} // namespace leasehold
