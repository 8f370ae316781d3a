// What the watch tests share: a scripted streaming answer per connection,
// and collecting the events a watch sends its subscriber.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <httplib.h>

#include "leasehold/lease_transport.hpp"

namespace leasehold::test {

/// What one connection gets: chunks to send, then the end, a stall or a cut.
struct script {
  std::vector<std::string> chunks;
  bool stall = false;   // keep the connection open, send nothing more (bounded)
  bool cut = false;     // drop the connection without ending the chunked body
};

/// The next scripted answer; once the scripts are used up, `last` (the
/// quiet stream a watch ends up on).
inline script next_script(std::deque<script>& scripts, script last) {
  if (scripts.empty())
    return last;
  auto s = std::move(scripts.front());
  scripts.pop_front();
  return s;
}

/// Answers with `s` as a chunked stream; a stall lasts at most 1 s, or
/// until `closing`.
inline void play(httplib::Response& res, script s, const std::atomic<bool>& closing) {
  res.set_chunked_content_provider("application/json", [s, &closing](std::size_t,
                                                                     httplib::DataSink& sink) {
    for (auto& c : s.chunks)
      sink.write(c.data(), c.size());
    if (s.cut)
      return false;
    if (s.stall)
      for (int i = 0; i < 100 && !closing; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sink.done();
    return true;
  });
}

/// The subscriber's events until `n` arrived or `rounds` * 25 ms passed.
inline std::vector<lease_watch_event> collect(caf::scoped_actor& self, std::size_t n,
                                              int rounds = 200) {
  std::vector<lease_watch_event> out;
  for (int i = 0; out.size() < n && i < rounds; ++i)
    self->receive([&](lease_watch_event& ev) { out.push_back(std::move(ev)); },
                  caf::after(std::chrono::milliseconds(25)) >> [] {});
  return out;
}

} // namespace leasehold::test
