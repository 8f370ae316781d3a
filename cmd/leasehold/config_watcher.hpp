// Polls the config file on its own thread (never a scheduler thread) and
// hands a changed content to `on_change`; an unreadable file is reported
// once to `on_missing` and the running config stays.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace leasehold::agent {

class config_watcher {
public:
  using callback = std::function<void(const std::string& content)>;

  /// `initial` is the content already applied (no callback for it).
  config_watcher(std::string path, std::string initial, std::chrono::milliseconds interval,
                 callback on_change, std::function<void()> on_missing = {});
  ~config_watcher();   // stops
  config_watcher(const config_watcher&) = delete;
  config_watcher& operator=(const config_watcher&) = delete;

  void stop();

private:
  std::string path_;
  std::string last_;
  std::chrono::milliseconds interval_;
  callback on_change_;
  std::function<void()> on_missing_;
  bool missing_ = false;   // said once until the file is readable again
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace leasehold::agent
