// The journal (--journal FILE): one JSON object per line, flushed per line,
// for the safety checker (leader-only intervals of replicas never overlap):
//   {"mono_ns":..., "wall":"...Z", "identity":"a", "event":"module_started",
//    "lease":"default/leasehold", "term":3, "module":"tick", "leader_only":true}
// ("lease": the event's lease, ns/name; an agent whose modules have leases
// of their own journals each lease's terms with its name.)
// Events: term_acquired, term_lost, lease_released, module_started,
// module_stopped, module_killed, module_crashed, module_output, and renewed.
// term_acquired and renewed carry the leader's fence, "valid_until_ns"
// (CLOCK_MONOTONIC ns, from the elector), for scripts/check-journal.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "leasehold/events.hpp"

namespace leasehold::agent {

class journal {
public:
  /// Opens (appends to) `path`; check ok() afterwards.
  journal(const std::string& path, std::string identity);
  ~journal();
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  bool ok() const { return file_ != nullptr; }
  /// Thread-safe.
  event_sink sink();

private:
  void on_event(const runtime_event& e);

  std::mutex mtx_;
  std::FILE* file_;
  std::string identity_;
};

} // namespace leasehold::agent
