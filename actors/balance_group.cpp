// The balance group actor (include/leasehold/balance_group.hpp). Every
// retry_period, and at once when a lease's holder changes, it announces this
// replica, counts the settled live members (a member's ttl runs only while
// this replica's own rounds succeed: an outage is no evidence that it is
// gone), computes the assignment and tells each runner whether to compete.
// The steps: docs/balance.md, "The group actor"; yields and leaving: the
// comment on balance_group_actor below.
#include "leasehold/balance_group.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "actors/balance.hpp"
#include "leasehold/blocking_request.hpp"
#include "actors/handover.hpp"
#include "actors/messages.hpp"

namespace leasehold {

namespace {

using time_point = caf::actor_clock::time_point;

struct seen_member {
  member_record record;
  time_point present_since;
  /// When `record.renewed` last changed, on this replica's sighted clock
  /// (nullopt: never seen to change since this replica first listed it).
  std::optional<caf::timespan> renewed_at;
  caf::timespan unchanged_since;   // sighted clock: first listed, or `renewed` last changed
};

struct lease_view {
  runner_actor runner;
  std::string holder;              // "" when free
  std::optional<time_point> free_since;
  bool competing = false;
};

/// The settled members are told to the runners (candidates_atom): a yield
/// or a preferredHolder naming anybody else moves nothing. A yield of one
/// lease goes to the named member, or to the settled member other than
/// this replica that ranks the lease highest (the rendezvous runner-up).
/// Every member that sees the release name it (leadership_changed's
/// preferred) pins the lease to it for a lease duration (the yield hold),
/// so the assignment keeps it there and rebalances around it. Leaving:
/// withdraw the announcement, then shut every runner down.
class balance_group_actor : public caf::event_based_actor {
public:
  balance_group_actor(caf::actor_config& cfg, balance_group_options opts)
    : caf::event_based_actor(cfg), opt_(std::move(opts)) {
    me_.ns = opt_.ns;
    me_.group = opt_.group;
    me_.identity = opt_.identity;
    me_.ttl = ttl();
    std::vector<std::string> names;
    for (auto& l : opt_.leases)
      names.push_back(l.first);
    me_.leases = lease_list_fingerprint(names);
  }

  const char* name() const override { return "leasehold.balance_group"; }

  caf::behavior make_behavior() override {
    for (auto& [name, runner] : opt_.leases) {
      leases_[name].runner = runner;
      runner_of_[caf::actor_cast<caf::actor_addr>(runner)] = name;
      // A yield or a preferredHolder may name only a settled member: none yet.
      send(runner, candidates_atom::value, std::vector<std::string>{});
      if (!opt_.assign)
        continue;   // the runner competes by itself: its holder is not needed
      // No holder known yet: free until a runner reports one, so a lease no
      // runner ever reports held still becomes everyone's after a lease
      // duration (the views of a restarted member and the others may differ),
      // counted from when this replica can first decide (its settle time and
      // a round): on a fresh store the first standby creates each Lease
      // unheld and its creation hold runs during the settle time; its
      // assignee takes it when the hold ends, before anybody else competes.
      leases_[name].free_since = clock().now() + opt_.settle + opt_.timings.retry_period;
      send(runner, subscribe_atom::value, caf::actor_cast<caf::actor>(this));
    }
    send(this, tick_atom::value, ++tick_seq_);
    return {
      [=](tick_atom, std::uint64_t seq) {
        if (seq == tick_seq_)
          round();
      },
      [=](const leadership_changed& lc) {
        auto it = runner_of_.find(caf::actor_cast<caf::actor_addr>(current_sender()));
        if (it == runner_of_.end())
          return;
        auto& v = leases_[it->second];
        auto holder = lc.leading ? opt_.identity : lc.holder;
        bool pinned = !lc.preferred.empty() && pin(it->second, lc.preferred);
        if (holder == v.holder && !pinned)
          return;
        v.holder = holder;
        if (holder.empty())
          v.free_since = clock().now();
        else
          v.free_since.reset();
        // A lease changed hands (a release above all): recompute now, with
        // fresh membership, so its assignee competes before the next tick.
        if (!in_flight_)
          send(this, tick_atom::value, ++tick_seq_);
        else
          again_ = true;
      },
      [=](yield_atom, const std::string& lease, std::string to) -> caf::result<yield_result> {
        auto v = leases_.find(lease);
        if (v == leases_.end())
          return yield_result{yield_status::not_leading, "",
                              "lease " + lease + " is not in group " + opt_.group};
        tell_candidates(members());   // the runner judges the target by the same list
        if (to.empty() && opt_.assign) {   // a candidate set yields to anyone
          to = runner_up(lease);
          if (to.empty())
            return yield_result{yield_status::unknown_target, "",
                                "no other settled member of group " + opt_.group + " to take lease "
                                  + lease};
        }
        if (!to.empty() && std::find(candidates_.begin(), candidates_.end(), to) == candidates_.end())
          return yield_result{yield_status::unknown_target, "",
                              to + " is not a settled member of "
                                + (opt_.assign ? "group " + opt_.group : "the replicas of lease " + lease)
                                + " (members: " + list_names(candidates_) + "); lease " + lease
                                + " stays where it is"};
        return delegate(v->second.runner, yield_atom::value, std::move(to));
      },
      [=](get_status_atom) { return status(); },
      [=](shutdown_atom) {
        auto rp = make_response_promise<bool>();
        leave(rp);
        return rp;
      },
    };
  }

