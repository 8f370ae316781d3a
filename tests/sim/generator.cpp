// The scenario generator: from one 64-bit seed, replica count, timings and a
// schedule of operations and faults in chaos windows, each followed by a
// heal and a quiet window in which liveness is checked.
#include <algorithm>
#include <cmath>

#include "sim_cluster.hpp"
#include "actors/elector.hpp"
#include "lease/backoff.hpp"

namespace leasehold::sim {

using namespace std::chrono_literals;

namespace {

struct draw {
  std::mt19937_64 rng;
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }
  int range(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  caf::timespan span(caf::timespan lo, caf::timespan hi) {
    return caf::timespan{static_cast<caf::timespan::rep>(
      lo.count() + unit() * static_cast<double>((hi - lo).count()))};
  }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<std::size_t>(range(0, static_cast<int>(v.size()) - 1))]; }
};

election_timings draw_timings(draw& d) {
  election_timings t;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    if (d.unit() < 0.1) {   // valid-looking timings near the edges of the budget
      t = election_timings{};
      t.lease_duration = 5s;
      t.renew_deadline = 2500ms;
      t.retry_period = 2s;
      t.module_stop_timeout = 2s;
    } else {
      t.retry_period = d.pick<caf::timespan>({300ms, 500ms, 1s, 2s});
      t.renew_deadline = caf::timespan{static_cast<caf::timespan::rep>(
        t.retry_period.count() * (1.25 + d.unit() * 2.75))};
      t.module_stop_timeout = d.span(200ms, 3s);
      t.lease_duration = t.renew_deadline + t.module_stop_timeout + d.span(100ms, 4s);
    }
    auto u = d.unit();
    if (u < 0.5)
      t.request_timeout = caf::timespan{0};
    else if (u < 0.75)
      t.request_timeout = d.span(t.retry_period / 10, t.retry_period);
    else
      t.request_timeout = d.span(t.renew_deadline / 10, t.renew_deadline * 13 / 10);
    t.backoff_min = d.span(100ms, 1s);
    t.backoff_max = d.span(1s, 20s);
    // A crash loop in a chaos window may end in a handover; the quiet
    // window's liveness bound allows one elector backoff cap, so the handover
    // backoff takes the elector backoff's bounds (no draw of its own: every
    // seed keeps its scenario). docs/safety.md states the real cost.
    t.handover_backoff_min = t.backoff_min;
    t.handover_backoff_max = t.backoff_max;
    t.release_timeout = d.span(500ms, 3s);
    if (validate(t).empty())
      return t;
  }
  return election_timings{};
}

std::size_t draw_replicas(draw& d) {
  auto u = d.unit();
  if (u < 0.3) return 2;
  if (u < 0.6) return 3;
  if (u < 0.85) return static_cast<std::size_t>(d.range(4, 5));
  return static_cast<std::size_t>(d.range(6, 7));
}

struct weighted { op_kind kind; int weight; };

// The same list on both backends (a seed draws one scenario for both). On
// etcd every kind applies as it is (faults hit the store's clients, latency
// its two legs, the rest the replicas) except two that have no etcd
// counterpart, mapped in sim_cluster.cpp: `wipe` becomes a raft leader change
// (every lease gets its full TTL again), and `precreated_lease` (a released
// record) is no key at all, since a release on etcd revokes the key.

const std::vector<weighted>& chaos_kinds() {
  static const std::vector<weighted> k = {
    {op_kind::api_down, 6},       {op_kind::api_hang, 4},      {op_kind::api_errors, 4},
    {op_kind::api_latency, 5},    {op_kind::partition, 6},     {op_kind::partition_hang, 4},
    {op_kind::wipe, 4},           {op_kind::elector_kill, 6},  {op_kind::crash_loop, 3},
    {op_kind::module_hang, 4},    {op_kind::stubborn_module, 3}, {op_kind::slow_module, 3},
    {op_kind::disable, 4},        {op_kind::enable, 3},        {op_kind::change_value, 3},
    {op_kind::config_burst, 6},   {op_kind::pause, 6},         {op_kind::crash, 4},
    {op_kind::restart, 4},        {op_kind::graceful_shutdown, 4},
  };
  return k;
}

