// Balance group membership on etcd: one key per replica and group,
// <prefix>/_members/<namespace>/<group>/<identity> ("_members" is no DNS label,
// so no lease namespace's), bound to an etcd lease every announcement keeps
// alive. Join order is the key's create_revision (docs/balance.md).
#pragma once

#include <map>
#include <string>

#include "leasehold/membership.hpp"
#include "transport/etcd/etcd_client.hpp"

namespace leasehold {

/// Blocking: use from a detached actor (spawn_etcd_membership).
class etcd_members {
public:
  explicit etcd_members(etcd_config cfg) : client_(std::move(cfg)) {}
  /// Keep this replica's key alive (grant and put it when its etcd lease is
  /// gone), then list the group's keys.
  members_reply announce(const candidate& c);
  /// Delete the key and revoke its etcd lease: true when there was one.
  withdraw_reply withdraw(const candidate& c);
  /// The group's keys: <prefix>/_members/<ns>/<group>/<identity>.
  etcd_scope group_scope(const candidate& c) const;

private:
  api_error put_key(const candidate& c);
  etcd_client client_;
  etcd_session::call_fn post_ = [this](const std::string& path, const nlohmann::json& body) {
    return client_.post(path, body);
  };
  std::map<std::string, std::string> lease_of_;   // key -> etcd lease ID
};

} // namespace leasehold
