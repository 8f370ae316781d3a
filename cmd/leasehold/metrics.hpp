// Prometheus metrics (text format 0.0.4), counted from runtime events and
// read from the runner's status at scrape time. The series are listed at
// class metrics below.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "leasehold/events.hpp"
#include "leasehold/runner.hpp"
#include "cmd/leasehold/lease_set.hpp"

namespace leasehold::agent {

// The series:
//   leasehold_build_info{version,backend,caf_version} gauge (always 1)
//   leasehold_lease_duration_seconds            gauge (the agent's lease_duration)
//   leasehold_renew_deadline_seconds            gauge (the agent's renew_deadline)
//   leasehold_is_leader                         gauge
//   leasehold_term                              gauge (own term leading or in a creation
//                                               hold, else the holder's; -1 none)
//   leasehold_creation_hold                     gauge (1: holds a lease it created, term
//                                               not started yet)
//   leasehold_leadership_transitions_total      counter (terms acquired + lost)
//   leasehold_voluntary_handovers_total         counter (event voluntary_handover: yields
//                                               and preferredHolder handovers)
//   leasehold_lease_voluntary_handovers_total{lease,group}  counter (the same per lease)
//   leasehold_renew_latency_seconds             histogram (event renewed, value = ms)
//   leasehold_api_errors_total{kind}            counter (every failed lease API request,
//                                               event api_request_failed; lost races apart;
//                                               every kind, 0 before its first)
//   leasehold_api_lost_races_total{kind}        counter (conflict, already_exists; both, 0
//                                               before the first)
//   leasehold_api_unreachable_since_timestamp_seconds  gauge (Unix time every request
//                                               began to fail; 0 while the API answers)
//   leasehold_api_unreachable_seconds           gauge (how long; 0 while it answers)
//   leasehold_module_restarts_total{module}     counter
//   leasehold_module_running{module}            gauge
//   leasehold_fence_kills_total                 counter (exec children the fence keeper
//                                               killed at the fence's deadline)
//   leasehold_lease_leader{lease,group}         gauge (per lease of the agent: 1 leading)
//   leasehold_lease_term{lease,group}           gauge (per lease: the term it knows)
//   leasehold_lease_creation_hold{lease,group}  gauge (per lease: as leasehold_creation_hold)
//   leasehold_lease_module_restarts_total{lease,group,module}  counter (per lease's module)
//   leasehold_lease_module_running{lease,group,module}         gauge (per lease's module)
//   leasehold_balance_members{group}            gauge (settled members it counts)
//   leasehold_balance_assigned{group}           gauge (leases assigned to it)
//   leasehold_balance_moves_total{group}        counter (leases it was told to hand over)
//   process_*                                   process_metrics.hpp
class metrics {
public:
  /// Thread-safe; counts events.
  event_sink sink();
  void record(const runtime_event& e);
  /// leasehold_build_info's labels (default: this build's version, "kubernetes").
  void set_build_info(std::string version, std::string backend);
  /// The timings the agent runs with (leasehold_lease_duration_seconds,
  /// leasehold_renew_deadline_seconds; default: election_timings{}).
  void set_timings(const election_timings& t);

  /// The exposition text. `st` is the runner's status (nullopt when the
  /// runner did not answer: the status-based series are left out).
  /// `leases`/`groups`: every lease's and group's state (lease_set), for
  /// the per-lease and per-group series; the module series then cover
  /// every lease's modules.
  std::string render(const std::optional<runner_status>& st,
                     const std::vector<lease_state>& leases = {},
                     const std::vector<group_state>& groups = {}) const;

  static constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

private:
  static constexpr std::array<double, 13> buckets
    = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  mutable std::mutex mtx_;
  std::int64_t transitions_ = 0;
  std::array<std::uint64_t, buckets.size()> renew_buckets_{};   // non-cumulative
  std::uint64_t renew_count_ = 0;
  double renew_sum_ = 0;
  std::map<std::string, std::uint64_t> api_errors_;
  std::map<std::string, std::uint64_t> lost_races_;
  std::string version_ = LEASEHOLD_VERSION;
  std::string backend_ = "kubernetes";
  election_timings timings_;
  std::uint64_t fence_kills_ = 0;
  std::uint64_t voluntary_handovers_ = 0;
  std::map<std::string, std::uint64_t> lease_handovers_;   // lease name -> its voluntary handovers
};

/// Escapes a label value (backslash, double quote, newline).
std::string escape_label(const std::string& v);

} // namespace leasehold::agent
