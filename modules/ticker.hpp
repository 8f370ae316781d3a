// ticker: reports `tick <n> term <term>` every interval while it runs
// (settings: cmd/leasehold/README.md). A leader-only ticker skips a tick,
// saying so, when its fence has (nearly) expired. Ticks use delayed_send,
// so the ticker runs exactly on CAF's simulated clock in tests.
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
