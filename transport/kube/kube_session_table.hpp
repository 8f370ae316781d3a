// What followers know of other processes' sessions: the readings the
// session actor polls and the evidence electors judge bound records by.
// The rule and its proof: docs/safety.md, "Kubernetes leases bound to a session".
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/lease_evidence.hpp"
#include "transport/kube/kube_binding.hpp"

namespace leasehold {

/// The followers' readings of session Leases, shared (under a mutex) by the
/// session actor, which reads them, and the evidence, which judges by them.
class session_table {
public:
  using time_point = caf::actor_clock::time_point;

  explicit session_table(caf::timespan lease_duration) : d_(lease_duration) {}

  /// A reading of session `k` at `now`, by a request sent at `sent`
  /// (default: now); an answer older than the last reading's is dropped.
  void saw(const lease_key& k, std::optional<lease> rec, time_point now,
           std::optional<time_point> sent = std::nullopt);
  /// When a record bound by `b`, first seen at `since`, expires with its
  /// session (`unknown` when no reading tells); `ask`: note the interest
  /// (the actor polls a session while electors ask about it). Only a reading sent
  /// after `since` can tell that the session left that incarnation: an
  /// older one may predate the incarnation itself (sim seed 558).
  time_point expires(const lease_key& k, const session_binding& b, time_point unknown,
                     time_point since, bool ask = true);
  /// When the session was last seen renewed in `b`'s incarnation (a new
  /// version read): its holder was live then. Epoch when no reading shows it.
  time_point renewed_at(const lease_key& k, const session_binding& b);
  /// Whether `k`'s spec has been seen unchanged for a lease duration (a
  /// holder renews its spec; an operator's label is no renew).
  bool still(const lease_key& k, time_point now);
  /// The session's record as last read (nullopt: absent or unknown).
  std::optional<lease> record(const lease_key& k);
  /// The sessions to read now: asked about within two lease durations (a
  /// follower asks at every wake, at least once a lease duration), none in
  /// flight, the last read older than `every`.
  std::vector<lease_key> due(time_point now, caf::timespan every);
  void read_failed(const lease_key& k);
  /// This process's live incarnation in `ns` ("" none).
  void set_own(const std::string& ns, std::string inc);
  bool own_live(const std::string& ns, const std::string& inc);

private:
  struct reading {
    bool known = false;
    std::optional<lease> record;        // nullopt: absent
    time_point seen_at{};               // when this version (or the absence) was first seen
    time_point spec_seen_at{};          // when this spec was first seen
    time_point read_at{};
    time_point read_sent{};             // the send of the request that read it
    std::map<std::string, time_point> left_at;   // incarnation -> first seen outside it
    bool asked = false;                 // an elector judged by it since the last poll
    time_point wanted_until{};          // read until then (an ask keeps it two lease durations)
    bool reading = false;
  };

  caf::timespan d_;
  std::mutex mx_;
  std::map<lease_key, reading> m_;
  std::map<std::string, std::string> own_;
};

/// A follower's evidence on Kubernetes: a bound record is held until its
/// session has been still (or gone from that incarnation) a lease duration.
/// `own`: this process's session Lease name.
std::shared_ptr<lease_evidence> make_session_evidence(std::shared_ptr<session_table> t,
                                                      std::string own, caf::timespan lease_duration,
                                                      caf::timespan retry_period);

} // namespace leasehold
