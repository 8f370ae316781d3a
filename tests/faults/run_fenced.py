#!/usr/bin/python3
"""Fenced exec children under faults: one meson test per case (`fenced-<name>`).

usage: run_fenced.py NAME      run one case
       run_fenced.py --list    print the case names

Three agents (own process group each) run a leader-only `exec` module whose
child (tests/faults/heartbeat.py) appends its own CLOCK_MONOTONIC heartbeats
to a file. The verdict reads the heartbeats themselves, not the journals:
the [first, last] heartbeat intervals of all children must not overlap, and
measured bounds are asserted with margin: after SIGKILL (or a second
SIGTERM) of the agent its child's group is gone within 100 ms; with the
agent's group stopped the child dies no later than the fence's valid-until
+ 50 ms, before another replica's child starts.
"""

import json
import os
import re
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Agent, Cluster, run_cases, mono_ns, wait_for  # noqa: E402

HEARTBEAT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heartbeat.py")
PYTHON = "/usr/bin/python3"
GONE_BOUND_MS = 100      # child group gone after the agent died
FENCE_SLACK_MS = 50      # child dead after its fence's valid-until


def proc_stat(pid):
    """(state, pgrp) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return rest[0], int(rest[2])


def pid_alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def group_alive(pgid):
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
                return True
    return False


def wait_gone(pids, pgid, bound_s):
    """Polls every ~1 ms until none of pids nor group pgid lives; returns
    the seconds it took, or None after bound_s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound_s:
        if not any(pid_alive(p) for p in pids) and not group_alive(pgid):
            return time.monotonic() - t0
        time.sleep(0.001)
    return None


class FencedAgent(Agent):
    ignore_term = False

    @property
    def hb_path(self):
        return os.path.join(self.dir, f"{self.identity}.hb")

    def modules(self, enabled):
        command = [PYTHON, HEARTBEAT, self.hb_path] + (["--ignore-term"] if self.ignore_term else [])
        return [{"name": "work", "type": "exec", "enabled": enabled,
                 "settings": {"command": command, "grace_ms": 200}}]

    def command(self):
        # setsid: its own process group, so "stop the agent's group" stops the agent only.
        return ["setsid"] + super().command()

    def starts(self):
        """The heartbeat children this incarnation started: dicts from 'start' lines."""
        out = []
        try:
            with open(self.hb_path) as f:
                for line in f:
                    p = line.split()
                    if p and p[0] == "start" and len(p) == 7 and line.endswith("\n"):
                        out.append({"mono": int(p[1]), "pid": int(p[2]), "term": p[4],
                                    "fence": p[5], "grandchild": int(p[6])})
        except FileNotFoundError:
            pass
        return out

    def running_child(self):
        """The live heartbeat child of this agent, or None."""
        live = [s for s in self.starts() if pid_alive(s["pid"])]
        return live[-1] if live else None

    def metric(self, name):
        with urllib.request.urlopen(f"http://{self.health_addr()}/metrics", timeout=5) as r:
            text = r.read().decode()
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(found.group(1)) if found else None


def heartbeat_intervals(cluster):
    """[(first_ns, last_ns, identity, pid)] of every child, from its own heartbeats."""
    spans = {}
    for name in os.listdir(cluster.workdir):
        if not name.endswith(".hb"):
            continue
        with open(os.path.join(cluster.workdir, name)) as f:
            for line in f:
                p = line.split()
                if len(p) >= 4 and p[0] in ("hb", "start") and line.endswith("\n"):
                    key = (p[3], int(p[2]))
                    t = int(p[1])
                    lo, hi = spans.get(key, (t, t))
                    spans[key] = (min(lo, t), max(hi, t))
    return sorted((lo, hi, k[0], k[1]) for k, (lo, hi) in spans.items())


def overlaps(cluster):
    """Pairs of children whose heartbeat intervals overlap (leader-only work at once)."""
    spans = heartbeat_intervals(cluster)
    bad = []
    for i, a in enumerate(spans):
        for b in spans[i + 1:]:
            if b[0] <= a[1]:
                bad.append((a, b, (a[1] - b[0]) / 1e6))
    return spans, bad


def wait_leader_child(c, exclude=()):
    """The agent whose heartbeat child runs, once exactly one does; and that child."""
    def one():
        live = [(a, a.running_child()) for a in c.agents if a.alive() and a.identity not in exclude]
        live = [(a, ch) for a, ch in live if ch is not None]
        return live[0] if len(live) == 1 else None
    return wait_for(one, c.timings.bound() + 5, "one leader-only child running")


def verdict(c, min_children=2):
    c.stop_agents()
    spans, bad = overlaps(c)
    print(f"{len(spans)} leader-only children; overlaps: {len(bad)}")
    for a, b, ms in bad:
        print(f"  OVERLAP {ms:.1f} ms: {a[2]} pid {a[3]} and {b[2]} pid {b[3]}")
    assert not bad, "leader-only work overlapped"
    assert len(spans) >= min_children, f"expected at least {min_children} leader-only children"


