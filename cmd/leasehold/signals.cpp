#include "cmd/leasehold/signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "transport/thread_name.hpp"

namespace leasehold::agent {

namespace {

std::mutex mtx;
std::condition_variable cv;
int received = 0;

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

} // namespace

void block_shutdown_signals() {
  auto set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A closed client socket must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

void start_signal_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::thread([] {
      name_this_thread("lh.signal");
      auto set = shutdown_set();
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
          continue;
        std::lock_guard<std::mutex> guard(mtx);
        if (received != 0)
          _exit(130);
        received = sig;
        cv.notify_all();
      }
    }).detach();
  });
}

int wait_for_shutdown_signal() {
  std::unique_lock<std::mutex> lock(mtx);
  cv.wait(lock, [] { return received != 0; });
  return received;
}

} // namespace leasehold::agent
