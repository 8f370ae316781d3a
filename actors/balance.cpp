#include "actors/balance.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace leasehold {

namespace {

/// FNV-1a over the bytes, then splitmix64's finaliser: fixed, portable and
/// well mixed, so a member's ranks of the leases are independent of another's.
std::uint64_t hash_bytes(const std::string& a, const std::string& b) {
  std::uint64_t h = 1469598103934665603ull;
  auto eat = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (unsigned char c : a)
    eat(c);
  eat(0);   // "ab"+"c" and "a"+"bc" differ
  for (unsigned char c : b)
    eat(c);
  h += 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

/// `a` ranks before `b` for `lease`: the higher score, ties by identity.
bool ranks_before(const std::string& lease, const std::string& a, const std::string& b) {
  auto sa = rendezvous_score(lease, a), sb = rendezvous_score(lease, b);
  return sa != sb ? sa > sb : a < b;
}

} // namespace

std::uint64_t rendezvous_score(const std::string& lease, const std::string& member) {
  return hash_bytes(lease, member);
}

std::string lease_list_fingerprint(std::vector<std::string> leases) {
  std::sort(leases.begin(), leases.end());
  leases.erase(std::unique(leases.begin(), leases.end()), leases.end());
  std::uint64_t h = 0;
  for (auto& l : leases)
    h = hash_bytes(std::to_string(h), l);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::to_string(leases.size()) + "/" + hex;
}

std::map<std::string, std::string>
balance_assignment(const std::vector<std::string>& lease_list, std::vector<balance_member> members,
                   const std::map<std::string, std::string>& holders,
                   const std::map<std::string, std::string>& pinned) {
  std::map<std::string, std::string> out;
  std::set<std::string> leases(lease_list.begin(), lease_list.end());
  std::sort(members.begin(), members.end(), [](auto& a, auto& b) {
    return a.joined != b.joined ? a.joined < b.joined : a.identity < b.identity;
  });
  members.erase(std::unique(members.begin(), members.end(),
                            [](auto& a, auto& b) { return a.identity == b.identity; }),
                members.end());
  if (members.empty() || leases.empty())
    return out;

  // 1. Quotas: the r who joined first lead one more.
  auto m = leases.size(), n = members.size();
  std::map<std::string, std::size_t> room;
  for (std::size_t i = 0; i < n; ++i)
    room[members[i].identity] = m / n + (i < m % n ? 1 : 0);

  // 2. Keep: each member its held leases, up to its quota, best ranked first.
  std::map<std::string, std::vector<std::string>> held;
  auto pinned_to = [&](const std::string& lease) {
    auto p = pinned.find(lease);
    return p != pinned.end() && room.count(p->second) ? p->second : std::string();
  };
  for (auto& lease : leases) {
    auto h = holders.find(lease);
    auto p = pinned_to(lease);
    if (!p.empty())
      held[p].push_back(lease);
    else if (h != holders.end() && room.count(h->second))
      held[h->second].push_back(lease);
  }
  for (auto& [member, mine] : held) {
    std::sort(mine.begin(), mine.end(), [&, &member = member](auto& a, auto& b) {
      bool pa = pinned_to(a) == member, pb = pinned_to(b) == member;
      if (pa != pb)
        return pa;
      auto sa = rendezvous_score(a, member), sb = rendezvous_score(b, member);
      return sa != sb ? sa > sb : a < b;
    });
    for (auto& lease : mine) {
      if (room[member] == 0)
        break;
      out[lease] = member;
      --room[member];
    }
  }

  // 3. Give: every other lease, in name order, to the member with room that
  // ranks it highest.
  for (auto& lease : leases) {
    if (out.count(lease))
      continue;
    const std::string* best = nullptr;
    for (auto& [member, left] : room)
      if (left > 0 && (!best || ranks_before(lease, member, *best)))
        best = &member;
    out[lease] = *best;   // room sums to the leases not yet given
    --room[*best];
  }
  return out;
}

std::vector<balance_member> settled_members(const std::vector<observed_member>& seen,
                                            std::chrono::steady_clock::time_point now,
                                            std::chrono::steady_clock::duration settle) {
  std::vector<balance_member> out;
  for (auto& s : seen)
    if (now - s.present_since >= settle)
      out.push_back(s.member);
  return out;
}

} // namespace leasehold
