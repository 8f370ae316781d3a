// Names the calling thread (top -H, perf), cut to the kernel's 15 characters:
// an unnamed thread shows its creator's name.
#pragma once

#include <pthread.h>

#include <string>

namespace leasehold {

inline void name_this_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

} // namespace leasehold
