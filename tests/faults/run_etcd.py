#!/usr/bin/python3
"""The etcd backend under faults, on a real 3-member etcd cluster: one meson
test per case (`etcd-<name>`).

usage: run_etcd.py NAME      run one case
       run_etcd.py --list    print the case names

Three agents (`backend: etcd`, every member's endpoint, member 0 first) run
the leader-only heartbeat child of run_fenced.py. Two verdicts per case: the
children's own heartbeat intervals never overlap, and scripts/check-journal
(no overlapping leader-only intervals, a leader within the bound after
every heal).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, Timings, mono_ns, run_cases, wait_for  # noqa: E402
from etcd_cluster import EtcdCluster  # noqa: E402
from run_fault import handover  # noqa: E402
from run_fenced import (FencedAgent, kill_agent, pid_alive, stop_group,  # noqa: E402
                        verdict as heartbeat_verdict, wait_leader_child)

# etcd lease TTLs are whole seconds: lease 3 s (TTL 3), renew deadline 2 s.
TIMINGS = Timings(lease=3.0, renew=2.0, retry=0.5, stop=0.5, backoff_min=0.3, backoff_max=1.0)
STOP_MARGIN_S = 1.0   # leader-only work gone within renew + stop + this after quorum loss
# watch-handover: a poll period (retry) long enough that a successor within
# stop + WATCH_WAKE_S of the SIGTERM is the watch's doing (the release
# puts the released record on the key, its PUT wakes the followers), not a poll's.
WATCH_TIMINGS = Timings(lease=6.0, renew=4.0, retry=2.5, stop=0.5, backoff_min=0.3,
                        backoff_max=1.0)
WATCH_WAKE_S = 0.8
CASE_TIMINGS = {"watch-handover": WATCH_TIMINGS}


class EtcdStore(EtcdCluster):
    """The 3-member cluster as the Cluster's lease store."""

    def __init__(self, workdir):
        super().__init__(3)

    def start(self, i=None):
        """Member i; without i (as Cluster starts its store) all, until healthy."""
        if i is not None:
            return super().start(i)
        for j in range(self.n):
            super().start(j)
        self.wait_healthy()
        return self

    def stop(self):
        self.close()

    def agent_config(self, agent):
        return {"backend": "etcd", "etcd": {"endpoints": self.endpoints(), "prefix": "/lh-test"}}


def terms_lost(agent):
    return [e for e in agent.events() if e.get("event") == "term_lost"]


def verdict(c, min_children=2):
    heartbeat_verdict(c, min_children)   # stops the agents; heartbeats never overlap
    c.check(stop=False)           # journals: no overlap, a leader within the bound


def keeps_term(c, leader, child, seconds):
    """The leader keeps its term (same child, no term_lost) for `seconds`."""
    time.sleep(seconds)
    assert not terms_lost(leader), f"{leader.identity} lost its term: {terms_lost(leader)}"
    assert pid_alive(child["pid"]), f"{leader.identity}'s child ended"
    now, _ = wait_leader_child(c)
    assert now is leader, f"leader changed to {now.identity}"


def case_member_kill_one(c):
    """SIGKILL of a member nobody talks to: no leader change."""
    leader, child = wait_leader_child(c)
    c.server.kill(2)
    keeps_term(c, leader, child, 2 * c.timings.lease)
    c.server.start(2)
    c.server.wait_healthy()
    verdict(c, min_children=1)


def case_member_failover(c):
    """SIGKILL of the member every agent talks to (endpoint 0): the leader
    fails over to another endpoint and keeps its term."""
    leader, child = wait_leader_child(c)
    t = mono_ns()
    c.server.kill(0)
    keeps_term(c, leader, child, 2 * c.timings.lease)
    c.server.start(0)
    c.server.wait_healthy()
    c.healed("member-0-killed", t)
    verdict(c, min_children=1)


def case_quorum_loss(c):
    """Two members killed: leader-only work stops within renew + stop
    (+ margin); nobody leads while there is no quorum; with quorum back a
    leader within the bound."""
    leader, child = wait_leader_child(c)
    t = mono_ns()
    c.server.kill(1)
    c.server.kill(2)
    bound = c.timings.renew + c.timings.stop + STOP_MARGIN_S
    wait_for(lambda: not pid_alive(child["pid"]), bound, "the leader's child to stop")
    took = (mono_ns() - t) / 1e9
    print(f"quorum lost: leader-only work stopped {took * 1000:.0f} ms after the kill "
          f"(bound {bound * 1000:.0f} ms)")
    end = time.monotonic() + c.timings.lease + 1.0
    while time.monotonic() < end:
        assert not any(a.running_child() for a in c.agents), "leader-only work without quorum"
        time.sleep(0.05)
    c.server.start(1)
    c.server.start(2)
    healed = mono_ns()
    c.server.wait_healthy()
    new, _ = wait_leader_child(c)
    print(f"quorum back: {new.identity} leads {(mono_ns() - healed) / 1e6:.0f} ms later")
    c.healed("quorum-lost", t, healed)
    verdict(c)