op_kind draw_kind(draw& d) {
  int total = 0;
  for (auto& w : chaos_kinds())
    total += w.weight;
  int x = d.range(0, total - 1);
  for (auto& w : chaos_kinds()) {
    if (x < w.weight)
      return w.kind;
    x -= w.weight;
  }
  return op_kind::api_down;
}

/// A follower's longest gap between two reads of a lease: a retry period
/// with its jitter and two request timeouts.
caf::timespan poll_gap(const election_timings& t) {
  return std::chrono::duration_cast<caf::timespan>(t.retry_period * 1.2)
         + 2 * t.effective_request_timeout();
}

/// How long a lease outlives its last renew for the others: the record's
/// leaseDurationSeconds (whole seconds, rounded up, at least 2: 1 marks a
/// release), which Kubernetes followers wait out and etcd keeps as the TTL.
caf::timespan store_lease(const election_timings& t, backend_kind) {
  caf::timespan written = std::chrono::seconds(duration_seconds(t.lease_duration));
  return std::max(t.lease_duration, written);
}

/// One seed in five runs its timings scaled down to a lease of 500 ms to
/// 1 s: below the record's whole seconds, where a release must still be
/// told from an emptied holder or an unheld create. Drawn from a stream of
/// its own, so every other seed keeps its scenario (its constant is one no
/// kept regression seed draws, so each still replays what it was kept for).
bool maybe_brief(election_timings& t, draw& brief) {
  if (brief.unit() >= 0.2)
    return false;
  auto target = brief.span(500ms, 1s);
  double f = static_cast<double>(target.count()) / static_cast<double>(t.lease_duration.count());
  if (f >= 1)
    return false;
  auto scale = [f](caf::timespan& x) {
    x = caf::timespan{static_cast<caf::timespan::rep>(static_cast<double>(x.count()) * f)};
  };
  auto s = t;
  for (auto* x : {&s.lease_duration, &s.renew_deadline, &s.retry_period, &s.module_stop_timeout,
                  &s.request_timeout})
    scale(*x);
  if (!validate(s).empty())
    return false;
  t = s;
  return true;
}

} // namespace

caf::timespan liveness_bound(const election_timings& t) {
  auto poll = poll_gap(t);
  // A stale record expiring by a follower's clock, an absent lease waited
  // out, a stop (or a fatal exit of a replica whose module hangs), the
  // respawn backoff cap, and a few polls.
  return 2 * t.lease_duration + t.module_stop_timeout + (t.lease_duration - t.renew_deadline)
         + backoff(t.backoff_min, t.backoff_max, t.backoff_jitter).cap() + 3 * poll;
}

caf::timespan liveness_bound(const election_timings& t, backend_kind backend) {
  auto longer = t;
  longer.lease_duration = store_lease(t, backend);
  return liveness_bound(longer);
}

caf::timespan group_slack(const election_timings& t, backend_kind backend, caf::timespan settle) {
  auto longest = store_lease(t, backend);
  // What the store adds to the lease duration the bound counts (etcd's
  // rounding up); a member's absence is seen a lease duration (its announcement's ttl)
  // after its last announcement, its lease expires a lease duration after its
  // last renew; then the settle time of a newcomer, a module stop and a
  // release of a lease over quota, three group rounds and three polls. On
  // etcd a standby that judged the vanished key while it was not competing
  // holds the key it creates for one more lease duration (docs/balance.md,
  // "Costs").
  return (longest - t.lease_duration) + (backend == backend_kind::etcd ? longest : caf::timespan{0})
         + settle + t.module_stop_timeout + t.release_timeout + 3 * t.retry_period + 3 * poll_gap(t);
}

