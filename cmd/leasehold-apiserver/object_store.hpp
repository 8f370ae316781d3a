// In-memory object store with Kubernetes semantics, one code path for every
// served resource kind. Every mutation is also a watch event in a bounded
// history, from which watches resume. Every method takes the one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/resources.hpp"
#include "cmd/leasehold-apiserver/selectors.hpp"

namespace leasehold::apiserver {

/// A stored object. Immutable once stored: the store, the watch history
/// and the replies share it instead of copying it.
using object_ptr = std::shared_ptr<const nlohmann::json>;

/// An HTTP status and its JSON body (the object, a List or a Status): a
/// stored `object` shared, or else `body`.
struct reply {
  int code = 200;
  nlohmann::json body;
  object_ptr object;
  std::string text;   // `object` serialized, when the store already did it

  reply() = default;
  reply(int c, nlohmann::json b) : code(c), body(std::move(b)) {}
  reply(int c, object_ptr o, std::string t = {}) : code(c), object(std::move(o)), text(std::move(t)) {}
  const nlohmann::json& value() const { return object ? *object : body; }
};

/// One change as a watch sees it; a DELETED `object` is the last state stamped
/// with the deletion's resourceVersion, and only a MODIFIED one has `previous`.
struct watch_event {
  std::uint64_t resource_version = 0;
  std::string type;
  std::string plural;
  object_ptr object;
  object_ptr previous;
  /// The event as a plain watch streams it (watch_line), written once for every watcher.
  std::string line;
};

/// One watch event line: `type` and the object already written as JSON.
std::string watch_line(const std::string& type, const std::string& object_json);

/// What a watch at `since` gets next.
struct watch_batch {
  bool expired = false;          // `since` is older than the kept history
  std::uint64_t oldest = 0;      // the oldest resourceVersion a watch can resume from
  std::uint64_t current = 0;     // the watch is now at this resourceVersion
  /// Of the asked resource, in order; shared with the history, not copied per watcher.
  std::vector<std::shared_ptr<const watch_event>> events;
};

/// A patch applied to the stored object: the new object, or a reply (error).
using patch_fn = std::function<std::optional<reply>(nlohmann::json& object)>;

class object_store {
public:
  explicit object_store(std::size_t history_limit = 1000);

  reply get(const resource_type& r, const std::string& ns, const std::string& name) const;
  /// Lists the objects `filter` matches, at most `limit` (0: all) from the
  /// `continue_token` of a previous page on.
  reply list(const resource_type& r, const object_filter& filter, std::size_t limit,
             const std::string& continue_token) const;
  /// POST: metadata.name, or metadata.generateName plus a random suffix.
  reply create(const resource_type& r, const std::string& ns, nlohmann::json body);
  /// PUT: metadata.resourceVersion must be the stored one.
  reply update(const resource_type& r, const std::string& ns, const std::string& name,
               nlohmann::json body);
  /// PATCH: `apply` edits a copy of the stored object, stored as update() would,
  /// all under one lock so a patch without a resourceVersion never conflicts.
  reply patch(const resource_type& r, const std::string& ns, const std::string& name,
              const patch_fn& apply);
  /// DELETE, honouring DeleteOptions.preconditions.{uid,resourceVersion}.
  reply remove(const resource_type& r, const std::string& ns, const std::string& name,
               const nlohmann::json& delete_options);

  /// Forgets every object (an API server that lost its state); the
  /// resourceVersion counter stays monotonic.
  void wipe();

  /// The events of `r` after resourceVersion `since` (every namespace).
  watch_batch events_since(const resource_type& r, std::uint64_t since) const;
  /// The number of wake() calls so far.
  std::uint64_t wakes() const;
  /// Blocks until an event after `since`, a wake() after `wakes_seen`
  /// (see wakes()) or `deadline`.
  void wait(std::uint64_t since, std::uint64_t wakes_seen,
            std::chrono::steady_clock::time_point deadline) const;
  /// Wakes every wait() (fault changes, shutdown).
  void wake();

  /// Counts successful mutations (for the snapshot writer).
  std::uint64_t mutations() const;
  nlohmann::json snapshot() const;
  /// Replaces the contents with a snapshot(); returns an error text or "".
  std::string restore(const nlohmann::json& snapshot);

private:
  // (resource plural, namespace, name); std::map order is the list order.
  using key = std::tuple<std::string, std::string, std::string>;
  struct stored {
    object_ptr object;
    std::uint64_t created = 0;   // resourceVersion at creation: eviction order
  };
  using iterator = std::map<key, stored>::iterator;

  void stamp(const resource_type& r, const std::string& ns, nlohmann::json& object);
  /// PUT with the mutex held; `checked`: check_body was done already.
  reply update_locked(const resource_type& r, const std::string& ns, const std::string& name,
                      nlohmann::json body, bool checked = false);
  /// Appends to the history (mutex held); returns the object serialized.
  /// The write_lock wakes the watches.
  std::string record(const std::string& type, const std::string& plural, object_ptr object,
                     object_ptr previous = nullptr);
  /// Removes a stored object with its DELETED event (mutex held); returns its uid.
  nlohmann::json erase_locked(iterator it);
  std::string random_suffix();
  std::string new_uid();

  /// The mutex for a mutation; after unlocking, its end wakes the watches and
  /// frees the events that left the history, so neither waits for the mutex.
  class write_lock {
  public:
    explicit write_lock(object_store& store);
    ~write_lock();
    write_lock(const write_lock&) = delete;
    write_lock& operator=(const write_lock&) = delete;

  private:
    object_store& store_;
    std::unique_lock<std::mutex> lock_;
    std::uint64_t version_;
  };

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<key, stored> objects_;
  std::map<std::string, std::map<std::uint64_t, key>> creation_order_;  // per plural
  // Starts at 1, as etcd's revision does: an empty list's resourceVersion is
  // never "0", which a watch reads as "any state".
  std::uint64_t resource_version_ = 1;
  std::uint64_t mutations_ = 0;
  std::uint64_t wakes_ = 0;
  std::size_t history_limit_;
  std::deque<std::shared_ptr<const watch_event>> history_;
  std::vector<std::shared_ptr<const watch_event>> evicted_;   // out of history_, to free unlocked
  std::uint64_t history_floor_ = 0;   // every event after it is in history_
  std::mt19937_64 rng_;
};

} // namespace leasehold::apiserver
