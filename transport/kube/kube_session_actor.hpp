// The session actor's state and the functions its two files share:
// kube_session.cpp (the own session: its start, rounds and riders) and
// kube_session_takes.cpp (bound writes, takes that end a dead session,
// the reaper). Internal to the transport.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transport/kube/kube_session.hpp"
#include "transport/kube/kube_session_table.hpp"

namespace leasehold::session_detail {

using time_point = caf::actor_clock::time_point;

using poll_atom = caf::atom_constant<caf::atom("lh_spoll")>;

/// A bound renew waiting for a round.
struct rider {
  lease req;
  time_point began;
  caf::response_promise rp;
};

/// A bound Lease this process holds: what the refresh, the reaper and F need.
struct bound_entry {
  std::string version;
  time_point written{};      // the send of our last write of it
  int duration_s = 0;        // the leaseDurationSeconds written then
  time_point asked{};        // the last renew that asked (or reaper's try)
  /// Its elector sent a release of this version: its term is over. Kept
  /// until the list shows it gone, as that release may fail.
  bool released = false;
  /// The renewTime of a write whose answer was lost: a list showing this
  /// very renewTime shows that write, and its version.
  std::optional<wall_time> unanswered;
};

/// What a round's list showed of one bound Lease: the fields a renew
/// changes, so its answer is the record as stored (a whole Lease each
/// would be a second copy of every bound Lease's metadata).
struct listed_entry {
  std::string version;
  std::optional<wall_time> renew_time;
  std::optional<int> duration_s;
};

/// This process's session in one namespace.
struct own_session {
  std::optional<lease> rec;   // as last written (its version)
  bool live = false;
  time_point renewed_at{};    // the send of its last renew that succeeded
  int writes_out = 0;         // bound takes and refreshes not answered yet
  std::optional<wall_time> start_sent;   // the acquireTime of a start not answered (or in flight)
  bool starting = false;
  std::vector<std::function<void(const api_error&)>> on_start;   // takes waiting for it
  std::optional<wall_time> unanswered;   // a renew's renewTime whose answer was lost
  bool round_out = false;
  time_point round_started{};
  int round_pending = 0;
  api_error round_error;
  std::map<std::string, listed_entry> round_list;
  std::vector<rider> riders, waiting;
  bool has_done = false;      // a round succeeded in this incarnation
  time_point done_started{};
  std::map<std::string, listed_entry> listed;   // that round's bound Leases by name
};

struct session_state {
  lease_transport_actor inner;
  session_options opts;
  std::shared_ptr<session_table> table;
  std::string name;   // our session Lease's name
  std::map<std::string, own_session> sessions;   // by namespace
  std::map<lease_key, bound_entry> book;
  /// Takes waiting on the end of a session at a version (one write for all).
  std::map<std::pair<lease_key, std::string>, std::vector<std::function<void(const api_error&)>>>
    ending;
  std::set<std::string> own_read;     // namespaces whose own session is read at a poll
  std::set<std::string> own_unread;   // of them, those still to read
};

using session_self = caf::stateful_actor<session_state>*;

inline caf::timespan timeout_of(session_self self) {
  return self->state.opts.timings.effective_request_timeout();
}

/// Session Lease `s` in its released form (holder "", duration 1), which
/// ends its incarnation for every follower at once.
inline lease released_session(lease s) {
  s.spec.holder_identity.clear();
  s.spec.lease_duration_seconds = 1;
  s.spec.renew_time = wall_now();
  return s;
}

inline api_error actor_error(const char* verb, const std::string& path, const caf::error& e) {
  return {error_kind::timeout, 0, verb, path,
          "no answer from the transport: " + caf::to_string(e), 0};
}

// kube_session.cpp
int bound_seconds(session_self self);
void start_session(session_self self, const std::string& ns,
                   std::function<void(const api_error&)> then);
void release_if_unused(session_self self, const std::string& ns);

// kube_session_takes.cpp
void write(session_self self, lease l, bool create, caf::response_promise rp);
void write_bound(session_self self, lease l, bool create, caf::response_promise rp);
/// Reads session `k` into the followers' table, then `then(answer)`.
void read_session(session_self self, const lease_key& k,
                  std::function<void(const lease_reply&)> then);
void end_then(session_self self, const lease& l, std::function<void(const api_error&)> then);
void reap(session_self self, const std::string& ns, time_point now);
void poll(session_self self);

} // namespace leasehold::session_detail