  void on_exit() override {
    // Runners hold this actor as a subscriber and it holds them: let go of
    // every handle, or neither (nor the transports they hold) is ever
    // destroyed and a detached transport's thread waits for ever.
    leases_.clear();
    opt_.leases.clear();
    runner_of_.clear();
    opt_.membership = nullptr;
  }

private:
  void round() {
    if (in_flight_ || leaving_)
      return;
    in_flight_ = true;
    request(opt_.membership, opt_.timings.effective_request_timeout(), announce_atom::value, me_)
      .then([=](members_reply& r) { round_done(r.ok() ? &*r.value : nullptr); },
            [=](caf::error&) { round_done(nullptr); });
  }

  /// `listed`: the members the round listed; null when it failed (what we
  /// knew stands; free leases still become everyone's).
  void round_done(const std::vector<member_record>* listed) {
    in_flight_ = false;
    if (listed)
      observe(*listed);
    else
      blind();
    decide();
    next_round();
  }

  void next_round() {
    if (leaving_)
      return;
    if (std::exchange(again_, false))
      send(this, tick_atom::value, ++tick_seq_);
    else
      delayed_send(this, opt_.assign ? opt_.timings.retry_period : opt_.timings.lease_duration,
                   tick_atom::value, ++tick_seq_);
  }

  /// How long an announcement counts unless renewed. A lease outside any
  /// group announces every lease duration and counts for three: its list
  /// only refuses a mistyped yield target, so it may be slow and cheap.
  caf::timespan ttl() const {
    return opt_.timings.lease_duration * (opt_.assign ? 1 : candidate_set_lease_durations);
  }

  /// How long this replica has been able to read the membership store: time
  /// runs while its rounds succeed and stands still from a round that fails
  /// until the next that succeeds. A member ages only on this clock: an
  /// outage withholds its announcements from us as it withholds ours from
  /// it, so it is no evidence that the member is gone (docs/balance.md).
  caf::timespan sighted(time_point now) const {
    return sighted_ + (blind_ || !last_listed_ ? caf::timespan{0} : now - *last_listed_);
  }

  /// A round failed: the sighted clock stands still until one succeeds.
  void blind() {
    sighted_ = sighted(clock().now());
    blind_ = true;
  }

