// Reporting module_output lines: a copyable reporter that any thread may use
// (the event sink is thread-safe and non-blocking by contract).
#pragma once

#include <cstdint>
#include <string>

#include "leasehold/modules.hpp"
#include "leasehold/events.hpp"

namespace leasehold::modules {

class output_reporter {
public:
  output_reporter() = default;
  explicit output_reporter(const module_context& ctx);

  /// Reports one event_type::module_output line; `reason` optionally tags it
  /// (exec: "stdout" / "stderr"). Does nothing without a sink.
  void line(std::string detail, std::string reason = {}) const;

private:
  event_emitter emit_;
  std::string module_;
  std::string holder_;
  std::int64_t term_ = -1;
  bool leader_only_ = false;
};

} // namespace leasehold::modules
