#include "transport/watch_fanout.hpp"

#include <algorithm>

namespace leasehold {

void watch_fanout::add(const std::string& name, lease_watch_subscriber who) {
  std::lock_guard<std::mutex> g(mx_);
  by_name_[name].push_back(who);
  ++count_;
  if (health_known_)
    caf::anon_send(who, health_);
}

std::size_t watch_fanout::remove(const caf::actor_addr& who) {
  std::lock_guard<std::mutex> g(mx_);
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    auto& v = it->second;
    auto before = v.size();
    v.erase(std::remove_if(v.begin(), v.end(), [&](const lease_watch_subscriber& a) { return a.address() == who; }),
            v.end());
    count_ -= before - v.size();
    it = v.empty() ? by_name_.erase(it) : std::next(it);
  }
  return count_;
}

std::size_t watch_fanout::size() const {
  std::lock_guard<std::mutex> g(mx_);
  return count_;
}

std::vector<std::string> watch_fanout::names() const {
  std::lock_guard<std::mutex> g(mx_);
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (auto& [name, subs] : by_name_)
    out.push_back(name);
  return out;
}

bool watch_fanout::follows(const std::string& name) const {
  std::lock_guard<std::mutex> g(mx_);
  return by_name_.count(name) > 0;
}

void watch_fanout::to_all(const lease_watch_event& ev) {
  std::lock_guard<std::mutex> g(mx_);
  health_ = ev;
  health_known_ = true;
  for (auto& [name, subs] : by_name_)
    for (auto& s : subs)
      caf::anon_send(s, ev);
}

void watch_fanout::to(const std::string& name, const lease_watch_event& ev) {
  std::lock_guard<std::mutex> g(mx_);
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    return;
  for (auto& s : it->second)
    caf::anon_send(s, ev);
}

} // namespace leasehold
