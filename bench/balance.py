"""bench/run's balance figures: real `leasehold run` agents on one
leasehold-apiserver, 12 leader-only ticker modules in one balance group
(each under its own Lease; tests/faults/balance_cluster.py), agent timings lease 2 s, renew 1.5 s, retry
0.3 s, stop 0.4 s, settle 1 s. Per run, on a fresh API server:

  start 3 agents      -> balanced 4/4/4: seconds from the last start
  start a 4th         -> 3/3/3/3: seconds from its start to its last module
                         start, and the leases that moved (bound ceil(12/4) = 3)
  SIGTERM one         -> its leases run elsewhere: ms from the signal to the
                         last of them started (no expiry wait)
  SIGKILL one         -> the same after a kill: ms beyond the lease duration
  stop all, start 3   -> balanced 4/4/4 onto existing Leases: seconds from the
                         last start (no creation hold)

On Kubernetes (leasehold-apiserver, LeaseCandidate membership) or on etcd
(a 3-member cluster on loopback, member keys): `bench/run --only-balance`
runs each backend bench/run runs (`--skip-kubernetes`: etcd only).

Every time is from the agents' journals (CLOCK_MONOTONIC module_started of
each lease's module), and each run ends with scripts/check-journal
--per-lease (no lease's work ever ran on two agents at once).
"""

import statistics
import time

from balance_cluster import BalanceAgent, balanced_over, running
from cluster import ApiServer, Cluster, Timeout, Timings, mono_ns, wait_for
from run_etcd import EtcdStore

STORES = {"kubernetes": ApiServer, "etcd": EtcdStore}


def three_start(c, agents, start, timeout):
    """Starts `agents` (start(agent)); seconds from the last start until the
    last module of the balanced 4/4/4 started."""
    for a in agents:
        start(a)
    last_start = mono_ns()
    r = wait_for(lambda: balanced_over(c, [a.identity for a in agents]), timeout, "4/4/4")
    return (max(t for _, t in r.values()) - last_start) / 1e9


# Per store: etcd's renew deadline is shorter so that a TTL reading can tell
# an expiry from an outside delete or revoke (renew_deadline +
# request_timeout + 1 s <= lease_duration, transport/etcd/etcd_evidence.hpp
# `ttl_tells_expiry`; the agent's defaults satisfy it, 1.5 s of a 2 s lease
# does not, and then every killed key is held one more lease duration).
TIMINGS = {"kubernetes": Timings(), "etcd": Timings(renew=0.8, retry=0.2)}


def one_run(timeout=20.0, backend="kubernetes"):
    c = Cluster(replicas=4, agent_class=BalanceAgent, name="bench-balance",
                lease_name="bench-balance", store=STORES[backend], timings=TIMINGS[backend])
    a1, a2, a3, a4 = c.agents
    out = {}
    try:
        c.server.start()
        out["balanced_s"] = three_start(c, (a1, a2, a3), lambda a: a.start(), timeout)
        time.sleep(1.0)   # settled

        before = {m: who for m, (who, _) in running(c).items()}
        t = mono_ns()
        a4.start()
        r = wait_for(lambda: balanced_over(c, [a.identity for a in c.agents]), timeout, "3/3/3/3")
        out["join_s"] = (max(ts for who, ts in r.values() if who == a4.identity) - t) / 1e9
        out["join_moves"] = sum(1 for m, (who, _) in r.items() if who != before[m])
        time.sleep(1.0)

        for key, victim, stop in (("sigterm_ms", a1, lambda a: a.signal(15)),
                                  ("sigkill_ms", a2, lambda a: a.kill())):
            mine = [m for m, (who, _) in running(c).items() if who == victim.identity]
            rest = [a.identity for a in c.agents if a.alive() and a is not victim]
            t = mono_ns()
            stop(victim)
            r = wait_for(lambda: balanced_over(c, rest), timeout, f"{key} takeover")
            out[key] = (max(r[m][1] for m in mine) - t) / 1e6
            if key == "sigterm_ms":
                victim.wait_exit()
            time.sleep(0.5)

        # Every agent stops (releasing its leases; the Lease objects stay), and
        # three start again: no creation hold this time.
        c.stop_agents()
        out["rebalanced_s"] = three_start(c, (a1, a2, a3), lambda a: a.restart(), timeout)
        c.check(stop=True, per_lease=True)
        out["safe"] = True
        c.close(ok=True)
    except (Timeout, AssertionError) as e:
        out["error"] = str(e).splitlines()[0]
        c.close(ok=False)
    return out


def balance_figures(runs, backend="kubernetes"):
    """Runs the scenario `runs` times on `backend` (kubernetes: a fresh
    leasehold-apiserver each; etcd: a fresh 3-member etcd cluster each) and
    prints the table; returns the raw runs."""
    store = "API server" if backend == "kubernetes" else "3-member etcd cluster"
    t = TIMINGS[backend]
    print(f"\nbalance groups on {backend}: 12 balanced ticker modules, real agents, "
          f"lease {t.lease:g} s, renew {t.renew:g} s, retry {t.retry:g} s, settle 1 s; "
          f"{runs} runs, fresh {store} each")
    res = [one_run(backend=backend) for _ in range(runs)]
    ok = [r for r in res if "error" not in r]
    for r in res:
        if "error" in r:
            print(f"  a run failed: {r['error']}")

    def cell(key, fmt, scale=1.0, minus=0.0):
        v = [r[key] * scale - minus for r in ok]
        if not v:
            return "never"
        return (f"median {fmt.format(statistics.median(v))}, max {fmt.format(max(v))}")

    rows = [
        ("3 agents start: 4/4/4 after the last start", cell("balanced_s", "{:.2f} s"),
         "2 s (a fresh store: each new Lease is held one lease duration from its create)"),
        ("3 agents restart onto the Leases: 4/4/4 after the last start",
         cell("rebalanced_s", "{:.2f} s"), "2 s"),
        ("a 4th joins: its 3 running after its start", cell("join_s", "{:.2f} s"), "2 s"),
        ("a 4th joins: leases moved", cell("join_moves", "{:.0f}"), "at most ceil(12/4) = 3"),
        ("SIGTERM: its leases run elsewhere", cell("sigterm_ms", "{:.0f} ms"), "100 ms"),
        ("SIGKILL: its leases run elsewhere, beyond the lease (2 s)",
         cell("sigkill_ms", "{:+.0f} ms", minus=2000.0), "lease duration + 1 s"),
    ]
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'':<{width}}{'measured':<32}goal")
    for label, value, goal in rows:
        print(f"{label:<{width}}{value:<32}{goal}")
    print(f"  safety: check-journal --per-lease clean in {sum(1 for r in ok if r.get('safe'))} "
          f"of {runs} runs")
    return res
