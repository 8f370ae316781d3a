// Waiting in real time, for tests on real processes and servers.
//
// - eventually(pred, limit): polls until `pred` holds or `limit` passes.
// - load_slack: what every upper bound a test asserts on real time adds to
//   what the code promises. The tests run on 2 cores shared with builds and
//   other tests: a runnable thread or process can wait hundreds of
//   milliseconds for a core. Where precision matters, a test asserts the
//   order of events (killed after the deadline, acquired before the old
//   term could have expired) instead of a tight duration; speed is
//   measured in bench/, never asserted.
#pragma once

#include <chrono>
#include <thread>

namespace leasehold::test {

constexpr std::chrono::milliseconds load_slack{2000};

/// Polls `pred` every `every` for at most `limit`; true once it holds (it
/// is asked once more at the limit).
template <class Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred())
      return true;
    std::this_thread::sleep_for(every);
  }
  return static_cast<bool>(pred());
}

} // namespace leasehold::test