def case_agent_sigkill(c):
    kill_agent(c, "sigkill")
    time.sleep(1.0)
    verdict(c)


def case_agent_sigstop(c):
    stop_group(c)
    verdict(c)


def case_member_sigstop(c):
    """SIGSTOP of the member every agent talks to (a network pause) for
    longer than the lease: requests to it time out, agents fail over."""
    wait_leader_child(c)
    t = mono_ns()
    c.server.pause(0)
    try:
        time.sleep(c.timings.lease + 1.0)
        wait_leader_child(c)
    finally:
        c.server.resume(0)
    c.healed("member-0-stopped", t)
    time.sleep(1.0)
    verdict(c, min_children=1)


def case_watch_handover(c):
    """Three graceful handovers with followers watching the key: each
    successor starts within the old leader's stop plus WATCH_WAKE_S, well
    inside one poll period (2.5 s); polling alone would need up to a whole
    period. Every follower's watch was open."""
    limit = c.timings.stop + WATCH_WAKE_S
    for round_ in range(3):
        leader = c.wait_leader()
        followers = [a for a in c.agents if a is not leader and a.alive()]
        wait_for(lambda: all(watch_open(a) for a in followers), 10.0,
                 f"round {round_}: every follower's watch open")
        handover(c, f"round {round_}", limit)
    verdict(c)


def watch_open(agent):
    """The agent's log says its watch is open (its last watch message is 'open')."""
    with open(agent.log_path, encoding="utf-8", errors="replace") as f:
        said = [line for line in f if '"msg":"lease watch' in line]
    return bool(said) and '"msg":"lease watch open"' in said[-1]


class SlowStopAgent(FencedAgent):
    """Its heartbeat child ignores SIGTERM: it runs on for the exec module's
    grace (200 ms) after every stop, so a successor that started at once
    would overlap it."""
    ignore_term = True


def etcdctl(c, *args):
    out = subprocess.run(["etcdctl", "--endpoints", ",".join(c.server.endpoints()), *args],
                         env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True,
                         timeout=10, check=True)
    return out.stdout


def outside_write(c, what):
    """An operator's write from outside the protocol while a term runs:
    `etcdctl del` of the key, or `etcdctl lease revoke` of its etcd lease.
    The old leader's child runs on for its stop; nobody may start another
    child before it is gone (the heartbeats judge). Election goes on."""
    leader, child = wait_leader_child(c)
    key = f"/lh-test/default/{c.lease_name}"
    got = json.loads(etcdctl(c, "get", key, "-w", "json"))
    assert got.get("kvs"), f"no key {key}: {got}"
    t = mono_ns()
    if what == "delete":
        etcdctl(c, "del", key)
    else:
        etcdctl(c, "lease", "revoke", format(int(got["kvs"][0]["lease"]), "x"))
    wait_for(lambda: not pid_alive(child["pid"]), c.timings.renew + c.timings.stop + STOP_MARGIN_S,
             f"{leader.identity}'s child to stop after the {what}")
    new, new_child = wait_leader_child(c)
    took = (new_child["mono"] - t) / 1e6
    print(f"etcdctl {what}: {leader.identity}'s term ended; {new.identity} runs the work "
          f"{took:.0f} ms after the write")
    c.healed(f"outside-{what}", t)
    verdict(c)


def case_outside_delete(c):
    outside_write(c, "delete")


def case_outside_revoke(c):
    outside_write(c, "revoke")


def debug_state(agent):
    with open(agent.log_path) as f:
        addr = re.findall(r'"health_addr":"([^"]+)"', f.read())[-1]
    with urllib.request.urlopen(f"http://{addr}/debug/state", timeout=5) as r:
        return json.loads(r.read().decode())


def case_leader_view(c):
    """Every agent's /debug/state names the holder while its etcd lease is
    alive, the leader's own included, long after the election (a keepalive
    changes no key, so the record's age says nothing on etcd: the view
    counts from the last read that found it, or the leader's last renew)."""
    leader, _ = wait_leader_child(c)
    time.sleep(3 * c.timings.lease)
    for a in c.agents:
        st = debug_state(a)
        assert st["holder"] == leader.identity, f"{a.identity}: {st}"
        assert st["holder_age_ms"] < c.timings.lease * 1000, f"{a.identity}: {st}"
    print(f"after {3 * c.timings.lease:.0f} s every agent names {leader.identity}")
    verdict(c, min_children=1)


CASE_AGENTS = {"outside-delete": SlowStopAgent, "outside-revoke": SlowStopAgent}


def run(name, case):
    with Cluster(3, timings=CASE_TIMINGS.get(name, TIMINGS), name="etcd-" + name,
                 agent_class=CASE_AGENTS.get(name, FencedAgent),
                      lease_name="leasehold-etcd", store=EtcdStore) as c:
        case(c)
    return f"etcd-{name}"


if __name__ == "__main__":
    sys.exit(run_cases(sys.argv[1:], "run_etcd.py", globals(), run))