  void observe(const std::vector<member_record>& listed) {
    auto now = clock().now();
    if (!first_listed_)
      first_listed_ = now;
    sighted_ = sighted(now);
    last_listed_ = now;
    blind_ = false;
    auto seen_now = sighted_;
    // A member first seen while this replica is itself settling (its settle
    // time and one round, by which every replica that started with it has
    // announced itself and been listed) counts as present since this
    // replica's first listing: replicas that start together settle together.
    // Otherwise the first to settle would count only itself, take every
    // lease, and hand most of them over a round later.
    auto window = opt_.settle + opt_.timings.retry_period;
    auto first_seen = now - *first_listed_ <= window ? *first_listed_ : now;
    std::map<std::string, seen_member> next;
    seen_listed_.clear();
    for (auto& rec : listed) {
      seen_listed_.insert(rec.identity);
      if (!counts(rec))
        continue;
      auto old = seen_.find(rec.identity);
      // A member first seen counts only once its announcement is seen to
      // change: a killed replica's LeaseCandidate stays listed with a
      // renewTime that never changes again.
      seen_member m{rec, first_seen, std::nullopt, seen_now};
      if (old != seen_.end() && old->second.record.joined == rec.joined) {
        bool changed = old->second.record.renewed != rec.renewed;
        m.renewed_at = changed ? seen_now : old->second.renewed_at;
        m.unchanged_since = changed ? seen_now : old->second.unchanged_since;
        // One that had stopped announcing and announces again (a killed
        // replica restarted under its name) starts its settle time over.
        m.present_since = changed && !live(old->second, now) ? now : old->second.present_since;
      }
      // A store that keeps a dead member's announcement (a SIGKILLed
      // replica's LeaseCandidate): whoever sees it unchanged for two lease
      // durations removes it, so that it does not stay listed for ever.
      if (!rec.renewed.empty() && seen_now - m.unchanged_since >= 2 * ttl())
        request(opt_.membership, opt_.timings.effective_request_timeout(), withdraw_atom::value,
                candidate{opt_.ns, opt_.group, rec.identity, me_.ttl, rec.leases})
          .then([](withdraw_reply&) {}, [](caf::error&) {});
      next[rec.identity] = m;
    }
    seen_ = std::move(next);
  }

  /// A member that lists other leases for the group is not counted (each
  /// would hand the other leases it takes back, for ever): the group splits
  /// by config until the lists agree. Said once per member and list.
  bool counts(const member_record& rec) {
    if (rec.leases.empty() || rec.leases == me_.leases) {
      differing_.erase(rec.identity);
      return true;
    }
    if (differing_[rec.identity] != rec.leases) {
      differing_[rec.identity] = rec.leases;
      event_emitter(opt_.events, opt_.identity, opt_.ns + "/" + opt_.group)(
        event_type::group_config_differs, [&](runtime_event& ev) {
          ev.holder = rec.identity;
          ev.reason = rec.identity + " lists different leases for group " + opt_.group + " ("
                      + rec.leases + "; this replica " + me_.leases
                      + ", as count/hash): neither counts the other until the lists agree";
        });
    }
    return false;
  }

  /// A member whose store does not expire it counts while its announcement
  /// changes within its ttl on our sighted clock.
  bool live(const seen_member& m, time_point now) const {
    return m.record.renewed.empty()
           || (m.renewed_at && sighted(now) - *m.renewed_at < ttl());
  }

  std::vector<balance_member> members() const {
    auto now = clock().now();
    std::vector<observed_member> present;
    for (auto& [id, m] : seen_)
      if (live(m, now))
        present.push_back({{id, m.record.joined}, m.present_since});
    return settled_members(present, now, opt_.settle);   // the actor clock is a steady_clock
  }

