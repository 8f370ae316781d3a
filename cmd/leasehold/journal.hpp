// The journal (--journal FILE) for the safety checker (leader-only intervals
// of replicas never overlap); its lines: docs/design.md, 'The journal'.
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
  std::mutex mtx_;
  std::FILE* file_;
  std::string identity_;
};

} // namespace leasehold::agent
