// Test helper: which processes are alive, read from /proc. Zombies do not
// count: an orphan that was SIGKILLed is reaped by init, on init's schedule.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <sys/types.h>

namespace leasehold::modules::test {

/// The state letter and process group of `pid` ("pid (comm) state ppid pgrp
/// ...": comm may contain spaces, so parse after the last ')'); false when
/// there is no such process.
inline bool proc_stat(const std::filesystem::path& dir, char& state, long& pgrp) {
  std::ifstream in{dir / "stat"};
  std::string stat;
  if (!std::getline(in, stat))
    return false;
  std::istringstream rest{stat.substr(stat.rfind(')') + 1)};
  long ppid = 0;
  return static_cast<bool>(rest >> state >> ppid >> pgrp);
}

inline bool pid_alive(pid_t pid) {
  char state = 0;
  long pgrp = 0;
  return proc_stat("/proc/" + std::to_string(pid), state, pgrp) && state != 'Z' && state != 'X';
}

/// True when a process of group `pgid` is alive.
inline bool group_alive(pid_t pgid) {
  for (auto& entry : std::filesystem::directory_iterator("/proc")) {
    char state = 0;
    long pgrp = 0;
    if (proc_stat(entry.path(), state, pgrp) && pgrp == pgid && state != 'Z' && state != 'X')
      return true;
  }
  return false;
}

/// Polls `pred` every 2 ms for at most `timeout`; true once it holds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred())
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

} // namespace leasehold::modules::test
