// Balance groups: which replica should lead which lease of a group.
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

/// The member each lease should be led by (the rule and its guarantees:
/// docs/balance.md, 'The assignment rule'); empty when `members` is.
/// `holders`: lease -> its holder ("" or absent: free). `pinned`: lease -> the
/// member that keeps it first (the yield hold); a pin to a non-member is ignored.
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

/// The members that count: present for at least `settle`, itself included
/// (docs/balance.md, 'Flapping members: the settle time').
std::vector<balance_member> settled_members(const std::vector<observed_member>& seen,
                                            std::chrono::steady_clock::time_point now,
                                            std::chrono::steady_clock::duration settle);

} // namespace leasehold
