#include "cmd/leasehold/lease_layout.hpp"

#include <algorithm>
#include <map>

#include "cmd/leasehold/agent_config.hpp"

namespace leasehold::agent {

namespace {
/// A group's name is a LeaseCandidate label value and the prefix of its
/// members' object names: a DNS label, 63 characters at most.
constexpr std::size_t max_group_length = 63;
} // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> lease_layout::groups() const {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (auto& p : others) {
    if (p.group.empty())
      continue;
    auto it = std::find_if(out.begin(), out.end(), [&](auto& g) { return g.first == p.group; });
    if (it == out.end())
      it = out.insert(out.end(), {p.group, {}});
    it->second.push_back(p.lease);
  }
  return out;
}

bool lease_layout::same_leases(const lease_layout& o) const {
  if (others.size() != o.others.size() || settle_ms != o.settle_ms)
    return false;
  std::map<std::string, std::string> mine;
  for (auto& p : others)
    mine[p.lease] = p.group;
  for (auto& p : o.others)
    if (auto it = mine.find(p.lease); it == mine.end() || it->second != p.group)
      return false;
  return true;
}

std::vector<std::string> plan_leases(const module_config& modules, const std::string& main_lease,
                                     lease_layout& out) {
  std::vector<std::string> errs;
  lease_layout layout;
  layout.main.lease = main_lease;
  std::map<std::string, std::size_t> index;   // lease -> position in layout.others
  std::map<std::string, std::string> first;   // lease -> path of the module that placed it
  std::map<std::string, std::string> settle_at;   // group -> path of the module that set it
  for (std::size_t i = 0; i < modules.modules.size(); ++i) {
    auto& m = modules.modules[i];
    auto path = "modules[" + std::to_string(i) + "]";
    // (lease or balance on a module that is not leader-only is parse_modules'
    // error; it runs on every replica whatever its lease.)
    if ((m.lease.empty() && m.balance.empty()) || !m.leader_only) {
      layout.main.modules.modules.push_back(m);
      continue;
    }
    auto lease = m.lease.empty() ? m.name : m.lease;
    auto lease_path = path + (m.lease.empty() ? ".name" : ".lease");
    bool ok = true;
    if (auto e = lease_name_error(lease); !e.empty()) {
      errs.push_back(lease_path + ": " + e
                     + (m.lease.empty() ? " (a balanced module's lease is its name unless it "
                                          "sets lease)"
                                        : ""));
      ok = false;
    }
    if (!m.balance.empty())
      if (auto e = dns1123_error(m.balance, max_group_length, /*label*/ true); !e.empty()) {
        errs.push_back(path + ".balance: " + e);
        ok = false;
      }
    if (lease == main_lease && !m.balance.empty()) {
      errs.push_back(lease_path + ": \"" + lease
                     + "\" is the agent's own lease (lease_name); a balanced module needs a "
                       "lease of its own");
      ok = false;
    }
    if (m.balance_settle_ms && !m.balance.empty()) {
      auto [at, fresh] = layout.settle_ms.emplace(m.balance, *m.balance_settle_ms);
      if (fresh) {
        settle_at[m.balance] = path;
      } else if (at->second != *m.balance_settle_ms) {
        errs.push_back(path + ".balance.settle_ms: group \"" + m.balance + "\" has settle_ms "
                       + std::to_string(at->second) + " at " + settle_at[m.balance] + " (is "
                       + std::to_string(*m.balance_settle_ms) + "); one settle time per group");
        ok = false;
      }
    }
    if (!ok)
      continue;
    if (lease == main_lease) {   // named explicitly: the agent's lease as if unset
      layout.main.modules.modules.push_back(m);
      continue;
    }
    auto it = index.find(lease);
    if (it == index.end()) {
      index[lease] = layout.others.size();
      first[lease] = path;
      layout.others.push_back({lease, m.balance, {}});
    } else if (layout.others[it->second].group != m.balance) {
      auto& g = layout.others[it->second].group;
      errs.push_back(path + ".balance: lease \"" + lease + "\" is "
                     + (g.empty() ? "not balanced" : "in balance group \"" + g + "\"") + " at "
                     + first[lease] + "; every module of one lease is in the same group (is \""
                     + m.balance + "\")");
      continue;
    }
    layout.others[index[lease]].modules.modules.push_back(m);
    layout.others[index[lease]].modules.modules.back().lease = lease;   // resolved
  }
  if (errs.empty())
    out = std::move(layout);
  return errs;
}

} // namespace leasehold::agent
