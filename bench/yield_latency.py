#!/usr/bin/python3
"""bench/yield_latency.py: how fast leadership moves on request.
Not a test.

    bench/yield_latency.py [--runs 40]

Three agents (tests/faults/cluster.py: leasehold-apiserver, watch, lease 2 s /
renew 1.5 s / retry 300 ms / stop 400 ms, a leader-only ticker) and two series:

- yield: `leasehold yield --to B` sent to the leader A (t0, CLOCK_MONOTONIC,
  just before the command starts) -> B's leader-only module_started in its
  journal. Issue target: median < 50 ms.
- preferredHolder: a merge PATCH of the Lease setting spec.preferredHolder = B
  (and a strategy) on the API server (t0 just before the request) -> B's
  module_started. Issue target: p99 < 200 ms (client-go waits a lease duration).

Every run also checks the order: A's module_stopped <= B's module_started
(never two at once); a run where B is not the one that starts, or the order
is wrong, is reported and counted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "faults"))
from cluster import AGENT, Cluster, Timings, mono_ns, wait_for  # noqa: E402


def health_addr(agent):
    """The health address the agent's "agent started" line names."""
    return wait_for(agent.health_addr, 10, f"{agent.identity} started")


def start_after(agent, t_ns, event="module_started"):
    evs = [ev["mono_ns"] for ev in agent.events()
           if ev.get("event") == event and ev.get("module") == "tick" and ev["mono_ns"] >= t_ns]
    return min(evs) if evs else None


def candidates(agent):
    """The replicas `agent` lists as candidates of its lease (/debug/state)."""
    with urllib.request.urlopen(f"http://{health_addr(agent)}/debug/state", timeout=5) as r:
        leases = json.loads(r.read()).get("leases") or [{}]
    return leases[0].get("candidates") or []


def patch_preferred(c, target):
    url = (f"{c.server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/"
           f"{c.lease_name}")
    body = json.dumps({"spec": {"preferredHolder": target,
                                "strategy": "OldestEmulationVersion"}}).encode()
    req = urllib.request.Request(url, data=body, method="PATCH",
                                 headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        r.read()


def series(c, runs, how):
    out, bad = [], []
    for i in range(runs):
        leader = c.wait_leader()
        target = next(a for a in c.agents if a is not leader)
        time.sleep(0.3)   # the followers have seen the term (watch), steady state
        t0 = mono_ns()
        if how == "yield":
            r = subprocess.run([AGENT, "yield", "--to", target.identity,
                                "--health-addr", health_addr(leader)],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                bad.append(f"run {i}: exit {r.returncode}: {r.stderr.strip()}")
                continue
        else:
            patch_preferred(c, target.identity)
        started = wait_for(lambda: start_after(target, t0), 10, f"{target.identity} leads")
        stopped = start_after(leader, t0, "module_stopped")
        if stopped is None or stopped > started:
            bad.append(f"run {i}: {leader.identity} stopped at {stopped}, "
                       f"{target.identity} started at {started}")
        out.append((started - t0) / 1e6)
        time.sleep(1.5)   # past the yielder's window: it is a plain follower again
    return out, bad


def describe(name, ms, bad):
    if not ms:
        return f"{name}: no successful run; {bad}"
    q = sorted(ms)
    p99 = q[min(len(q) - 1, int(round(0.99 * (len(q) - 1))))]
    return (f"{name}: n={len(ms)} median {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, "
            f"min {q[0]:.1f} ms, max {q[-1]:.1f} ms; wrong successor or order: {len(bad)}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=40)
    a = p.parse_args()
    with Cluster(replicas=3, timings=Timings(), name="yield") as c:
        c.wait_leader()
        # A yield or a preferredHolder names only a replica that announces the lease.
        for agent in c.agents:
            wait_for(lambda: len(candidates(agent)) == len(c.agents), 15,
                     f"{agent.identity} lists every agent as a candidate")
        results = {how: series(c, a.runs, how) for how in ("yield", "preferredHolder")}
    for how, (ms, bad) in results.items():
        print(describe(f"{how} -> successor's module running", ms, bad))
        for b in bad:
            print("  " + b)


if __name__ == "__main__":
    main()
