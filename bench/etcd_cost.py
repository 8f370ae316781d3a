#!/usr/bin/python3
"""bench/etcd_cost.py: what etcd itself spends on each step of a takeover.

A SIGTERM takeover of N keys on etcd is, per key: the releasing process
reads the key and puts the released record (compare on its create
revision); the follower reads it, deletes it (compare on its mod revision)
and creates it anew (compare: absent), a new create revision being a new
term; every write is streamed to each process's prefix watch. leasehold
sends these as txns of 128 operations (etcd's --max-txn-ops). This script
starts one etcd member (tests/faults/etcd_cluster.py: 127.0.0.1, ephemeral
ports, data in /dev/shm), sends each step for N keys through the JSON
gateway in the same txns, and prints etcd's own CPU (utime+stime of its
process) and the wall time of each, without watchers and with two: the
floor under a takeover that no change of the client can lower.

    bench/etcd_cost.py                # 10,000 keys
    bench/etcd_cost.py --keys 1000 --json

Not a test; stops by itself.
"""

import argparse
import base64
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "faults"))
from etcd_cluster import EtcdCluster  # noqa: E402

OPS = 128   # etcd's --max-txn-ops, leasehold's txn size
PREFIX = "/leasehold/bench/"


def b64(s):
    return base64.b64encode(s.encode()).decode()


class Gateway:
    def __init__(self, endpoint):
        host, port = endpoint.replace("http://", "").split(":")
        self.host, self.port = host, int(port)
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def call(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = json.loads(r.read())
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {data}")
        return data

    def watch(self, seen):
        """A prefix watch in a thread; counts the events it reads in `seen`."""
        def run():
            w = http.client.HTTPConnection(self.host, self.port)
            w.request("POST", "/v3/watch", json.dumps({"create_request": {
                "key": b64(PREFIX), "range_end": b64(PREFIX[:-1] + "0"),
                "progress_notify": True}}))
            r = w.getresponse()
            while True:
                line = r.fp.readline()
                if not line:
                    return
                try:   # the chunked body's size lines are numbers: skipped
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    seen[0] += len(msg.get("result", {}).get("events", []))
        threading.Thread(target=run, daemon=True).start()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    store = EtcdCluster(1)
    store.start(0)
    store.wait_healthy()
    pid = store.procs[0].pid

    def cpu():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    try:
        g = Gateway(store.endpoints()[0])
        lease = g.call("/v3/lease/grant", {"TTL": 60})["ID"]
        record = b64(json.dumps({"holderIdentity": "replica-a", "leaseDurationSeconds": 15,
                                 "acquireTime": "2026-12-05T20:00:00.000000Z"}))
        released = b64(json.dumps({"holderIdentity": "", "leaseDurationSeconds": 1,
                                   "acquireTime": "2026-12-05T20:00:00.000000Z"}))
        keys = [b64(f"{PREFIX}lease-{i:05d}") for i in range(a.keys)]
        revisions = {}

        def batches(op):
            for i in range(0, len(keys), OPS):
                op(keys[i:i + OPS])

        def create(part):   # absent -> put: a new term
            g.call("/v3/kv/txn", {
                "compare": [{"key": k, "target": "CREATE", "result": "EQUAL",
                             "create_revision": "0"} for k in part],
                "success": [{"request_put": {"key": k, "value": record, "lease": lease}}
                            for k in part]})

        def read(part):     # what each side reads first
            r = g.call("/v3/kv/txn", {"success": [{"request_range": {"key": k}} for k in part]})
            for k, op in zip(part, r["responses"]):
                kv = op["response_range"]["kvs"][0]
                revisions[k] = (kv["create_revision"], kv["mod_revision"])

        def release(part):  # the holder's released record, same term
            g.call("/v3/kv/txn", {
                "compare": [{"key": k, "target": "CREATE", "result": "EQUAL",
                             "create_revision": revisions[k][0]} for k in part],
                "success": [{"request_put": {"key": k, "value": released, "lease": lease}}
                            for k in part]})

        def delete(part):   # the follower's delete of the unchanged record
            g.call("/v3/kv/txn", {
                "compare": [{"key": k, "target": "MOD", "result": "EQUAL",
                             "mod_revision": revisions[k][1]} for k in part],
                "success": [{"request_delete_range": {"key": k}} for k in part]})

        steps = [("create (absent -> put)", create), ("read (txn of ranges)", read),
                 ("release (put, same term)", release), ("read again", read),
                 ("delete (unchanged)", delete)]
        events = [0]
        rows = []

        def measure(label, watchers, op):
            c0, t0, e0 = cpu(), time.monotonic(), events[0]
            batches(op)
            time.sleep(0.3)   # the watch's last events
            rows.append({"step": label, "watchers": watchers,
                         "etcd_cpu_s": round(cpu() - c0, 3),
                         "wall_s": round(time.monotonic() - t0 - 0.3, 3),
                         "events": events[0] - e0})

        for label, op in steps:
            measure(label, 0, op)
        g.watch(events)
        g.watch(events)
        time.sleep(0.5)
        for label, op in steps:
            measure(label, 2, op)
    finally:
        store.close()

    if a.json:
        print(json.dumps({"keys": a.keys, "txn_ops": OPS, "rows": rows}))
        return 0
    print(f"etcd's own CPU for each takeover step on {a.keys:,} keys, txns of {OPS} "
          "operations, one member (bench/etcd_cost.py)")
    print(f"{'step':<26}{'watchers':>9}{'etcd CPU s':>12}{'wall s':>8}{'events':>8}")
    for r in rows:
        print(f"{r['step']:<26}{r['watchers']:>9}{r['etcd_cpu_s']:>12.2f}{r['wall_s']:>8.2f}"
              f"{r['events']:>8}")
    # A takeover: the holder reads and releases, the follower reads, deletes
    # and creates; two processes watch.
    by = {(r["step"], r["watchers"]): r["etcd_cpu_s"] for r in rows}
    floor = (by[("read (txn of ranges)", 2)] + by[("release (put, same term)", 2)]
             + by[("read again", 2)] + by[("delete (unchanged)", 2)]
             + by[("create (absent -> put)", 2)])
    print(f"a takeover's steps with 2 watchers: {floor:.2f} s of etcd CPU "
          f"(reads {by[('read (txn of ranges)', 2)] + by[('read again', 2)]:.2f} s of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
