#!/usr/bin/python3
"""The peer: the Python kubernetes client's own leader election
(kubernetes.leaderelection, ConfigMapLock), used as its example does, with a
leader-only ticker, writing a leasehold-format journal for check-journal.

    peer_elector.py --server URL --identity ID --journal FILE [--lease-name N]

Its Config rejects periods under 1 s: lease 3 s, renew 2 s, retry 1 s (its
minimums). LeaderElection.run() returns after a lost term and does not elect
again (the original bug); an API error that is not an ApiException (connection
refused) propagates out of run(). Both are journaled ("elector_returned",
"elector_crashed"); the leader-only thread is stopped only by
onstopped_leading, as in the library. Every ApiClient of the process sends
X-Leasehold-Identity (the server's /_leasehold/stats count per client);
nothing else is changed.
"""

import argparse
import json
import os
import threading
import time

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.configmaplock import ConfigMapLock

LEASE, RENEW, RETRY = 3, 2, 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--journal", required=True)
    p.add_argument("--lease-name", default="peer-lock")
    p.add_argument("--tick-ms", type=int, default=100)
    a = p.parse_args()

    cfg = client.Configuration()
    cfg.host = a.server
    client.Configuration.set_default(cfg)

    api_client_init = client.ApiClient.__init__

    def with_identity(self, *args, **kw):
        api_client_init(self, *args, **kw)
        self.set_default_header("X-Leasehold-Identity", a.identity)
    client.ApiClient.__init__ = with_identity

    journal = open(a.journal, "a", buffering=1)
    lock = threading.Lock()

    def log(event, **kw):
        line = {"mono_ns": time.monotonic_ns(), "wall": "", "identity": a.identity,
                "event": event, "term": 0, **kw}
        with lock:
            journal.write(json.dumps(line) + "\n")

    stop = threading.Event()

    def leading():
        log("term_acquired")
        log("module_started", module="tick", leader_only=True)
        n = 0
        while not stop.wait(a.tick_ms / 1000):
            n += 1
            log("module_output", module="tick", leader_only=True, detail=f"tick {n} term 0")
        log("module_stopped", module="tick", leader_only=True, reason="onstopped_leading")

    def stopped():
        log("term_lost", reason="onstopped_leading")
        stop.set()

    lk = ConfigMapLock(a.lease_name, "default", a.identity)
    conf = electionconfig.Config(lk, LEASE, RENEW, RETRY, leading, stopped)
    try:
        leaderelection.LeaderElection(conf).run()
        log("elector_returned")
    except Exception as e:  # noqa: BLE001 - what the library lets escape
        log("elector_crashed", reason=repr(e)[:200])
    # Like a program that calls run() once: nothing elects again.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
