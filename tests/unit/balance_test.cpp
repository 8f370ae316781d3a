// The balance groups' assignment rule (actors/balance.hpp): every member
// leads floor or ceil of M/N, a join moves at most ceil(M/(N+1)) leases and
// all to the joiner, a leave moves only the leaver's, and a carried-out
// assignment is a fixed point. Checked on fixed cases and on every (M, N)
// up to 40 x 9 with seeded identities.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "actors/balance.hpp"

using namespace leasehold;
using assignment = std::map<std::string, std::string>;

namespace {

std::vector<std::string> lease_names(std::size_t m) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < m; ++i)
    out.push_back("module-" + std::to_string(i));
  return out;
}

std::vector<balance_member> members_named(const std::vector<std::string>& ids) {
  std::vector<balance_member> out;
  std::int64_t t = 100;
  for (auto& id : ids)
    out.push_back({id, t++});
  return out;
}

std::map<std::string, std::size_t> loads(const assignment& a) {
  std::map<std::string, std::size_t> out;
  for (auto& [lease, member] : a)
    ++out[member];
  return out;
}

/// Leases whose assignee differs.
std::vector<std::string> moved(const assignment& before, const assignment& after) {
  std::vector<std::string> out;
  for (auto& [lease, member] : after) {
    auto b = before.find(lease);
    if (b == before.end() || b->second != member)
      out.push_back(lease);
  }
  return out;
}

/// Carries an assignment out: holders are who it names; and checks that
/// computing it again changes nothing.
assignment settle(const std::vector<std::string>& leases, const std::vector<balance_member>& members,
                  assignment holders) {
  auto a = balance_assignment(leases, members, holders);
  REQUIRE(balance_assignment(leases, members, a) == a);
  return a;
}

void check_balanced(const assignment& a, std::size_t m, const std::vector<balance_member>& members) {
  REQUIRE(a.size() == m);
  auto n = members.size();
  auto l = loads(a);
  for (auto& mem : members) {
    auto got = l[mem.identity];
    CHECK(got >= m / n);
    CHECK(got <= (m + n - 1) / n);
  }
  std::size_t named = 0;
  for (auto& [who, count] : l)
    named += std::count_if(members.begin(), members.end(),
                           [&who = who](auto& mem) { return mem.identity == who; });
  CHECK(named == l.size());   // no lease goes to a non-member
}

} // namespace

TEST_CASE("12 leases over 3 members: 4 each, from nothing and from one holder of all") {
  auto leases = lease_names(12);
  auto members = members_named({"agent-a", "agent-b", "agent-c"});
  auto fresh = settle(leases, members, {});
  check_balanced(fresh, 12, members);
  assignment all_a;
  for (auto& l : leases)
    all_a[l] = "agent-a";
  auto from_one = settle(leases, members, all_a);
  check_balanced(from_one, 12, members);
  // agent-a keeps 4 of its 12: only 8 move.
  CHECK(moved(all_a, from_one).size() == 8);
}

TEST_CASE("the same answer whatever the order of the inputs, duplicates counted once") {
  auto leases = lease_names(10);
  auto members = members_named({"a", "b", "c", "d"});
  auto a = balance_assignment(leases, members, {});
  auto shuffled_leases = leases;
  std::reverse(shuffled_leases.begin(), shuffled_leases.end());
  shuffled_leases.push_back(leases[3]);
  auto shuffled_members = members;
  std::reverse(shuffled_members.begin(), shuffled_members.end());
  shuffled_members.push_back(members[1]);
  CHECK(balance_assignment(shuffled_leases, shuffled_members, {}) == a);
}

TEST_CASE("the extra leases go to the members that joined first") {
  // 10 over 4: two lead 3, two lead 2; the first two to join lead 3.
  auto members = members_named({"zed", "amy", "kim", "bob"});   // joined in this order
  auto l = loads(settle(lease_names(10), members, {}));
  CHECK(l["zed"] == 3);
  CHECK(l["amy"] == 3);
  CHECK(l["kim"] == 2);
  CHECK(l["bob"] == 2);
}

TEST_CASE("no members: nobody is assigned; a holder that is not a member keeps nothing") {
  CHECK(balance_assignment(lease_names(3), {}, {}).empty());
  auto a = balance_assignment(lease_names(3), members_named({"b"}), {{"module-0", "gone"}});
  CHECK(a.at("module-0") == "b");
}

