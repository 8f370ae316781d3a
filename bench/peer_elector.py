#!/usr/bin/python3
"""The peer: the Python kubernetes client's own leader election
(kubernetes.leaderelection, ConfigMapLock), used as its example does, with a
leader-only ticker, writing a leasehold-format journal for check-journal.

    peer_elector.py --server URL --identity ID --journal FILE [--lease-name N]
                    [--lock configmap|lease]

--lock lease: a coordination.k8s.io/v1 Lease (LeaseLock below) judged by
client-go's rule (isLeaseValid): a record another holds is valid until the
time this peer observed it change plus the RECORD's leaseDurationSeconds.
The stock elector uses its own configured duration instead: pointed at a
Lease bound to a leasehold session (written rarely, with a long duration) it
would take it over after 3 s, which is why ClientGoElection reads the record.

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
import datetime
import json
import os
import threading
import time

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.client.rest import ApiException
from kubernetes.leaderelection.resourcelock.configmaplock import ConfigMapLock

LEASE, RENEW, RETRY = 3, 2, 1


class LeaseLock:
    """client-go's LeaseLock: get, create and update of a Lease; an update
    replaces the spec of the object last read, so its metadata (labels,
    annotations, resourceVersion: a conflict fails) stays."""

    def __init__(self, name, namespace, identity):
        self.name, self.namespace, self.identity = name, namespace, identity
        self.api = client.CoordinationV1Api()
        self.lease = None

    def get(self, name, namespace):
        try:
            self.lease = self.api.read_namespaced_lease(name, namespace)
            return True, self.lease.spec
        except ApiException as e:
            return False, e

    def create(self, name, namespace, spec):
        try:
            self.lease = self.api.create_namespaced_lease(namespace, client.V1Lease(
                metadata=client.V1ObjectMeta(name=name), spec=spec))
            return True
        except ApiException:
            return False

    def update(self, name, namespace, spec):
        self.lease.spec = spec
        try:
            self.lease = self.api.replace_namespaced_lease(name, namespace, self.lease)
            return True
        except ApiException:
            return False


class ClientGoElection(leaderelection.LeaderElection):
    """client-go's tryAcquireOrRenew over a LeaseLock: a record held by
    another is left alone while observed_time + its leaseDurationSeconds
    has not passed; the leader keeps acquireTime, a new holder counts a
    transition."""

    def try_acquire_or_renew(self):
        c, lock = self.election_config, self.election_config.lock
        now = datetime.datetime.now(datetime.timezone.utc)
        found, old = lock.get(lock.name, lock.namespace)
        spec = client.V1LeaseSpec(holder_identity=lock.identity, acquire_time=now, renew_time=now,
                                  lease_duration_seconds=c.lease_duration, lease_transitions=0)
        if not found:
            if old.status != 404 or not lock.create(lock.name, lock.namespace, spec):
                return False
            self.observed_record, self.observed_time_milliseconds = spec, time.time() * 1000
            return True
        if old != self.observed_record:
            self.observed_record, self.observed_time_milliseconds = old, time.time() * 1000
        if (old.holder_identity and old.holder_identity != lock.identity and
                self.observed_time_milliseconds + (old.lease_duration_seconds or 0) * 1000
                > time.time() * 1000):
            return False
        if old.holder_identity == lock.identity:
            spec.acquire_time, spec.lease_transitions = old.acquire_time, old.lease_transitions
        else:
            spec.lease_transitions = (old.lease_transitions or 0) + 1
        if not lock.update(lock.name, lock.namespace, spec):
            return False
        self.observed_record, self.observed_time_milliseconds = spec, time.time() * 1000
        return True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--journal", required=True)
    p.add_argument("--lease-name", default="peer-lock")
    p.add_argument("--tick-ms", type=int, default=100)
    p.add_argument("--lock", choices=("configmap", "lease"), default="configmap")
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

    lease = a.lock == "lease"
    lk = (LeaseLock if lease else ConfigMapLock)(a.lease_name, "default", a.identity)
    conf = electionconfig.Config(lk, LEASE, RENEW, RETRY, leading, stopped)
    try:
        (ClientGoElection if lease else leaderelection.LeaderElection)(conf).run()
        log("elector_returned")
    except Exception as e:  # noqa: BLE001 - what the library lets escape
        log("elector_crashed", reason=repr(e)[:200])
    # Like a program that calls run() once: nothing elects again.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
