#!/usr/bin/python3
"""The README's demo command, run as the test suite runs it (binaries from
LEASEHOLD_BUILD_ROOT): it must pass its own checks, and its closing table
must have a row for every agent, the one that never led too, and explain
its columns. Then `scripts/demo balance`. With the argument `etcd`:
`scripts/demo --backend etcd` alone, its rows labelled for etcd."""

import os
import re
import subprocess
import sys

ROOT = os.environ.get("LEASEHOLD_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
DEMO = os.path.join(ROOT, "scripts", "demo")
ETCD = sys.argv[1:] == ["etcd"]   # `demo_test.py etcd`: scripts/demo --backend etcd only
failures = []
outputs = []


def run(args, timeout):
    r = subprocess.run([DEMO] + args, capture_output=True, text=True, timeout=timeout)
    outputs.append(r.stdout + r.stderr)
    if r.returncode != 0:
        failures.append(f"demo {' '.join(args)}: exit {r.returncode}")
    return r.stdout + r.stderr


def check_table(out, fault_row, other_row, fault_words):
    """The closing table: a row for every agent, the fault's own label (not
    the other backend's), and a legend for its columns."""
    for agent in ("agent-1", "agent-2", "agent-3"):
        if not re.search(rf"^{agent}\s+\d+\s+[\d.]+\s+\d+\s+(yes|no)$", out, re.M):
            failures.append(f"no table row for {agent}")
    for words in ("replica: every agent of the demo", "recovery ms:", "fence: whether",
                  "fault: the " + fault_words):
        if words not in out:
            failures.append(f"the legend does not explain {words!r}")
    if not re.search(rf"^{fault_row}\s", out, re.M):
        failures.append(f"no {fault_row} row")
    if re.search(rf"^{other_row}\s", out, re.M):
        failures.append(f"a {other_row} row on this backend")


if ETCD:
    # The etcd rows are labelled for etcd (an etcd run has no API outage).
    check_table(run(["--backend", "etcd"], 110), "etcd-quorum-lost-5s", "api-down-5s",
                "etcd quorum loss")
else:
    check_table(run([], 110), "api-down-5s", "etcd-quorum-lost-5s", "API outage")
    # scripts/demo balance: its own checks, and a `kubectl
    # get leases` table after every step.
    balance_out = run(["balance"], 60)
    if balance_out.count("$ kubectl get leases -n default") != 6:
        failures.append("demo balance: not one kubectl get leases table per step")
    for step in ("SIGKILL agent-3", "start agent-4", "leasehold yield --to",
                 "leasehold yield --lease", "SIGTERM agent-2"):
        if ">>> " + step not in balance_out:
            failures.append(f"demo balance: no step {step!r}")
if failures:
    print("\n".join(outputs))
    print("demo test: " + "; ".join(failures))
    sys.exit(1)
print("demo test: ok")
