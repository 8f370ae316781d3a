// Which processes are alive, read from /proc, and which programs are on
// PATH. Zombies do not count as alive: an orphan that was SIGKILLed is
// reaped by init, on init's schedule.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/types.h>

namespace leasehold::test {

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
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    char state = 0;
    long pgrp = 0;
    if (proc_stat(entry.path(), state, pgrp) && pgrp == pgid && state != 'Z' && state != 'X')
      return true;
  }
  return false;
}

/// True when `name` is a program on PATH.
inline bool command_exists(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

} // namespace leasehold::test
