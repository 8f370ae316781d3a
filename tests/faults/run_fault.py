#!/usr/bin/python3
"""Fault cases: one per meson test (`fault-<name>`).

usage: run_fault.py NAME      run one case
       run_fault.py --list    print the case names (one per line)

Each case starts a cluster (tests/faults/cluster.py), waits for a leader,
injects its fault, heals it, lets the cluster settle, stops every process and
runs scripts/check-journal: zero overlapping leader-only intervals, zero
stray ticks, and a leader within Timings.bound() of every heal.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, run_cases, first_start_after, mono_ns, wait_for  # noqa: E402

SETTLE = 2.0   # seconds of leader-only work required after a heal


def outage(c, name, fault, seconds):
    """A leader; `fault` for `seconds`; recover; a leader runs leader-only work again."""
    c.wait_leader()
    t0 = mono_ns()
    c.fault(**fault)
    time.sleep(seconds)
    if seconds > c.timings.renew + c.timings.stop + 0.5:
        # Nobody could renew for longer than the renew deadline: nobody may still lead.
        c.wait_no_leader(0.5)
    c.fault(mode="recover")
    c.healed(name, t0)
    healed = c.heals[-1]["healed_mono_ns"]
    c.wait_leader()
    c.wait_ticks(healed)
    time.sleep(SETTLE)


def case_api_down(c):
    outage(c, "api-down", {"mode": "down"}, c.timings.lease + 1.5)


def case_api_hang(c):
    outage(c, "api-hang", {"mode": "hang"}, c.timings.lease + 1.5)


def case_error_503(c):
    outage(c, "error-503", {"mode": "error", "status": 503}, c.timings.lease + 1.5)


def case_error_429(c):
    outage(c, "error-429", {"mode": "error", "status": 429, "retry_after": 1},
           c.timings.lease + 1.5)


def case_latency(c):
    # Every answer arrives after the renew deadline: no renew can succeed in time.
    outage(c, "latency", {"latency_ms": int(c.timings.renew * 1000) + 500}, c.timings.lease + 2)


def case_partition_leader(c):
    """The leader alone loses the API: it must stop before another takes over."""
    old = c.wait_leader()
    t0 = mono_ns()
    old.relay.set_cut(True)
    new = c.wait_leader(exclude=(old.identity,))
    c.healed("partition-leader", t0, t0, exclude=(old.identity,))   # liveness: a new leader within the bound of the cut
    assert old.leading_since() is None, f"{old.identity} still leads after {new.identity} took over"
    time.sleep(1.0)
    old.relay.set_cut(False)
    time.sleep(c.timings.lease + SETTLE)
    assert c.wait_leader().identity == new.identity, "the healed replica took the lease back"


def case_leader_sigkill(c):
    old = c.wait_leader()
    t0 = mono_ns()
    old.kill()
    c.healed("leader-sigkill", t0, t0, exclude=(old.identity,))
    c.wait_leader(exclude=(old.identity,))
    c.wait_ticks(mono_ns())
    time.sleep(SETTLE)


def case_leader_sigstop(c):
    """A paused leader resumes after another took over: it must do no leader-only
    work past its fence (checked by the checker's fence rule)."""
    old = c.wait_leader()
    t0 = mono_ns()
    old.signal(signal.SIGSTOP)
    try:
        c.healed("leader-sigstop", t0, t0, exclude=(old.identity,))
        # Its journal still says "running": look for the new leader's ticks instead.
        others = [a for a in c.agents if a is not old]
        c.wait_ticks(t0 + int(c.timings.lease * 1e9), n=3)
        assert any(a.ticks_after(t0) for a in others)
        time.sleep(1.0)
    finally:
        old.signal(signal.SIGCONT)
    time.sleep(c.timings.lease + SETTLE)
    assert old.leading_since() is None, f"{old.identity} still runs its module after resuming"


def case_api_wipe(c):
    c.wait_leader()
    t0 = mono_ns()
    c.fault(wipe=True)
    c.healed("api-wipe", t0, t0)
    c.wait_ticks(mono_ns() + int(c.timings.renew * 1e9))
    time.sleep(SETTLE)


def case_api_restart(c):
    """Kill the API server and start a new one, empty, on the same port."""
    c.wait_leader()
    t0 = mono_ns()
    c.server.restart_same_port()
    c.healed("api-restart", t0)
    c.wait_leader()
    c.wait_ticks(c.heals[-1]["healed_mono_ns"])
    time.sleep(SETTLE)


def case_config_toggle(c):
    """Disable every leader-only module on every agent, then re-enable them."""
    c.wait_leader()
    t0 = mono_ns()
    for a in c.agents:
        a.write_config(modules_enabled=False)
    c.wait_no_leader(1.0 + c.timings.stop + 3.0)     # config poll 1 s + stop + slack
    time.sleep(c.timings.lease)
    for a in c.agents:
        a.write_config(modules_enabled=True)
    c.healed("config-toggle", t0)
    c.wait_leader()
    c.wait_ticks(c.heals[-1]["healed_mono_ns"])
    time.sleep(SETTLE)


def case_sigterm_handover(c):
    """Five graceful handovers: one SIGTERM, the leader releases, and a
    follower takes the released lease at its next poll, never at expiry
    (a second signal, which exits at once, is never sent)."""
    # Within the old leader's stop and release plus one poll, well before the
    # lease could have expired.
    limit = min(c.timings.stop + 1.2 * c.timings.retry, c.timings.lease * 0.75)
    for round_ in range(5):
        handover(c, f"round {round_}", limit)
    time.sleep(SETTLE)


def handover(c, label, limit):
    """SIGTERM the leader; a successor starts leader-only work within `limit` s."""
    old = c.wait_leader()
    t0 = mono_ns()
    old.signal(signal.SIGTERM)
    assert old.wait_exit() == 0, f"{label}: {old.identity} did not exit cleanly"
    t = wait_for(lambda: first_start_after(c, t0, (old.identity,)), c.timings.lease + 2.0,
                 f"{label}: a new leader", interval=0.02)
    ms = (t - t0) / 1e6
    print(f"{label}: handover {ms:.0f} ms")
    assert ms < limit * 1000, f"{label}: the successor took {ms:.0f} ms (limit {limit * 1000:.0f})"
    old.restart()
    time.sleep(0.5)


def case_watch_faults(c):
    """Every way a watch stream fails, each while the leader hands over: the
    followers fall back to polling (a handover within the old leader's stop
    plus one poll, never at expiry) and come back to the watch after."""
    poll = 1.2 * c.timings.retry
    slow = c.timings.stop + poll + 0.3
    faults = [
        ("close-every-300ms", {"close_after_ms": 300}),
        ("reset-every-300ms", {"close_after_ms": 300, "close": "reset"}),
        ("hang", {"hang": True}),
        ("malformed-lines", {"malformed_lines": 50}),
        ("error-events", {"error_events": 50, "error_status": 500}),
    ]
    handover(c, "healthy watch", c.timings.stop + 0.3)
    for label, watch in faults:
        t0 = mono_ns()
        c.fault(watch=watch)
        time.sleep(c.timings.lease)   # long enough for a hung stream to be noticed (idle = lease)
        handover(c, label, slow)
        c.fault(watch=None)
        c.healed("watch-" + label, t0)
    handover(c, "watch back", c.timings.stop + 0.3)
    time.sleep(SETTLE)


def delete_lease(c):
    req = urllib.request.Request(
        f"{c.server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/{c.lease_name}",
        method="DELETE")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200, r.status


def case_lease_deleted(c):
    """An operator deletes the Lease (kubectl delete lease). While its leader
    runs, the leader puts its record back and nobody else leads. After the
    leader is SIGKILLed and the Lease deleted, a follower leads once the last
    record it saw has expired by its clock, not before."""
    leader = c.wait_leader()
    t0 = mono_ns()
    delete_lease(c)
    time.sleep(c.timings.lease + 1.0)
    assert leader.leading_since() is not None, f"{leader.identity} stopped leading after the delete"
    c.healed("lease-deleted-while-led", t0, t0)
    leader = c.wait_leader()
    t1 = mono_ns()
    leader.signal(signal.SIGKILL)
    leader.wait_exit()
    delete_lease(c)
    t = wait_for(lambda: first_start_after(c, t1, (leader.identity,)), c.timings.lease * 3 + 2.0,
                 "a leader after the leader died and its Lease was deleted", interval=0.02)
    ms = (t - t1) / 1e6
    print(f"takeover after SIGKILL + delete: {ms:.0f} ms")
    # The successor waits out the dead leader's last record (a lease duration
    # by its clock), then creates the Lease and waits one more lease duration
    # before its term starts (a created lease; see docs/safety.md).
    assert ms >= c.timings.lease * 1000, f"took over after {ms:.0f} ms, before the lease expired"
    c.healed("lease-deleted-after-sigkill", t1)
    leader.restart()
    time.sleep(SETTLE)


def case_original_bug(c):
    """The original report, scaled: leading, the cluster gone for ~2 min (12 s
    here, 6 leases), back: a leader-only module must run again."""
    outage(c, "original-bug", {"mode": "down"}, 12.0)


PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                    "peer_elector.py")


