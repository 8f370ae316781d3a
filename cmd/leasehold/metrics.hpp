// Prometheus metrics (text format 0.0.4), counted from runtime events and
// read from the runner's status at scrape time.
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

// The series: cmd/leasehold/README.md ("/metrics"); their HELP lines say what each means.
class metrics {
public:
  /// Thread-safe; counts events.
  event_sink sink();
  void record(const runtime_event& e);
  /// leasehold_build_info's labels (default: this build's version, "kubernetes").
  void set_build_info(std::string version, std::string backend);
  /// The timings the agent runs with (default: election_timings{}).
  void set_timings(const election_timings& t);

  /// The exposition text. `st` is the runner's status (nullopt: the series
  /// based on it are left out); `leases`/`groups` give the per-lease and
  /// per-group series.
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

} // namespace leasehold::agent
