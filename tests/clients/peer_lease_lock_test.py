#!/usr/bin/python3
"""Does bench/peer_elector.py --lock lease judge a Lease by the record's
leaseDurationSeconds, as client-go does? A Lease held by "x" with a 60 s
duration (a bound lease's shape) must not be taken within 10 s by a peer
configured for 3 s; released, it is taken within a few retry periods, its
labels and annotations kept. Exits 77 (skipped) without python3-kubernetes.

usage: peer_lease_lock_test.py PATH/TO/leasehold-apiserver PATH/TO/peer_elector.py
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    from kubernetes import client
except ImportError:
    print("skipped: python3-kubernetes is not installed (scripts/setup installs it)")
    sys.exit(77)

NAME, NS = "peer-lock", "default"


def main():
    server = subprocess.Popen([sys.argv[1], "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    hello = json.loads(server.stdout.readline())
    port = hello["port"]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    peer = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            config = client.Configuration()
            config.host = "http://127.0.0.1:%d" % port
            api = client.CoordinationV1Api(client.ApiClient(config))
            now = datetime.datetime.now(datetime.timezone.utc)
            api.create_namespaced_lease(NS, client.V1Lease(
                metadata=client.V1ObjectMeta(name=NAME, labels={"keep": "label"},
                                             annotations={"keep": "annotation"}),
                spec=client.V1LeaseSpec(holder_identity="x", lease_duration_seconds=60,
                                        acquire_time=now, renew_time=now, lease_transitions=4)))
            journal = os.path.join(tmp, "peer.jsonl")
            peer = subprocess.Popen([sys.executable, sys.argv[2], "--server", config.host,
                                     "--identity", "peer", "--journal", journal,
                                     "--lock", "lease"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and peer.poll() is None:
                held = api.read_namespaced_lease(NAME, NS).spec.holder_identity
                if held != "x":
                    break
                time.sleep(0.2)
            with urllib.request.urlopen("http://127.0.0.1:%d/_leasehold/stats"
                                        % hello["control_port"], timeout=5) as r:
                reads = json.load(r)["by_identity"].get("peer", {}).get("by_verb", {}).get("get", 0)
            check(peer.poll() is None and reads >= 5, "the peer runs and reads (%d GETs)" % reads)
            check(held == "x", "a record of 60 s is not taken within 10 s (holder %r)" % held)

            lease = api.read_namespaced_lease(NAME, NS)   # released as client-go does
            lease.spec = client.V1LeaseSpec(lease_duration_seconds=1, lease_transitions=4,
                                            acquire_time=now, renew_time=now)
            api.replace_namespaced_lease(NAME, NS, lease)
            released = time.monotonic()
            while time.monotonic() < released + 5:
                lease = api.read_namespaced_lease(NAME, NS)
                if lease.spec.holder_identity == "peer":
                    break
                time.sleep(0.05)
            took = time.monotonic() - released
            check(lease.spec.holder_identity == "peer",
                  "the released lease is taken within 5 s (%.2f s)" % took)
            check(lease.spec.lease_duration_seconds == 3 and lease.spec.lease_transitions == 5,
                  "the peer writes its own duration and counts a transition")
            check(lease.metadata.labels == {"keep": "label"}
                  and (lease.metadata.annotations or {}).get("keep") == "annotation",
                  "labels and annotations kept")
            with open(journal) as f:
                events = [json.loads(line)["event"] for line in f]
            check("term_acquired" in events, "the peer journaled its term")
        finally:
            for p in (peer, server):
                if p is not None:
                    p.kill()
                    p.wait(timeout=10)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
