#!/usr/bin/python3
"""bench/idle_cost.py: what an idle `leasehold run` agent costs.

Starts leasehold-apiserver and 2 agents (tests/faults/cluster.py: 127.0.0.1,
ephemeral ports, a leader-only ticker), waits for a leader, lets them settle,
then reads /proc over N seconds and prints, for the leader and the follower:
CPU % (utime+stime / wall), VmRSS, RssAnon and Pss KiB, thread count and
thread names (with count and CPU % per name: who wakes up).

    bench/idle_cost.py                       # both timing sets, 20 s each
    bench/idle_cost.py --timings bench --seconds 10 --tick-ms 100
    bench/idle_cost.py --json                # one JSON object per timing set
    LEASEHOLD_BUILD_ROOT=/other/build bench/idle_cost.py

Timing sets: "default" (the agent's own defaults: lease 15 s, renew 10 s,
retry 2 s; the config sets none) and "bench" (bench/run's and the fault
suite's: lease 2 s, renew 1.5 s, retry 0.3 s). Not a test; stops by itself.
"""

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "faults"))
from cluster import Cluster, Timings  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


class AgentDefaults(Timings):
    """The config sets no timings: the agent runs with its defaults."""
    def __init__(self):
        super().__init__(lease=15.0, renew=10.0, retry=2.0, stop=4.0, backoff_max=2.0)

    def config(self):
        return {}


def cpu_seconds(stat_path):
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def threads(pid):
    """{tid: (name, cpu seconds)} of the process's threads now."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
            out[tid] = (name, cpu_seconds(f"{base}/{tid}/stat"))
        except (FileNotFoundError, ProcessLookupError):
            pass   # a thread that ended meanwhile
    return out


def memory(pid):
    """VmRSS, RssAnon (private), RssFile (mapped files: mostly the shared
    libraries' pages) and Pss (shared pages divided among their users)."""
    vals = {}
    for path, keys in ((f"/proc/{pid}/status", ("VmRSS", "RssAnon", "RssFile")),
                       (f"/proc/{pid}/smaps_rollup", ("Pss",))):
        with open(path) as f:
            for line in f:
                key = line.split(":")[0]
                if key in keys:
                    vals[key] = int(line.split()[1])
    return vals


def measure(pids, seconds):
    """pids: {role: pid}. Samples every process at the same two instants."""
    t0 = time.monotonic()
    before = {r: (cpu_seconds(f"/proc/{p}/stat"), threads(p)) for r, p in pids.items()}
    time.sleep(seconds)
    after = {r: (cpu_seconds(f"/proc/{p}/stat"), threads(p), memory(p)) for r, p in pids.items()}
    wall = time.monotonic() - t0
    out = {}
    for role in pids:
        cpu0, th0 = before[role]
        cpu1, th1, mem = after[role]
        by_name = collections.OrderedDict()
        for tid, (name, c1) in sorted(th1.items(), key=lambda kv: int(kv[0])):
            c0 = th0.get(tid, (name, 0.0))[1]
            n, c = by_name.get(name, (0, 0.0))
            by_name[name] = (n + 1, c + c1 - c0)
        out[role] = {"cpu_pct": 100 * (cpu1 - cpu0) / wall, "rss_kib": mem.get("VmRSS"),
                     "rss_anon_kib": mem.get("RssAnon"), "rss_file_kib": mem.get("RssFile"),
                     "pss_kib": mem.get("Pss"),
                     "threads": len(th1),
                     "by_name": {k: {"count": n, "cpu_pct": round(100 * c / wall, 2)}
                                 for k, (n, c) in by_name.items()}}
    return out


def run(timings_name, seconds, settle, tick_ms):
    timings = AgentDefaults() if timings_name == "default" else Timings()
    with Cluster(2, timings=timings, tick_ms=tick_ms, name="idle-cost",
                 lease_name="leasehold-idle-cost") as c:
        leader = c.wait_leader(timeout=timings.lease + 15)
        follower = next(a for a in c.agents if a is not leader)
        time.sleep(settle)
        result = measure({"leader": leader.pid, "follower": follower.pid}, seconds)
        if c.wait_leader(timeout=1) is not leader:
            raise SystemExit("the leader changed while measuring: figures discarded")
    return result


def print_table(timings_name, seconds, tick_ms, r):
    print(f"\n== timings: {timings_name}, {seconds:.0f} s idle, leader-only ticker every "
          f"{tick_ms} ms ==")
    print(f"{'role':<9}{'CPU %':>7}{'RSS KiB':>9}{'anon KiB':>9}{'PSS KiB':>9}{'threads':>8}"
          "  thread names (count, CPU %)")
    for role, v in r.items():
        names = ", ".join(f"{k} x{d['count']} {d['cpu_pct']:.2f}"
                          for k, d in sorted(v["by_name"].items(),
                                             key=lambda kv: -kv[1]["cpu_pct"]))
        print(f"{role:<9}{v['cpu_pct']:>7.2f}{v['rss_kib']:>9}{v['rss_anon_kib']:>9}"
              f"{v['pss_kib']:>9}{v['threads']:>8}  {names}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measuring window")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="wait after the leader is elected before measuring")
    ap.add_argument("--timings", choices=["default", "bench", "both"], default="both")
    ap.add_argument("--tick-ms", type=int, default=1000,
                    help="interval of the leader-only ticker module")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of tables")
    a = ap.parse_args(argv)
    sets = ["default", "bench"] if a.timings == "both" else [a.timings]
    for name in sets:
        r = run(name, a.seconds, a.settle, a.tick_ms)
        if a.json:
            print(json.dumps({"timings": name, "seconds": a.seconds, "tick_ms": a.tick_ms,
                              **r}), flush=True)
        else:
            print_table(name, a.seconds, a.tick_ms, r)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
