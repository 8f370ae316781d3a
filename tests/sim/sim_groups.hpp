// The balance-group invariants of the seeded simulator (world::groups;
// docs/balance.md, "The simulator's bounds"), judged in quiet windows (no
// fault active, the store reachable) from the work's own record: which
// replica runs each lease's leader-only work.
// The rest of its rules: the comment on group_judge below.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace leasehold::sim {

///   - unowned: while a member is live, no lease runs nowhere longer than
///     `bound` (lease_duration + group_slack), counted from the later of when
///     it stopped running and `from` (the quiet window's start plus the
///     liveness bound: what chaos left behind is the liveness rule's);
///   - balance: `bound` after `from` and after each membership change, every
///     lease runs on a member and every member runs floor(M/N) or ceil(M/N)
///     of the M leases; then nothing moves until the next change (no churn);
///   - moves: a join moves at most ceil(M/(N+1)) leases (N: the members
///     before it), all to the joiner; a leave or a kill moves only the
///     leaver's leases.
/// Per-lease safety (never two replicas running one lease's work) is the
/// per-lease checker's.
class group_judge {
public:
  using time_point = caf::actor_clock::time_point;

  group_judge(std::size_t leases, caf::timespan bound) : leases_(leases), bound_(bound) {}

  /// A quiet window begins: judging starts at `from`.
  void begin(time_point from);
  /// The quiet window ends: nothing is judged until the next begin.
  void end() { active_ = false; }
  bool active() const { return active_; }
  /// A membership change in the quiet window: replica `who` joins (true) or
  /// leaves or is killed (false); `members_before`: the live members then.
  void change(time_point at, std::size_t who, bool join, std::size_t members_before);
  /// After every step: the replica running each lease's work (nullopt:
  /// none) and the live members.
  void observe(time_point now, const std::vector<std::optional<std::size_t>>& leaders,
               const std::set<std::size_t>& members);
  /// The next instant a rule falls due (the simulation wakes then).
  std::optional<time_point> next_deadline() const;

  std::vector<std::string> violations;
  /// Figures over the run: the longest a lease stayed unowned while judged,
  /// the longest a change took to balance, the most moves of one change.
  caf::timespan max_unowned{0};
  caf::timespan max_to_balance{0};
  std::size_t max_moves = 0;
  std::size_t balanced_judgements = 0;

private:
  struct pending_change {
    std::size_t who = 0;
    bool join = false;
    std::size_t members_before = 0;
  };
  /// Unowned time counts from the latest of: the lease ran nowhere, judging
  /// began, a member was live.
  time_point counted_from(time_point since) const;
  void judge_balance(time_point now, const std::vector<std::optional<std::size_t>>& leaders,
                     const std::set<std::size_t>& members);

  std::size_t leases_;
  caf::timespan bound_;
  bool active_ = false;
  time_point from_{};
  /// When the group must be balanced next (nullopt: it was judged so).
  std::optional<time_point> due_;
  time_point changed_at_{};
  bool settled_ = false;                       // judged balanced, no change since
  std::optional<time_point> balanced_since_;   // balanced continuously since (a figure)
  std::vector<std::optional<std::size_t>> snapshot_;   // leaders when last judged balanced
  std::vector<std::set<std::size_t>> seen_;    // leaders seen since the change, per lease
  std::optional<pending_change> change_;       // the change being judged (from a balanced group)
  std::vector<std::optional<time_point>> unowned_since_;
  /// Members live continuously since (unowned time counts from then on).
  std::optional<time_point> members_since_;
  std::vector<std::optional<std::size_t>> last_;
};

} // namespace leasehold::sim
