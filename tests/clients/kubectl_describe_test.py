#!/usr/bin/python3
"""`kubectl describe lease` lists the agent's Events, as docs/operations.md
promises: one agent leads a Lease on leasehold-apiserver (tests/faults/
cluster.py), kubectl describes that Lease and its Events section shows
"<identity> became leader"; after the agent's graceful SIGTERM it also shows
"<identity> stopped leading". describe lists only the Events whose
involvedObject has the Lease's uid (its field selector names uid, name,
namespace and kind), so the Events the API stored must carry that uid.
The agent's Lease is bound to its session: `kubectl get leases -L
leasehold.io/session` shows the session in a SESSION column, and `-l
leasehold.io/session=<session>` lists what the process holds.

Exit 77 (skipped) when kubectl is not on PATH.
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "faults"))
from cluster import Cluster, wait_for  # noqa: E402


def main():
    if shutil.which("kubectl") is None:
        print("skipped: kubectl is not on PATH")
        return 77
    with Cluster(1, name="describe", lease_name="described") as c:
        agent = c.wait_leader()
        kubeconfig = os.path.join(c.workdir, "kubeconfig")
        with open(kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config",
                       "clusters": [{"name": "lh", "cluster": {"server": c.server.url}}],
                       "contexts": [{"name": "lh", "context": {"cluster": "lh",
                                                               "namespace": "default"}}],
                       "current-context": "lh", "users": []}, f)

        def kubectl(*args):
            env = dict(os.environ, HOME=c.workdir, KUBECONFIG=kubeconfig)
            p = subprocess.run(["kubectl", "--cache-dir", os.path.join(c.workdir, "cache"), *args],
                               capture_output=True, text=True, timeout=20, env=env)
            assert p.returncode == 0, f"kubectl {' '.join(args)}: {p.stderr}"
            return p.stdout

        def events_section():
            out = kubectl("describe", "lease", c.lease_name)
            return out[out.index("\nEvents:"):] if "\nEvents:" in out else ""

        became = f"{agent.identity} became leader"
        # Events are posted best-effort after the fact: wait for the API to have it.
        wait_for(lambda: became in kubectl("get", "events"), 10, "the Event in `kubectl get events`")
        section = wait_for(lambda: (lambda s: s if became in s else None)(events_section()), 10,
                           f'"{became}" under Events in `kubectl describe lease`')
        assert "LeaderElection" in section, section
        print(f"kubectl describe lease {c.lease_name}:{section.rstrip()}")

        # What the API stored: the Lease's uid on every Event about it.
        uid = kubectl("get", "lease", c.lease_name, "-o", "jsonpath={.metadata.uid}")
        assert uid, "the Lease has no uid"
        items = json.loads(kubectl("get", "events", "-o", "json"))["items"]
        involved = [e["involvedObject"] for e in items]
        assert involved and all(o.get("uid") == uid and o.get("kind") == "Lease"
                                and o.get("apiVersion") == "coordination.k8s.io/v1"
                                and o.get("name") == c.lease_name
                                and o.get("namespace") == "default" for o in involved), \
            f"involvedObject of the Events: {involved}, the Lease's uid {uid}"

        session = "lh-session-" + agent.identity
        table = kubectl("get", "leases", "-L", "leasehold.io/session").splitlines()
        assert "SESSION" in table[0], table
        row = [r for r in table if r.split()[0] == c.lease_name]
        assert row and row[0].split()[-1] == session and agent.identity in row[0], table
        held = kubectl("get", "leases", "-l", f"leasehold.io/session={session}", "-o", "name")
        assert held.split() == [f"lease.coordination.k8s.io/{c.lease_name}"], held
        assert kubectl("get", "lease", session, "-o",
                       "jsonpath={.spec.holderIdentity}") == agent.identity
        print("\n".join(table))

        rc = c.stop_agents()[agent.identity]
        assert rc == 0, f"the agent exited {rc} on SIGTERM"
        stopped = f"{agent.identity} stopped leading"
        section = wait_for(lambda: (lambda s: s if stopped in s else None)(events_section()), 10,
                           f'"{stopped}" under Events after SIGTERM')
        print(f"after SIGTERM:{section.rstrip()}")
    print("kubectl describe lease: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
