// Names the calling thread (Linux: /proc/PID/task/TID/comm, top -H, perf),
// so that a look at a running agent tells its threads apart. A thread
// inherits its creator's name, so a thread that is not named shows whoever
// started it. Names are cut to 15 characters (the kernel's limit).
#pragma once

#include <pthread.h>

#include <string>

namespace leasehold {

inline void name_this_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

} // namespace leasehold
