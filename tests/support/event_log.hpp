// Test helper: a thread-safe event sink that records module_output lines and
// lets a test wait (bounded) for one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "leasehold/events.hpp"

namespace leasehold::test {

class event_log {
public:
  event_sink sink() {
    return [this](const runtime_event& ev) {
      {
        std::lock_guard<std::mutex> guard{mtx_};
        events_.push_back(ev);
      }
      cv_.notify_all();
    };
  }

  std::vector<runtime_event> events() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return events_;
  }

  std::vector<std::string> details() const {
    std::vector<std::string> out;
    for (auto& ev : events())
      out.push_back(ev.detail);
    return out;
  }

  /// Lines whose detail contains `text`.
  std::size_t count(const std::string& text) const {
    std::size_t n = 0;
    for (auto& d : details())
      n += d.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

  /// The first event whose detail contains `text`, waiting at most `timeout`.
  std::optional<runtime_event> wait_for(const std::string& text,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock{mtx_};
    std::optional<runtime_event> found;
    cv_.wait_for(lock, timeout, [&] {
      for (auto& ev : events_)
        if (ev.detail.find(text) != std::string::npos) {
          found = ev;
          return true;
        }
      return false;
    });
    return found;
  }

private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<runtime_event> events_;
};

} // namespace leasehold::test
