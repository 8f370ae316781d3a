#include "transport/watch_fanout.hpp"

#include <algorithm>

namespace leasehold {

void watch_fanout::add(const std::string& name, lease_watch_subscriber who) {
  std::lock_guard<std::mutex> g(mx_);
  auto it = by_name_.try_emplace(name).first;
  it->second.push_back(who);
  by_subscriber_.emplace(who.address(), it);
  ++count_;
  if (health_known_)
    caf::anon_send(who, health_);
}

std::size_t watch_fanout::remove(const caf::actor_addr& who) {
  std::lock_guard<std::mutex> g(mx_);
  auto [first, last] = by_subscriber_.equal_range(who);
  std::vector<by_name_map::iterator> entries;   // each once (`who` may follow a name twice)
  for (auto sub = first; sub != last; ++sub)
    if (std::find(entries.begin(), entries.end(), sub->second) == entries.end())
      entries.push_back(sub->second);
  by_subscriber_.erase(first, last);
  for (auto it : entries) {
    auto& v = it->second;
    auto before = v.size();
    examined_ += before;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const lease_watch_subscriber& a) { return a.address() == who; }),
            v.end());
    count_ -= before - v.size();
    if (v.empty())
      by_name_.erase(it);   // no subscription refers to it any more
  }
  return count_;
}

std::size_t watch_fanout::examined() const {
  std::lock_guard<std::mutex> g(mx_);
  return examined_;
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

bool watch_fanout::followed_by_one(const std::string& name) const {
  std::lock_guard<std::mutex> g(mx_);
  auto it = by_name_.find(name);
  if (it == by_name_.end() || it->second.empty())
    return false;
  auto first = it->second.front().address();
  return std::all_of(it->second.begin(), it->second.end(),
                     [&](const lease_watch_subscriber& s) { return s.address() == first; });
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