def case_foreign_peer(c):
    """A peer that is not leasehold (client-go's rule: the record's own
    leaseDurationSeconds from when it saw it change; bench/peer_elector.py
    --lock lease) elects on the agents' bound Lease. While an agent leads it
    never does, across a refresh of the record. After every agent is
    SIGKILLed it leads once the record's duration has passed since its last
    change, not before: bound leases look held longer, never free."""
    leader = c.wait_leader()
    journal = os.path.join(c.workdir, "peer.jsonl")
    c.journal_paths.append(journal)
    log = open(os.path.join(c.workdir, "peer.log"), "w")
    peer = subprocess.Popen([sys.executable, PEER, "--server", c.server.url, "--identity", "peer",
                             "--journal", journal, "--lease-name", c.lease_name, "--lock", "lease"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()

    def record():
        url = f"{c.server.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/{c.lease_name}"
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())

    def peer_started():
        if not os.path.exists(journal):
            return None
        with open(journal) as f:
            starts = [json.loads(x)["mono_ns"] for x in f if '"module_started"' in x]
        return starts[0] if starts else None

    try:
        first = record()
        bound_s = first["spec"]["leaseDurationSeconds"]
        assert "leasehold.io/session" in first["metadata"].get("annotations", {}), first["metadata"]
        assert bound_s >= 4 * c.timings.lease, bound_s
        # Past one refresh (half the duration): the peer sees the record change and waits on.
        deadline = time.monotonic() + bound_s * 0.7
        while time.monotonic() < deadline:
            assert peer_started() is None, "the peer led while an agent held the bound Lease"
            assert peer.poll() is None, "the peer exited"
            time.sleep(0.2)
        refreshed = record()
        assert refreshed["spec"]["renewTime"] != first["spec"]["renewTime"], "no refresh"
        last_change = mono_ns()   # no earlier than when the peer last saw the record change
        for a in c.agents:
            a.signal(signal.SIGKILL)
            a.wait_exit()
        t = wait_for(peer_started, bound_s + 10.0, "the peer leading after every agent died",
                     interval=0.05)
        waited = (t - last_change) / 1e9
        print(f"peer led {waited:.1f} s after the record last changed (bound {bound_s} s)")
        assert waited >= bound_s * 0.5, waited   # the record's rest, not the peer's own 3 s
    finally:
        peer.terminate()
        peer.wait(timeout=10)


def run(name, case):
    extra = {"session_lease_seconds": 1} if name == "foreign-peer" else None
    with Cluster(3, name=name, relays=(name == "partition-leader"), extra_config=extra) as c:
        case(c)
        c.check()
    return f"fault-{name}"


if __name__ == "__main__":
    sys.exit(run_cases(sys.argv[1:], "run_fault.py", globals(), run))