caf::timespan group_bound(const election_timings& t, backend_kind backend, caf::timespan settle) {
  return t.lease_duration + group_slack(t, backend, settle);
}

scenario generate(std::uint64_t seed, const world& w) {
  draw d{std::mt19937_64{seed * 0x9E3779B97F4A7C15ULL + 1}};
  // Choices added after the first generator draw from a stream of their
  // own, so every earlier choice of a seed stays what it was.
  draw later{std::mt19937_64{seed * 0xD1B54A32D192ED03ULL + 7}};
  // The multi-lease world's own choices (which lease an operation hits,
  // the shared stream's faults): a single-lease seed draws none of them.
  draw many{std::mt19937_64{seed * 0xBF58476D1CE4E5B9ULL + 11}};
  draw yields{std::mt19937_64{seed * 0xD1B54A32D192ED03ULL + 11}};   // yields: their own stream
  draw grp{std::mt19937_64{seed * 0x94D049BB133111EBULL + 13}};      // balance groups: their own
  draw flaps{std::mt19937_64{seed * 0x94D049BB133111EBULL + 17}};    // quiet windows' flappers
  draw brief{std::mt19937_64{seed * 0x2545F4914F6CDD1DULL + 39}};    // leases of 1 s and below
  // One seed in four: late streams and a fresh take deleted by an operator
  // in every chaos window (no kept seed draws it: its constant is chosen so).
  draw lag{std::mt19937_64{seed * 0x9FB21C651E98DF25ULL + 878}};
  bool lagging = lag.unit() < 0.25;
  scenario sc;
  sc.seed = seed;
  sc.replicas = draw_replicas(d);
  if (w.replicas > 0)
    sc.replicas = w.replicas;
  sc.leases = std::max<std::size_t>(1, w.leases);
  sc.shared_watch = w.many();
  sc.timings = draw_timings(d);
  bool brief_leases = maybe_brief(sc.timings, brief);
  sc.supervision.intensity = d.range(1, 4);
  sc.supervision.period = d.span(5s, 30s);
  sc.supervision.restart_backoff_min = d.span(50ms, 500ms);
  sc.supervision.restart_backoff_max = d.span(1s, 5s);
  auto rt = sc.timings.effective_request_timeout();
  sc.base_latency = d.span(0ms, std::min<caf::timespan>(rt / 4, 400ms));
  sc.precreated_lease = d.unit() < 0.7;
  // From the seed itself, not the draw stream: every other choice of a seed
  // stays what it was before the watch existed. Three seeds in four watch.
  sc.watch = ((seed * 0x9E3779B97F4A7C15ULL) >> 62) != 0;
  auto ld = sc.timings.lease_duration;
  // Kubernetes leases bound to a session (kube_session.hpp): who binds (most
  // replicas where each holds many leases, half where one), a bound Lease's
  // duration short enough that its refreshes, and a reader that is not
  // leasehold waiting it out, happen inside a run; in some seeds such a
  // reader competes (op_kind::foreign). Drawn on either store (etcd ignores
  // them), from a stream of their own: every other choice stays.
  draw sess{std::mt19937_64{seed * 0xC2B2AE3D27D4EB4FULL + 57}};
  for (std::size_t i = 0; i < sc.replicas; ++i)
    sc.bind.push_back(sess.unit() < (w.many() ? 0.8 : 0.5));
  sc.bound_duration = std::chrono::ceil<std::chrono::seconds>(sess.range(4, 8) * ld);
  bool foreign = sess.unit() < 0.3;
  bool foreign_from_start = sess.unit() < 0.5;
  // A brief lease is written as 2 s, which followers wait out: its quiet
  // windows count that (every other seed keeps its windows).
  auto bound = brief_leases ? liveness_bound(sc.timings, backend_kind::kubernetes)
                            : liveness_bound(sc.timings);
  // Balance groups: the settle time, who is out of the group at the start,
  // and in each quiet window 1-3 membership changes (a join, a clean leave,
  // a kill), each a group bound and a lease duration after the last, so the
  // group is judged balanced before the next one.
  sc.groups = w.groups && w.many();
  caf::timespan phase{0};
  int changes = 0;
  if (sc.groups) {
    sc.settle = grp.pick<caf::timespan>({500ms, 1s, 2s});
    sc.out_at_start.assign(sc.replicas, false);
    int out = grp.range(0, static_cast<int>(std::min<std::size_t>(2, sc.replicas - 1)));
    for (int i = 0; i < out; ++i)
      sc.out_at_start[static_cast<std::size_t>(grp.range(0, static_cast<int>(sc.replicas) - 1))] = true;
    // Judged on the slower store, so a seed draws one scenario for both.
    phase = group_bound(sc.timings, backend_kind::etcd, sc.settle) + ld;
  }

  // Quiet windows (a leader within the bound, then no term lost) alternate
  // with chaos windows; the run starts and ends quiet.
  auto quiet_len = bound + 4 * ld;
  auto add_quiet = [&](caf::timespan begin) {
    if (sc.groups) {
      changes = grp.range(1, 3);
      quiet_len = bound + (changes + 1) * phase;
      for (int j = 1; j <= changes; ++j) {
        op g;
        g.kind = grp.pick<op_kind>({op_kind::join, op_kind::leave, op_kind::kill});
        g.at = begin + bound + j * phase;
        g.replica = static_cast<std::size_t>(grp.range(0, 6));
        sc.ops.push_back(g);
        // Once the change is judged balanced, in one case in two, a replica
        // out of the group flaps for less than the settle time and ends
        // before the next change: the hysteresis must keep every lease where
        // it is (the no-churn rule judges it).
        if (flaps.unit() < 0.5) {
          op f;
          f.kind = op_kind::flap;
          f.at = g.at + group_bound(sc.timings, backend_kind::etcd, sc.settle) + 100ms;
          f.replica = static_cast<std::size_t>(flaps.range(0, 6));
          f.param = flaps.range(2, 4);
          auto most = std::min<caf::timespan>(sc.settle / 2, ld / (2 * f.param + 1));
          f.duration = flaps.span(std::min<caf::timespan>(50ms, most), most);
          sc.ops.push_back(f);
        }
      }
    }
    sc.quiet.emplace_back(begin, begin + quiet_len);
    // In some quiet windows the stable leader is shut down gracefully: the
    // released lease must be taken within a poll, not after its expiry.
    // (In the group world a clean leave is a membership change of its own.)
    if (d.unit() < 0.5 && !sc.groups) {
      op g;
      g.kind = op_kind::graceful_shutdown;
      g.at = begin + bound + 2 * ld;
      g.param = -1;
      g.duration = sc.timings.module_stop_timeout + sc.timings.release_timeout + 2 * rt + 1s;
      if (w.many())   // the leader of which lease (it releases every lease it holds)
        g.lease = many.range(0, static_cast<int>(sc.leases) - 1);
      sc.ops.push_back(g);
    }
    return begin + quiet_len;
  };
  caf::timespan t = add_quiet(caf::timespan{0});
  int cycles = d.range(1, 3);
  for (int c = 0; c < cycles; ++c) {
    auto chaos_begin = t;
    auto chaos_len = d.span(20s, 120s);
    int n = d.range(3, 14);
    for (int i = 0; i < n; ++i) {
      op o;
      o.kind = draw_kind(d);
      o.at = chaos_begin + d.span(0ms, chaos_len);
      o.replica = static_cast<std::size_t>(d.range(0, 6));
      auto u = d.unit();
      o.duration = u < 0.5 ? d.span(200ms, ld) : u < 0.85 ? d.span(ld, 3 * ld) : d.span(0ms, 300ms);
      switch (o.kind) {
        case op_kind::api_errors: o.param = d.pick<int>({500, 503, 429}); break;
        case op_kind::api_latency:
          o.param = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       d.span(20ms, 2 * rt)).count());
          break;
        case op_kind::crash_loop: o.param = d.range(10, 3000); break;
        case op_kind::module_hang:
          o.param = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       d.span(100ms, 3 * ld)).count());
          break;
        case op_kind::stubborn_module:
          o.param = d.range(0, 2);   // ignore / hang / both
          // 3, 4: hang / both, and "side" alone is switched off meanwhile
          // (a partial disable: its stop and kill happen while leading).
          if (o.param >= 1 && later.unit() < 0.5)
            o.param += 2;
          break;
        case op_kind::slow_module:
          o.param = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       d.span(10ms, 2 * sc.timings.module_stop_timeout)).count());
          break;
        case op_kind::config_burst: o.param = d.range(0, 600); break;   // spacing ms
        case op_kind::graceful_shutdown: o.param = d.unit() < 0.6 ? -1 : 0; break;   // -1: the leader
        case op_kind::disable: o.param = later.range(0, 2); break;   // all / only work / only side
        default: break;
      }
      if (w.many())   // one lease's runner or modules, or every lease's (a quarter)
        o.lease = many.unit() < 0.25 ? -1 : many.range(0, static_cast<int>(sc.leases) - 1);
      sc.ops.push_back(o);
    }
    // The multi-lease world: faults of one replica's shared watch stream,
    // each hitting every lease that replica holds at once.
    if (w.many()) {
      int streams = many.range(1, 6);
      for (int i = 0; i < streams; ++i) {
        op o;
        o.kind = many.pick<op_kind>({op_kind::stream_cut, op_kind::stream_gone,
                                     op_kind::stream_replay, op_kind::stream_delay});
        o.at = chaos_begin + many.span(0ms, chaos_len);
        o.replica = static_cast<std::size_t>(many.range(0, 6));
        o.duration = many.unit() < 0.7 ? many.span(100ms, ld) : many.span(ld, 3 * ld);
        if (o.kind == op_kind::stream_replay)
          o.param = many.range(1, 20 * static_cast<int>(sc.leases));   // versions back
        else if (o.kind == op_kind::stream_delay)
          o.param = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       many.span(10ms, ld)).count());   // ms late
        sc.ops.push_back(o);
      }
    }
    // Writes from outside the protocol (an operator deleting the object or
    // cancelling the holder's claim), in one chaos window in two.
    if (later.unit() < 0.5) {
      op ow;
      ow.kind = op_kind::outside_write;
      ow.at = chaos_begin + later.span(0ms, chaos_len);
      ow.param = later.range(0, 1);
      if (w.many())
        ow.lease = many.unit() < 0.25 ? -1 : many.range(0, static_cast<int>(sc.leases) - 1);
      sc.ops.push_back(ow);
    }
    // Late streams: a follower's stream seconds late while a leader is
    // paused (its key runs out), and the next take deleted by an operator
    // at once; a follower that frees the key on its late view must not
    // start a term beside the fresh take's stopping work.
    if (lagging) {
      // Early enough that the pause (at most 4 lease durations from `at`)
      // ends before the heal, which comes 3 lease durations after the window.
      auto at = chaos_begin + lag.span(0ms, std::max(caf::timespan{0}, chaos_len - ld));
      op late;
      late.kind = op_kind::stream_delay;
      late.at = at;
      late.replica = static_cast<std::size_t>(lag.range(0, 6));
      late.duration = lag.span(2 * ld, 6 * ld);
      late.param = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      lag.span(ld / 2, 3 * ld)).count());
      if (w.many())
        late.lease = -1;
      sc.ops.push_back(late);
      op stop;
      stop.kind = lag.unit() < 0.5 ? op_kind::pause : op_kind::partition;
      stop.at = at + lag.span(0ms, ld);
      stop.replica = static_cast<std::size_t>(lag.range(0, 6));
      stop.duration = lag.span(ld, 3 * ld);
      sc.ops.push_back(stop);
      op del;
      del.kind = op_kind::outside_write;
      del.param = 2;
      del.at = stop.at;
      // Disarmed a lease duration before the heal: a delete that fires
      // later ends the fresh term inside the quiet window.
      del.duration = std::min(stop.duration + 2 * ld, chaos_begin + chaos_len + 2 * ld - del.at);
      if (w.many())
        del.lease = many.range(0, static_cast<int>(sc.leases) - 1);
      sc.ops.push_back(del);
      if (lag.unit() < 0.3) {   // etcd cancels a watch for compaction
        op gone;
        gone.kind = op_kind::stream_gone;
        gone.at = at + lag.span(0ms, 2 * ld);
        gone.replica = static_cast<std::size_t>(lag.range(0, 6));
        sc.ops.push_back(gone);
      }
    }
    // The peer that is not leasehold: from the start or from some instant of
    // the first chaos window to the end; in the group world (whose judge
    // wants every lease on a member) only for each chaos window.
    if (foreign && (sc.groups || c == 0)) {
      op f;
      f.kind = op_kind::foreign;
      f.at = sc.groups ? chaos_begin
                       : foreign_from_start ? caf::timespan{0} : chaos_begin + sess.span(0ms, chaos_len);
      f.duration = sc.groups ? chaos_len : caf::timespan{0};
      sc.ops.push_back(f);
    }
    // Operators' writes to session Leases, in one chaos window in two.
    if (sess.unit() < 0.5) {
      int n_session = sess.range(1, 2);
      for (int i = 0; i < n_session; ++i) {
        op sw;
        sw.kind = op_kind::session_write;
        sw.at = chaos_begin + sess.span(0ms, chaos_len);
        sw.replica = static_cast<std::size_t>(sess.range(0, 6));
        sw.param = sess.range(0, 2);
        sc.ops.push_back(sw);
      }
    }
    // A yield (to anyone, to a replica, to one that does not exist), in one
    // chaos window in two.
    if (yields.unit() < 0.5) {
      op y;
      y.kind = op_kind::yield;
      y.at = chaos_begin + yields.span(0ms, chaos_len);
      y.param = yields.range(-1, 7);
      if (w.many())   // which lease's leader yields
        y.lease = many.range(0, static_cast<int>(sc.leases) - 1);
      sc.ops.push_back(y);
    }
    // Balance groups: joins, clean leaves, kills, flapping replicas and
    // preferredHolder writes under the window's faults.
    if (sc.groups) {
      int n_group = grp.range(1, 5);
      for (int i = 0; i < n_group; ++i) {
        op g;
        g.kind = grp.pick<op_kind>({op_kind::join, op_kind::leave, op_kind::kill, op_kind::flap,
                                    op_kind::prefer});
        g.at = chaos_begin + grp.span(0ms, chaos_len);
        g.replica = static_cast<std::size_t>(grp.range(0, 6));
        if (g.kind == op_kind::flap) {
          g.param = grp.range(2, 6);                          // joins (each followed by a leave)
          g.duration = grp.span(100ms, 2 * sc.settle);        // apart
        } else if (g.kind == op_kind::prefer) {
          g.param = grp.range(-1, 7);
          g.lease = grp.range(0, static_cast<int>(sc.leases) - 1);
        }
        sc.ops.push_back(g);
      }
    }
    op heal;
    heal.kind = op_kind::heal;
    heal.at = chaos_begin + chaos_len + 3 * ld;
    sc.ops.push_back(heal);
    t = add_quiet(heal.at);
  }
  sc.length = t;
  std::stable_sort(sc.ops.begin(), sc.ops.end(), [](const op& a, const op& b) { return a.at < b.at; });
  return sc;
}

} // namespace leasehold::sim