  /// Where members are counted only once seen to renew (a store that keeps
  /// a dead member's announcement), a replica that starts sees the others
  /// renew only a round or two after it first listed them: it decides
  /// nothing before, so that replicas that start together also settle
  /// together (each lease taken once, by its assignee).
  bool still_starting(time_point now) const {
    return first_listed_ && now < *first_listed_ + opt_.settle + 2 * opt_.timings.retry_period
           && std::any_of(seen_.begin(), seen_.end(),
                          [](auto& m) { return !m.second.record.renewed.empty(); });
  }

  /// Leaves `lease` to `member` for the yield hold (a new pin or a later
  /// one: true).
  bool pin(const std::string& lease, const std::string& member) {
    auto until = clock().now() + opt_.timings.lease_duration;
    auto& p = pins_[lease];
    bool fresh = p.first != member || p.second < until - opt_.timings.retry_period;
    p = {member, until};
    return fresh;
  }

  /// The settled member other than this replica that ranks `lease` highest
  /// ("" when there is none).
  std::string runner_up(const std::string& lease) const {
    std::string best;
    for (auto& m : members())
      if (m.identity != opt_.identity
          && (best.empty() || rendezvous_score(lease, m.identity) > rendezvous_score(lease, best)))
        best = m.identity;
    return best;
  }

  void decide() {
    auto now = clock().now();
    if (!opt_.assign) {
      tell_candidates(members());
      return;
    }
    if (still_starting(now))
      return;
    std::vector<std::string> names;
    std::map<std::string, std::string> holders;
    for (auto& [name, v] : leases_) {
      names.push_back(name);
      holders[name] = v.holder;
    }
    std::map<std::string, std::string> pinned;
    for (auto p = pins_.begin(); p != pins_.end();)
      if (p->second.second <= now) {
        p = pins_.erase(p);
      } else {
        pinned[p->first] = p->second.first;
        ++p;
      }
    auto settled = members();
    // A joiner is told to the runners a round before leases move: a runner
    // that now follows a preferredHolder naming it reports the handover (a
    // pin) first, so a join moves no more than the joiner's quota.
    if (tell_candidates(settled))
      return;
    auto target = balance_assignment(names, settled, holders, pinned);
    for (auto& [name, v] : leases_) {
      auto a = target.find(name);
      bool mine = a != target.end() && a->second == opt_.identity;
      bool orphan = v.free_since && now - *v.free_since >= opt_.timings.lease_duration;
      bool want = mine || orphan;
      if (want == v.competing)
        continue;
      if (!want && v.holder == opt_.identity)
        ++moves_;
      v.competing = want;
      send(v.runner, compete_atom::value, want);
    }
    assigned_.clear();
    for (auto& [name, who] : target)
      if (who == opt_.identity)
        assigned_.push_back(name);
  }

  /// Tells the runners the settled members when they changed; true when a
  /// member joined others that were told before (not the group's start).
  bool tell_candidates(const std::vector<balance_member>& settled) {
    std::vector<std::string> ids;
    for (auto& m : settled)
      ids.push_back(m.identity);
    if (ids == candidates_)
      return false;
    bool joined = !candidates_.empty()
                  && std::any_of(ids.begin(), ids.end(), [&](const std::string& id) {
                       return std::find(candidates_.begin(), candidates_.end(), id)
                              == candidates_.end();
                     });
    candidates_ = ids;
    for (auto& [name, v] : leases_)
      send(v.runner, candidates_atom::value, ids);
    return joined;
  }

  balance_status status() const {
    balance_status st;
    for (auto& m : members())
      st.members.push_back(m.identity);
    for (auto& [id, leases] : differing_)
      if (seen_listed_.count(id))
        st.differing.push_back(id);
    st.assigned = assigned_;
    for (auto& [name, v] : leases_)
      if (v.competing)
        st.competing.push_back(name);
    st.moves = moves_;
    st.settle_ms = std::chrono::duration_cast<std::chrono::milliseconds>(opt_.settle).count();
    return st;
  }

