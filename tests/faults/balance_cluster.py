"""Balance groups on real agents, shared by bench/balance.py and
scripts/demo-balance: agents whose leader-only work is 12 ticker modules
w-00..w-11 in the balance group "workers" (each under its own Lease, named
after it) beside a "tick" module on the agents' own lease, and what the
agents' journals and health ports say about who runs what."""

from cluster import Agent, http_json

M = 12
WORK = [f"w-{k:02d}" for k in range(M)]
GROUP = "workers"


class BalanceAgent(Agent):
    """An agent of tests/faults/cluster.py with the 12 balanced tickers."""

    def modules(self, enabled):
        return ([{"name": n, "type": "ticker", "balance": GROUP, "enabled": enabled,
                  "settings": {"interval_ms": 500}} for n in WORK]
                + super().modules(enabled))

    def health_port(self):
        """The port of the "agent started" log line, or None before it."""
        addr = self.health_addr()
        return int(addr.rsplit(":", 1)[1]) if addr else None

    def leads(self):
        """The work leases this agent says it leads (/debug/state), or None."""
        port = self.health_port()
        if port is None or not self.alive():
            return None
        try:
            st = http_json(f"http://127.0.0.1:{port}/debug/state", timeout=2.0)
        except OSError:
            return None
        return {l["lease"] for l in st["leases"] if l.get("leading") and l["group"] == GROUP}


def running(c):
    """module -> (identity, mono_ns of its start) for every balanced module a
    live agent of cluster `c` runs now (from the journals)."""
    out = {}
    for a in c.agents:
        if not a.alive():
            continue
        for ev in a.events():
            m = ev.get("module")
            if m not in WORK:
                continue
            if ev.get("event") == "module_started":
                out[m] = (a.identity, ev["mono_ns"])
            elif ev.get("event") in ("module_stopped", "module_killed", "module_crashed") \
                    and out.get(m, ("",))[0] == a.identity:
                del out[m]
    return out


def balanced_over(c, names):
    """The running map when every module runs on one of `names`, each with
    floor or ceil of M; else None."""
    r = running(c)
    if len(r) != M or any(who not in names for who, _ in r.values()):
        return None
    counts = [sum(1 for who, _ in r.values() if who == n) for n in names]
    return r if max(counts) - min(counts) <= 1 else None
