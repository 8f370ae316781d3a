// In-memory object store with Kubernetes semantics, for every served
// resource kind (Leases, ConfigMaps, Events share this one code path).
//
// One global, monotonic resourceVersion counter (decimal strings on the
// wire); optimistic concurrency on PUT/DELETE; server-set uid,
// creationTimestamp and resourceVersion; unknown fields kept as received.
// Every method takes the one mutex: safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/resources.hpp"

namespace leasehold::apiserver {

/// An HTTP status and its JSON body (the object, a List or a Status).
struct reply {
  int code = 200;
  nlohmann::json body;
};

class object_store {
public:
  object_store();

  reply get(const resource_type& r, const std::string& ns, const std::string& name) const;
  /// Lists one namespace, or every namespace when `ns` is empty.
  reply list(const resource_type& r, const std::string& ns) const;
  /// POST: metadata.name, or metadata.generateName plus a random suffix.
  reply create(const resource_type& r, const std::string& ns, nlohmann::json body);
  /// PUT: metadata.resourceVersion must be the stored one.
  reply update(const resource_type& r, const std::string& ns, const std::string& name,
               nlohmann::json body);
  /// DELETE, honouring DeleteOptions.preconditions.{uid,resourceVersion}.
  reply remove(const resource_type& r, const std::string& ns, const std::string& name,
               const nlohmann::json& delete_options);

  /// Forgets every object (an API server that lost its state); the
  /// resourceVersion counter stays monotonic.
  void wipe();

  /// Counts successful mutations (for the snapshot writer).
  std::uint64_t mutations() const;
  nlohmann::json snapshot() const;
  /// Replaces the contents with a snapshot(); returns an error text or "".
  std::string restore(const nlohmann::json& snapshot);

private:
  // (resource plural, namespace, name); std::map order is the list order.
  using key = std::tuple<std::string, std::string, std::string>;
  struct stored {
    nlohmann::json object;
    std::uint64_t created = 0;   // resourceVersion at creation: eviction order
  };

  void insert(const resource_type& r, key k, nlohmann::json object);
  void stamp(const resource_type& r, const std::string& ns, nlohmann::json& object);
  std::string random_suffix();
  std::string new_uid();

  mutable std::mutex mu_;
  std::map<key, stored> objects_;
  std::map<std::string, std::map<std::uint64_t, key>> creation_order_;  // per plural
  std::uint64_t resource_version_ = 0;
  std::uint64_t mutations_ = 0;
  std::mt19937_64 rng_;
};

} // namespace leasehold::apiserver
