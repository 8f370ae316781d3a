// Voluntary handovers: a leader yields on request (yield_atom,
// `leasehold yield`) or because the Lease's preferredHolder names another
// replica. The handover is the one step-down path (leader-only modules
// confirmed down, then the release) with two additions: the released record
// names the successor (preferredHolder), and the replicas leave a free lease
// to whoever should take it for a bounded time. docs/operations.md
// ("Handing leadership over") states the rules and bounds; these are their
// pure parts and the runner's bookkeeping of one yield.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/events.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/runner.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

long long to_ms(caf::timespan t);   // whole milliseconds, for words and events

/// The record a releasing leader writes (`released`: released_spec of its
/// term): preferredHolder `target` (with handover_strategy when there is no
/// strategy); without a target, a preferredHolder that names the releaser
/// itself is dropped (another replica's is kept).
lease_spec handover_spec(lease_spec released, const std::string& releaser,
                         const std::string& target);

/// A preferredHolder lives only into the preferred replica's own term: the
/// record an acquirer `holder` writes drops one naming anybody else (it had
/// its chance), and the strategy leasehold itself wrote with it.
void drop_stale_preference(lease_spec& s, const std::string& holder);

/// Until when `identity` leaves a free lease alone (nullopt: it may take it
/// now): before `compete_after` (a replica that yielded), and while
/// `free_record` (a released record seen at `observed_at`, or nullptr when
/// the lease is absent) names another preferredHolder, for
/// preferred_holder_wait after it was seen. A released record that names
/// `identity` is taken at once, within a yield window too.
std::optional<caf::actor_clock::time_point>
hold_back_until(const lease* free_record, const std::string& identity,
                caf::actor_clock::time_point observed_at, const election_timings& t,
                caf::actor_clock::time_point compete_after, caf::actor_clock::time_point now);

/// The replica a leader should yield to: the preferredHolder of its own
/// record (`m`, as its elector saw it) when that names another replica; "" otherwise.
std::string preferred_successor(const lease_memory& m, const std::string& identity);

/// Whether `target` may be named as a successor: any name when there are
/// no `candidates` (nobody told the runner who announces the lease: an
/// embedded runner), else only one of them.
bool may_name(const std::optional<std::vector<std::string>>& candidates, const std::string& target);

/// "a, b, c" ("none" when empty): the candidates, for a refusal's words.
std::string list_names(const std::vector<std::string>& names);

/// One yield of a runner, from the request to its outcome.
class yield_handover {
public:
  /// Starts one (true), or answers `rp` why not (false): a yield under way,
  /// not `leading` (`holder`: the leader known), a target that is this
  /// replica or not one of `candidates` (may_name). `why` in words (the
  /// Event's reason); `rp` answers a yield_atom.
  bool begin(bool leading, const std::string& identity, const std::string& holder,
             std::string target, std::string why, std::optional<caf::response_promise> rp,
             const std::optional<std::vector<std::string>>& candidates = std::nullopt);
  bool active() const { return active_; }
  bool released() const { return released_at_.has_value(); }
  const std::string& target() const { return target_; }
  const std::string& why() const { return why_; }

  /// The lease (term `term`) was released at `now`: reports the
  /// voluntary_handover and returns until when this replica stays out.
  caf::actor_clock::time_point on_released(caf::actor_clock::time_point now,
                                           const election_timings& t, std::int64_t term,
                                           const event_emitter& emit);
  /// A holder was seen (the yielding replica's own: it took the lease back).
  void on_holder(const std::string& holder, const std::string& identity,
                 caf::actor_clock::time_point now, const election_timings& t);
  /// Ends the yield with `status` (release_failed, not_taken) unless it ended.
  void fail(yield_status status, std::string reason);
  /// The current release's timeout message carries this; on_timeout with it
  /// ends the yield (not_taken) unless it ended.
  std::uint64_t seq() const { return seq_; }
  void on_timeout(std::uint64_t seq);

private:
  void finish(yield_result r);

  bool active_ = false;
  std::string target_;
  std::string why_;
  std::optional<caf::response_promise> rp_;
  std::optional<caf::actor_clock::time_point> released_at_;
  std::uint64_t seq_ = 0;
};

} // namespace leasehold