  /// Withdraw first (the others reassign this replica's leases and compete
  /// for them), then shut the runners down (each releases what it leads).
  /// Outside a group nobody waits on the withdraw: both at once.
  void leave(caf::typed_response_promise<bool> rp) {
    leaving_ = true;
    ++tick_seq_;
    auto withdrawn = request(opt_.membership, opt_.timings.effective_request_timeout(),
                             withdraw_atom::value, me_);
    if (!opt_.assign) {
      withdrawn.then([](withdraw_reply&) {}, [](caf::error&) {});
      stop_runners(rp);
      return;
    }
    withdrawn.then([=](withdraw_reply&) { stop_runners(rp); },
                   [=](caf::error&) { stop_runners(rp); });
  }

  void stop_runners(caf::typed_response_promise<bool> rp) {
    auto left = std::make_shared<std::size_t>(leases_.size());
    auto ok = std::make_shared<bool>(true);
    if (*left == 0) {
      rp.deliver(true);
      quit();
      return;
    }
    auto bound = opt_.timings.release_timeout + opt_.timings.module_stop_timeout
                 + opt_.timings.effective_request_timeout() * 2;
    for (auto& [name, v] : leases_) {
      request(v.runner, bound, shutdown_atom::value)
        .then([=](bool done) { finish_one(rp, left, ok, done); },
              [=](caf::error&) { finish_one(rp, left, ok, false); });
    }
  }

  void finish_one(caf::typed_response_promise<bool> rp, std::shared_ptr<std::size_t> left,
                  std::shared_ptr<bool> ok, bool done) {
    *ok = *ok && done;
    if (--*left == 0) {
      rp.deliver(*ok);
      quit();
    }
  }

  balance_group_options opt_;
  candidate me_;
  std::map<std::string, lease_view> leases_;
  std::map<caf::actor_addr, std::string> runner_of_;
  std::map<std::string, seen_member> seen_;
  std::set<std::string> seen_listed_;   // every member of the last listing
  std::map<std::string, std::string> differing_;   // member -> the other lease list it was seen with
  /// lease -> (member, until): a yield's successor keeps it first (pin).
  std::map<std::string, std::pair<std::string, time_point>> pins_;
  std::optional<time_point> first_listed_;   // this replica's first member list
  std::optional<time_point> last_listed_;    // its last (a round that succeeded)
  caf::timespan sighted_{0};                 // the sighted clock at last_listed_ (or when blinded)
  bool blind_ = false;                       // a round failed since last_listed_
  std::vector<std::string> assigned_;
  std::vector<std::string> candidates_;      // the settled members the runners were told
  std::int64_t moves_ = 0;
  std::uint64_t tick_seq_ = 0;
  bool in_flight_ = false;
  bool again_ = false;
  bool leaving_ = false;
};

} // namespace

std::string candidate_set_group(const std::string& lease) {
  auto group = "lease." + lease;
  return group.size() <= 63 ? group : std::string();   // a label value's bound
}

bool is_candidate_set(const std::string& group) {
  return group.rfind("lease.", 0) == 0;
}

caf::actor spawn_balance_group(caf::actor_system& sys, balance_group_options opts) {
  return sys.spawn<balance_group_actor>(std::move(opts));
}

bool leave_group(caf::actor_system& sys, const caf::actor& group, caf::timespan timeout) {
  return blocking_request<bool>(sys, group, timeout, shutdown_atom::value).value_or(false);
}

std::optional<yield_result> yield_lease(caf::actor_system& sys, const caf::actor& group,
                                        const std::string& lease, std::string to,
                                        caf::timespan timeout) {
  return blocking_request<yield_result>(sys, group, timeout, yield_atom::value, lease, std::move(to));
}

std::optional<balance_status> group_status(caf::actor_system& sys, const caf::actor& group,
                                           caf::timespan timeout) {
  return blocking_request<balance_status>(sys, group, timeout, get_status_atom::value);
}

} // namespace leasehold