TEST_CASE("every (M, N) up to 40 x 9: balanced, a fixed point, joins and leaves within the bounds") {
  std::mt19937_64 rng(20261204);
  for (std::size_t m = 1; m <= 40; ++m) {
    for (std::size_t n = 1; n <= 9; ++n) {
      CAPTURE(m);
      CAPTURE(n);
      auto leases = lease_names(m);
      std::vector<std::string> ids;
      for (std::size_t i = 0; i < n + 1; ++i)
        ids.push_back("replica-" + std::to_string(rng() % 100000));
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      if (ids.size() < n + 1)
        continue;   // a rare collision: the next (m, n) has fresh names
      std::shuffle(ids.begin(), ids.end(), rng);
      auto all = members_named(ids);   // joined in shuffled order
      std::vector<balance_member> old(all.begin(), all.begin() + static_cast<long>(n));

      auto before = settle(leases, old, {});
      check_balanced(before, m, old);

      // A join (the newest member): at most ceil(M/(N+1)) move, all to it.
      auto joined = settle(leases, all, before);
      check_balanced(joined, m, all);
      auto to_joiner = moved(before, joined);
      CHECK(to_joiner.size() <= (m + n) / (n + 1));
      for (auto& l : to_joiner)
        CHECK(joined.at(l) == all.back().identity);

      // A leave (any member, here a random one): only its leases move.
      if (n < 2)
        continue;
      auto leaver = old[rng() % n].identity;
      std::vector<balance_member> rest;
      for (auto& mem : old)
        if (mem.identity != leaver)
          rest.push_back(mem);
      auto after = settle(leases, rest, before);
      check_balanced(after, m, rest);
      for (auto& l : moved(before, after))
        CHECK(before.at(l) == leaver);
    }
  }
}

TEST_CASE("a lease released mid-move goes to the member with room, not back") {
  // 12 over 3 (4 each), then a 4th joins: each old member is over its quota
  // of 3 by one. While one released lease is free, it is assigned to the
  // joiner (the only member with room), and the old holder keeps its 3.
  auto leases = lease_names(12);
  auto three = members_named({"a", "b", "c"});
  auto before = settle(leases, three, {});
  auto four = three;
  four.push_back({"d", 200});
  auto target = balance_assignment(leases, four, before);
  auto moving = moved(before, target);
  REQUIRE(moving.size() == 3);
  auto mid = before;
  mid[moving[0]] = "";   // released by its old holder, not yet taken
  CHECK(balance_assignment(leases, four, mid) == target);
}

TEST_CASE("settled members: present for the settle time; a flapping member never counts") {
  using namespace std::chrono;
  auto t0 = steady_clock::time_point{} + hours(1);
  std::vector<observed_member> seen{{{"old", 1}, t0 - seconds(5)},
                                    {{"edge", 2}, t0 - seconds(1)},
                                    {{"new", 3}, t0 - milliseconds(999)}};
  auto got = settled_members(seen, t0, seconds(1));
  REQUIRE(got.size() == 2);
  CHECK(got[0].identity == "old");
  CHECK(got[1].identity == "edge");
}

TEST_CASE("a yielded lease pinned to its successor stays there: one of the successor's others "
          "comes back instead (a swap), and once carried out that is a fixed point") {
  auto leases = lease_names(12);
  auto three = members_named({"a", "b", "c"});
  auto before = settle(leases, three, {});
  for (auto& [lease, holder] : before) {
    if (holder != "a")
      continue;
    // a yields `lease` to b: free (released) and pinned to b.
    auto mid = before;
    mid[lease] = "";
    auto pinned = assignment{{lease, "b"}};
    auto target = balance_assignment(leases, three, mid, pinned);
    CHECK(target[lease] == "b");
    auto moving = moved(before, target);
    CHECK(moving.size() == 2);   // the yielded lease to b, one of b's to a
    for (auto& m : moving)
      CHECK((m == lease || (before.at(m) == "b" && target.at(m) == "a")));
    // Carried out, the pin no longer matters: nothing moves back.
    CHECK(balance_assignment(leases, three, target) == target);
    // Unpinned, the free lease would go straight back to a (its only room).
    CHECK(balance_assignment(leases, three, mid).at(lease) == "a");
    // A pin to a non-member is ignored.
    CHECK(balance_assignment(leases, three, mid, {{lease, "zed"}}) == balance_assignment(leases, three, mid));
  }
}
