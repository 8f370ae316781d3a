// Balance groups: which replica should lead which lease of a group.
// The rule and its guarantees: the comment on balance_assignment below.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace leasehold {

/// A replica of a group as every replica sees it.
struct balance_member {
  std::string identity;
  /// When it joined, on a clock every replica reads the same (the
  /// LeaseCandidate's creationTimestamp, the etcd key's create_revision).
  /// Ties are ordered by identity.
  std::int64_t joined = 0;
};

/// What a member announces of its config: the number of its group's leases
/// and a hash of their sorted names ("12/9f3a..."). Members count each
/// other only when theirs are equal (docs/balance.md, "Members whose
/// configs differ").
std::string lease_list_fingerprint(std::vector<std::string> leases);

/// How strongly `member` wants `lease` (rendezvous / highest-random-weight
/// hashing): a 64-bit score, the same on every platform and run.
std::uint64_t rendezvous_score(const std::string& lease, const std::string& member);

/// A group is M leases (one per balanced leader-only module) and the N
/// replicas that run the group (its members). Every replica computes the
/// same assignment from what it can see: the members, in the order they
/// joined, and the current holder of each lease. Nothing else is exchanged.
///
/// The rule (docs/balance.md has the proof of each guarantee):
///   1. Quotas. f = floor(M/N), r = M mod N. The r members that joined first
///      get f + 1 leases, the others f. So every member leads f or f + 1.
///   2. Keep. A member keeps the leases it holds, up to its quota; over its
///      quota it keeps those it ranks highest (rendezvous score), a lease
///      pinned to it (a yield's) first.
///   3. Give. Every other lease (free, held by a non-member, or over a
///      holder's quota), in name order, goes to the member with room left
///      that ranks it highest.
/// Guarantees, once the assignment is carried out:
///   - a join moves floor(M/(N+1)) <= ceil(M/(N+1)) leases, all to the joiner
///     (no old member's quota grows);
///   - a leave moves only the leaver's leases (no survivor's quota shrinks);
///   - carried out, the assignment is a fixed point: computed again from the
///     new holders it is the same, so a settled group never churns.
/// Membership flapping is damped before this function (settled_members): a
/// member counts only once it has been present for the group's settle time.
///
/// The member each lease should be led by (every lease of `leases` is a key
/// when `members` is not empty; an empty map when it is). `holders`: lease ->
/// its current holder ("" or absent: free). Duplicate leases or members are
/// counted once. `pinned`: lease -> the member that keeps it before any
/// other lease it holds (a yield's successor, for the yield hold:
/// docs/balance.md), counted as held by it; a pin to a non-member is ignored.
std::map<std::string, std::string>
balance_assignment(const std::vector<std::string>& leases, std::vector<balance_member> members,
                   const std::map<std::string, std::string>& holders,
                   const std::map<std::string, std::string>& pinned = {});

/// A member as this replica has seen it: since when it is continuously
/// present (local clock).
struct observed_member {
  balance_member member;
  std::chrono::steady_clock::time_point present_since;
};

/// The members that count: present for at least `settle` (hysteresis: a
/// replica that flaps in and out never gets work). A replica judges itself
/// by the same rule, so all agree on the members once each has watched
/// them for `settle`.
std::vector<balance_member> settled_members(const std::vector<observed_member>& seen,
                                            std::chrono::steady_clock::time_point now,
                                            std::chrono::steady_clock::duration settle);

} // namespace leasehold
