#include "sim_groups.hpp"

#include <algorithm>
#include <map>

namespace leasehold::sim {

namespace {

long long ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
}

std::string name(std::size_t k) {
  return "sim-lock-" + std::to_string(k);
}

std::string replica(std::size_t i) {
  return "replica-" + std::to_string(i);
}

/// Every lease runs on a member, every member runs floor or ceil of M/N.
bool balanced(const std::vector<std::optional<std::size_t>>& leaders, const std::set<std::size_t>& members,
              std::string* why = nullptr) {
  if (members.empty())
    return false;
  std::map<std::size_t, std::size_t> load;
  for (auto m : members)
    load[m] = 0;
  for (std::size_t k = 0; k < leaders.size(); ++k) {
    if (!leaders[k] || !members.count(*leaders[k])) {
      if (why)
        *why = name(k) + (leaders[k] ? " runs on " + replica(*leaders[k]) + ", not a member" : " runs nowhere");
      return false;
    }
    ++load[*leaders[k]];
  }
  auto m = leaders.size(), n = members.size();
  auto lo = m / n, hi = (m + n - 1) / n;
  for (auto& [who, l] : load)
    if (l < lo || l > hi) {
      if (why) {
        *why = "loads";
        for (auto& [w, x] : load)
          *why += " " + replica(w) + "=" + std::to_string(x);
        *why += " (each must be " + std::to_string(lo) + " or " + std::to_string(hi) + ")";
      }
      return false;
    }
  return true;
}

} // namespace

void group_judge::begin(time_point from) {
  active_ = true;
  from_ = from;
  changed_at_ = from;
  due_ = from + bound_;
  settled_ = false;
  change_.reset();
  balanced_since_.reset();
  seen_.assign(leases_, {});
  unowned_since_.assign(leases_, std::nullopt);
  if (last_.size() != leases_)
    last_.assign(leases_, std::nullopt);
}

void group_judge::change(time_point at, std::size_t who, bool join, std::size_t members_before) {
  if (!active_)
    return;
  if (settled_)   // judged balanced since the last change: its moves are judged
    change_ = pending_change{who, join, members_before};
  else
    change_.reset();
  seen_.assign(leases_, {});
  settled_ = false;
  balanced_since_.reset();
  changed_at_ = std::max(at, from_);
  due_ = changed_at_ + bound_;
}

void group_judge::observe(time_point now, const std::vector<std::optional<std::size_t>>& leaders,
                          const std::set<std::size_t>& members) {
  bool judging = active_ && now >= from_;
  if (members.empty())
    members_since_.reset();
  else if (!members_since_)
    members_since_ = now;
  for (std::size_t k = 0; k < leases_; ++k) {
    auto& since = unowned_since_[k];
    if (leaders[k]) {
      if (since && judging)
        max_unowned = std::max(max_unowned, now - counted_from(*since));
      since.reset();
      if (last_[k] && *last_[k] != *leaders[k] && settled_ && judging)
        violations.push_back(name(k) + " moved from " + replica(*last_[k]) + " to " + replica(*leaders[k])
                             + " while the group was balanced and its membership unchanged (churn)");
      if (!settled_)
        seen_[k].insert(*leaders[k]);
      last_[k] = leaders[k];
    } else if (!since) {
      since = now;
    } else if (judging && members_since_ && now - counted_from(*since) > bound_) {
      violations.push_back(name(k) + " ran nowhere for " + std::to_string(ms(now - counted_from(*since)))
                           + "ms while a member was live and the store reachable (bound "
                           + std::to_string(ms(bound_)) + "ms: lease duration + group slack)");
    }
  }
  if (!active_)
    return;
  if (balanced(leaders, members)) {
    if (!balanced_since_)
      balanced_since_ = now;
  } else {
    balanced_since_.reset();
  }
  if (due_ && now >= *due_)
    judge_balance(now, leaders, members);
}

void group_judge::judge_balance(time_point, const std::vector<std::optional<std::size_t>>& leaders,
                                const std::set<std::size_t>& members) {
  due_.reset();
  if (members.empty()) {   // nobody to run anything: nothing to judge
    change_.reset();
    return;
  }
  std::string why;
  if (!balanced(leaders, members, &why)) {
    violations.push_back("the group is not balanced " + std::to_string(ms(bound_))
                         + "ms after its last membership change (" + std::to_string(members.size())
                         + " members): " + why);
    return;
  }
  ++balanced_judgements;
  if (balanced_since_)
    max_to_balance = std::max(max_to_balance, *balanced_since_ - changed_at_);
  if (change_) {
    auto& c = *change_;
    std::size_t moved = 0;
    for (std::size_t k = 0; k < leases_; ++k) {
      bool moved_k = false;
      for (auto who : seen_[k]) {
        if (snapshot_[k] && who == *snapshot_[k])
          continue;
        moved_k = true;
        if (c.join && who != c.who)
          violations.push_back(name(k) + " moved to " + replica(who) + " on the join of " + replica(c.who)
                               + " (a join moves leases only to the joiner)");
        if (!c.join && snapshot_[k] && *snapshot_[k] != c.who)
          violations.push_back(name(k) + " moved from " + replica(*snapshot_[k]) + " to " + replica(who)
                               + " when " + replica(c.who) + " left (a leave moves only the leaver's leases)");
      }
      moved += moved_k ? 1 : 0;
    }
    max_moves = std::max(max_moves, moved);
    auto cap = (leases_ + c.members_before) / (c.members_before + 1);   // ceil(M/(N+1))
    if (c.join && moved > cap)
      violations.push_back("the join of " + replica(c.who) + " moved " + std::to_string(moved) + " leases (at most ceil("
                           + std::to_string(leases_) + "/" + std::to_string(c.members_before + 1)
                           + ") = " + std::to_string(cap) + ")");
    change_.reset();
  }
  snapshot_ = leaders;
  settled_ = true;
}

group_judge::time_point group_judge::counted_from(time_point since) const {
  return std::max({since, from_, members_since_.value_or(since)});
}

std::optional<group_judge::time_point> group_judge::next_deadline() const {
  if (!active_)
    return std::nullopt;
  std::optional<time_point> next = due_;
  for (auto& since : unowned_since_)
    if (since && members_since_) {
      auto at = counted_from(*since) + bound_ + caf::timespan{1};
      next = next ? std::min(*next, at) : at;
    }
  return next;
}

} // namespace leasehold::sim
