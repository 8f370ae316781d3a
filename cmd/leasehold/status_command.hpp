// `leasehold status`: every lease of a config (or of a namespace), its
// holder, term and time since renew, and each balance group's members and
// whether it is balanced, read from the store as `kubectl get leases` reads
// (not from the agents' ports). Kubernetes: the Lease and LeaseCandidate
// lists of the namespace; etcd: its keys and its groups' member keys, as
// `etcdctl get --prefix` reads them. The judgement is a pure function (status_report)
// so that tests can give it any store.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <caf/timespan.hpp>
#include <nlohmann/json.hpp>

#include "leasehold/lease.hpp"

namespace leasehold::agent {

struct run_options;

/// A member of a group as the store lists it.
struct status_member {
  std::string group, identity;
  std::optional<wall_time> renewed;   // the LeaseCandidate's renewTime (etcd: now)
};

struct status_input {
  std::string ns;
  std::vector<lease> leases;                 // the store's (a config's: absent ones left out)
  std::vector<status_member> members;
  /// Which lease is in which group ("" none) and the order to list them
  /// in; empty: every stored lease, groups unknown (a namespace alone).
  std::vector<std::pair<std::string, std::string>> config_leases;
  /// The config's own lease when no module runs under it (all balanced):
  /// nobody competes for it, so no record of it is expected.
  std::string idle_lease;
  caf::timespan member_ttl{std::chrono::seconds(15)};   // a member renewed longer ago is stale
  wall_time now{};
};

/// {"namespace", "leases": [{lease, group, holder, term, renewed_ago_ms,
/// lease_duration_s, expired, preferred_holder, found, session (a bound
/// lease: renewed_ago_ms and expired are its session's), and outside a group
/// candidates: the live replicas announcing it}], "groups": [{group,
/// members, stale_members, leases, held, balanced, why}]}.
nlohmann::json status_report(const status_input& in);
/// The report as two tables for a person.
void print_status(const nlohmann::json& report, std::ostream& out);

/// `leasehold status [--config FILE | --namespace NS] [-o json]`: exit 0,
/// 1 when the store cannot be read, 2 on a usage or config error.
int status_command(const run_options& opts, bool json_output, std::ostream& out,
                   std::ostream& err);

} // namespace leasehold::agent