def kill_agent(c, how):
    """SIGKILL (or SIGTERM twice) the leader; its child group is gone within the bound."""
    old, child = wait_leader_child(c)
    time.sleep(0.3)
    if how == "sigkill":
        old.proc.kill()
    else:
        old.signal(signal.SIGTERM)
        time.sleep(0.01)
        old.signal(signal.SIGTERM)
    old.proc.wait(timeout=10)
    old._ended()
    took = wait_gone([child["pid"], child["grandchild"]], child["pid"], 2.0)
    assert took is not None, f"{how}: child of {old.identity} still alive 2 s after the agent died"
    print(f"{how}: child group gone {took * 1000:.1f} ms after the agent exited "
          f"(exit status {old.proc.returncode})")
    assert took * 1000 < GONE_BOUND_MS, f"{how}: child group gone only after {took * 1000:.1f} ms"
    if how == "sigterm-twice":
        assert old.proc.returncode in (130, 0), f"exit status {old.proc.returncode}"
    new, _ = wait_leader_child(c, exclude=(old.identity,))
    return old, new


def stop_group(c):
    """SIGSTOP of the leader's process group (the agent only; the keeper is
    elsewhere) for longer than the lease: its child dies by valid-until + 50 ms,
    before another replica's child starts; SIGCONT: it steps down cleanly."""
    old, child = wait_leader_child(c)
    time.sleep(0.5)
    os.killpg(old.pid, signal.SIGSTOP)
    stopped_at = mono_ns()
    try:
        time.sleep(0.05)   # an extension already on its way lands in the file
        with open(child["fence"]) as f:
            valid_until = json.load(f)["valid_until_mono_ns"]
        assert valid_until > stopped_at - 10**9, "fence file is stale"
        t = None
        while mono_ns() < valid_until + 2 * 10**9:
            if not pid_alive(child["pid"]) and not group_alive(child["pid"]):
                t = mono_ns()
                break
            time.sleep(0.001)
        assert t is not None, "the child outlived its fence by 2 s"
        late_ms = (t - valid_until) / 1e6
        print(f"agent group stopped: child gone {late_ms:.1f} ms after its fence's valid-until "
              f"({(valid_until - stopped_at) / 1e6:.0f} ms after the stop)")
        assert late_ms <= FENCE_SLACK_MS, f"child killed {late_ms:.1f} ms after valid-until"
        assert not pid_alive(child["grandchild"])
        new, new_child = wait_leader_child(c, exclude=(old.identity,))
        assert new_child["mono"] > t, "another replica started its child before ours was dead"
        print(f"next child started {(new_child['mono'] - t) / 1e6:.0f} ms after ours died")
        time.sleep(c.timings.lease)   # stopped longer than the lease
    finally:
        os.killpg(old.pid, signal.SIGCONT)
    time.sleep(c.timings.lease + 1.0)
    assert old.alive(), f"{old.identity} died after SIGCONT"
    assert old.running_child() is None, f"{old.identity} runs leader-only work after resuming"
    lost = [e for e in old.events() if e.get("event") == "term_lost"]
    assert lost, f"{old.identity} did not step down"
    assert old.log_lines("leader-only child killed at its fence"), "no fence-kill log line"
    kills = old.metric("leasehold_fence_kills_total")
    assert kills == 1, f"leasehold_fence_kills_total {kills}"
    assert old.proc.poll() is None
    return old


def case_agent_sigkill(c):
    kill_agent(c, "sigkill")
    time.sleep(1.0)
    verdict(c)


def case_second_sigterm(c):
    # FencedAgent.ignore_term is set for this case: only a SIGKILL ends the child.
    kill_agent(c, "sigterm-twice")
    time.sleep(1.0)
    verdict(c)


def case_agent_group_sigstop(c):
    stop_group(c)
    verdict(c)


def case_faults(c):
    """SIGKILL, agent-only SIGSTOP, API outage, partition, SIGTERM of the
    leader, in turn; zero overlapping leader-only work across all of it."""
    old, _ = kill_agent(c, "sigkill")
    old.restart()
    stop_group(c)
    wait_leader_child(c)
    c.fault(mode="down")
    time.sleep(c.timings.lease + 1.0)
    assert not any(a.running_child() for a in c.agents), "leader-only work during the outage"
    c.fault(mode="recover")
    old, _ = wait_leader_child(c)
    old.relay.set_cut(True)
    wait_leader_child(c, exclude=(old.identity,))
    old.relay.set_cut(False)
    old, _ = wait_leader_child(c)
    assert old.stop() == 0
    wait_leader_child(c, exclude=(old.identity,))
    time.sleep(1.0)
    verdict(c)


def run(name, case):
    FencedAgent.ignore_term = name == "second-sigterm"
    with Cluster(3, name="fenced-" + name, relays=(name == "faults"), agent_class=FencedAgent,
                 lease_name="leasehold-fenced") as c:
        case(c)
    return f"fenced-{name}"


if __name__ == "__main__":
    sys.exit(run_cases(sys.argv[1:], "run_fenced.py", globals(), run))
