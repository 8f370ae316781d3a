// ticker: reports a module_output line every interval while it runs.
//
// settings: {"interval_ms": int > 0 (default 1000), "message": string (optional)}
// Each tick reports `tick <n> term <term>` (followed by `: <message>` when
// set). A module_settings message applies the new settings at once: the next
// tick comes one new interval after it. A leader-only ticker checks its
// fencing token before each tick and skips (reporting it) when the fence has
// expired, e.g. after the process was paused past its renew deadline. Ticks use delayed_send, so the
// ticker runs exactly on CAF's simulated clock in tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "leasehold/modules.hpp"
#include "modules/settings.hpp"

namespace leasehold::modules {

struct ticker_settings {
  std::int64_t interval_ms = 1000;
  std::optional<std::string> message;
};

parsed<ticker_settings> parse_ticker_settings(const nlohmann::json& settings);

/// The "ticker" module type (leader-only by default).
module_type ticker_module();

} // namespace leasehold::modules
