#!/usr/bin/python3
"""A real Prometheus (Debian package prometheus) scraping three agents.

Starts leasehold-apiserver and three agents on loopback (cluster.py), checks
each agent's /metrics with `promtool check metrics`, then starts Prometheus
with its own config and storage in a temp dir (scrape interval 1 s, the alert
rules of deploy/monitoring/ loaded, 127.0.0.1 on a free port) and asks its
HTTP API (/api/v1/query):

- `sum(leasehold_is_leader)` and `sum by (lease) (leasehold_lease_leader)` are 1;
- the renamed and the new series are there, the labelled counters at 0;
- the alert rules evaluate without error;
- after SIGKILL of the leader, another instance is the one leader within
  the failover bound plus two scrape intervals.

Exit 77 (skipped) only when prometheus or promtool is not installed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE_ROOT, Cluster, Timeout, stop_process, wait_for  # noqa: E402

SCRAPE = 1.0   # seconds: Prometheus's scrape and rule evaluation interval
RULES = os.path.join(SOURCE_ROOT, "deploy", "monitoring", "leasehold-alerts.yaml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, workdir, targets):
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir)
        shutil.copy(RULES, self.dir)
        config = {"global": {"scrape_interval": f"{SCRAPE:g}s",
                             "evaluation_interval": f"{SCRAPE:g}s",
                             "scrape_timeout": f"{SCRAPE:g}s"},
                  "rule_files": [os.path.basename(RULES)],
                  "scrape_configs": [{"job_name": "leasehold",
                                      "static_configs": [{"targets": targets}]}]}
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            json.dump(config, f, indent=1)   # JSON is YAML
        self.proc = None
        self.port = 0

    def start(self, tries=3):
        """Starts it on a free port (another one if that was taken meanwhile)."""
        for attempt in range(tries):
            self.port = free_port()
            log = open(os.path.join(self.dir, f"prometheus.{attempt}.log"), "w")
            self.proc = subprocess.Popen(
                ["prometheus", "--config.file=" + os.path.join(self.dir, "prometheus.yml"),
                 "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            try:
                wait_for(self.ready, 30, "Prometheus ready", interval=0.2)
                return self
            except Timeout:
                stop_process(self.proc, 5)
                if attempt + 1 == tries:
                    with open(log.name) as f:
                        raise AssertionError("Prometheus did not start:\n" + f.read())
        return self

    def ready(self):
        if self.proc.poll() is not None:
            raise Timeout(f"Prometheus exited with {self.proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc, 10)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read().decode())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q):
        """An instant query's vector: [(labels, value)]."""
        return [(s["metric"], float(s["value"][1])) for s in self.api("query", query=q)["result"]]

    def scalar(self, q):
        """The value of a query with one result, else None."""
        r = self.query(q)
        return r[0][1] if len(r) == 1 else None


def metrics_text(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        return r.read().decode()


def promtool_check_metrics(text):
    """promtool's lint of one exposition: (exit code, what it said)."""
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).strip()


def main():
    missing = [t for t in ("prometheus", "promtool") if shutil.which(t) is None]
    if missing:
        print(f"skipped: {' and '.join(missing)} not on PATH (Debian package prometheus)")
        return 77
    with Cluster(3, name="prometheus") as c:
        first = c.wait_leader()
        addrs = {a.identity: wait_for(a.health_addr, 10, f"{a.identity}'s health address")
                 for a in c.agents}
        by_addr = {addr: ident for ident, addr in addrs.items()}

        for ident, addr in addrs.items():
            rc, said = promtool_check_metrics(metrics_text(addr))
            assert rc == 0 and not said, f"promtool check metrics on {ident}'s /metrics:\n{said}"
        print("promtool check metrics: every agent's /metrics passes")

        prom = Prometheus(c.workdir, list(addrs.values())).start()
        try:
            one_leader = lambda: (prom.scalar('count(up{job="leasehold"} == 1)') == 3
                                  and prom.scalar("sum(leasehold_is_leader)") == 1)
            wait_for(one_leader, 30, "Prometheus: 3 targets up, sum(leasehold_is_leader) = 1",
                     interval=0.2)
            per_lease = prom.query("sum by (lease) (leasehold_lease_leader)")
            assert per_lease == [({"lease": c.lease_name}, 1.0)], per_lease
            leader = prom.query("leasehold_is_leader == 1")
            assert len(leader) == 1, leader
            instance = leader[0][0]["instance"]
            assert by_addr[instance] == first.identity, \
                f"Prometheus says {by_addr[instance]} leads, the journals {first.identity}"
            print(f"sum(leasehold_is_leader) = 1: {first.identity} ({instance})")

            # The series an operator's rules use, on every agent.
            for q, want in [("count(leasehold_renew_deadline_seconds == 1.5)", 3),
                            ("count(leasehold_lease_duration_seconds == 2)", 3),
                            ("count(leasehold_api_unreachable_since_timestamp_seconds)", 3),
                            ('count(leasehold_api_errors_total{kind="timeout"} == 0)', 3),
                            ('count(leasehold_api_lost_races_total{kind="conflict"})', 3)]:
                got = prom.scalar(q)
                assert got == want, f"{q}: {got}, expected {want}"
            assert prom.query("leasehold_api_unreachable_since_seconds") == [], \
                "the old name leasehold_api_unreachable_since_seconds is still exported"
            rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
            assert len(rules) == 4, [r["name"] for r in rules]
            bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
            assert not bad, f"alert rules that do not evaluate: {bad}"
            print("deploy/monitoring rules: 4 loaded, every one evaluates")

            first.kill()
            killed_at = time.monotonic()
            bound = c.timings.bound() + 2 * SCRAPE + 1.0

            def new_leader():
                r = prom.query("leasehold_is_leader == 1")
                return (len(r) == 1 and r[0][0]["instance"] != instance
                        and prom.scalar("sum(leasehold_is_leader)") == 1
                        and prom.scalar(f'up{{instance="{instance}"}}') == 0
                        and r[0][0]["instance"])
            now_leading = wait_for(new_leader, bound,
                                   f"Prometheus: a new leader within {bound:.1f} s of the SIGKILL",
                                   interval=0.2)
            took = time.monotonic() - killed_at
            per_lease = prom.query("sum by (lease) (leasehold_lease_leader)")
            assert per_lease == [({"lease": c.lease_name}, 1.0)], per_lease
            print(f"after SIGKILL of {first.identity}: {by_addr[now_leading]} leads per "
                  f"Prometheus {took:.1f} s later (bound {bound:.1f} s)")
        finally:
            prom.stop()
        c.check()
    print("prometheus: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
