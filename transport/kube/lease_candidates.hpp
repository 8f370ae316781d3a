// Balance group membership on Kubernetes: one LeaseCandidate
// (coordination.k8s.io/v1beta1) per replica and group, renewed at every
// announcement. Join order is its creationTimestamp (ties: by identity); why:
// docs/balance.md, "The assignment rule".
#pragma once

#include <string>
#include <vector>

#include "leasehold/lease.hpp"
#include "leasehold/membership.hpp"
#include "transport/http/http_client.hpp"

namespace leasehold {

std::string lease_candidates_path(const std::string& ns);
/// "<group>-<identity>", lowercased, every character outside [a-z0-9.-]
/// replaced by '-', at most 253 characters (a DNS subdomain).
std::string lease_candidate_name(const candidate& c);
/// The LeaseCandidate this replica writes to announce itself at `now`.
nlohmann::json lease_candidate_object(const candidate& c, wall_time now);
/// The members of a LeaseCandidateList body (only those of `group`); the
/// error names the field ("items[2].metadata.creationTimestamp: ...").
parse_result<std::vector<member_record>> parse_lease_candidates(const std::string& body,
                                                                const std::string& group);

/// Blocking: use from a detached actor (spawn_http_membership).
class lease_candidates {
public:
  explicit lease_candidates(connection_config cfg) : client_(std::move(cfg)) {}
  /// GET this replica's LeaseCandidate, PUT it renewed (or POST), then list
  /// the group's.
  members_reply announce(const candidate& c);
  /// DELETE it (true), or there was none (false).
  withdraw_reply withdraw(const candidate& c);

private:
  http_client client_;
};

} // namespace leasehold
