#include "cmd/leasehold/config_watcher.hpp"

#include "transport/kube/kube_config.hpp"
#include "transport/thread_name.hpp"

namespace leasehold::agent {

config_watcher::config_watcher(std::string path, std::string initial,
                               std::chrono::milliseconds interval, callback on_change,
                               std::function<void()> on_missing)
  : path_(std::move(path)), last_(std::move(initial)), interval_(interval),
    on_change_(std::move(on_change)), on_missing_(std::move(on_missing)) {
  thread_ = std::thread([this] {
    name_this_thread("lh.config");
    std::unique_lock<std::mutex> lock(mtx_);
    while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      // Reading the file, not its mtime, also catches same-size rewrites within
      // the mtime resolution and ConfigMap symlink swaps.
      auto content = read_text_file(path_);
      if (!content && !missing_ && on_missing_)
        on_missing_();
      missing_ = !content;
      if (content && *content != last_) {
        last_ = *content;
        on_change_(*content);
      }
      lock.lock();
    }
  });
}

config_watcher::~config_watcher() {
  stop();
}

void config_watcher::stop() {
  {
    std::lock_guard<std::mutex> guard(mtx_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

} // namespace leasehold::agent
