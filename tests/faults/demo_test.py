#!/usr/bin/python3
"""The README's demo command, run as the test suite runs it (binaries from
LEASEHOLD_BUILD_ROOT): it must pass its own checks, and its closing table
must have a row for every agent, the one that never led too, and explain
its columns (issue 21, item 13). Then `scripts/demo balance` (issue 20,
item 5)."""

import os
import re
import subprocess
import sys

ROOT = os.environ.get("LEASEHOLD_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
r = subprocess.run([os.path.join(ROOT, "scripts", "demo")], capture_output=True, text=True,
                   timeout=110)
out = r.stdout + r.stderr
failures = []
if r.returncode != 0:
    failures.append(f"exit {r.returncode}")
for agent in ("agent-1", "agent-2", "agent-3"):
    if not re.search(rf"^{agent}\s+\d+\s+[\d.]+\s+\d+\s+(yes|no)$", out, re.M):
        failures.append(f"no table row for {agent}")
for words in ("replica: every agent of the demo", "recovery ms:", "fence: whether"):
    if words not in out:
        failures.append(f"the legend does not explain {words!r}")
if not re.search(r"^api-down-5s\s", out, re.M):
    failures.append("no api-down-5s row")
# scripts/demo balance (issue 20, item 5): its own checks, and a `kubectl get
# leases` table after every step.
b = subprocess.run([os.path.join(ROOT, "scripts", "demo"), "balance"], capture_output=True,
                   text=True, timeout=60)
balance_out = b.stdout + b.stderr
if b.returncode != 0:
    failures.append(f"demo balance: exit {b.returncode}")
if balance_out.count("$ kubectl get leases -n default") != 5:
    failures.append("demo balance: not one kubectl get leases table per step")
for step in ("SIGKILL agent-3", "start agent-4", "leasehold yield --to", "SIGTERM agent-2"):
    if ">>> " + step not in balance_out:
        failures.append(f"demo balance: no step {step!r}")
if failures:
    print(out)
    print(balance_out)
    print("demo test: " + "; ".join(failures))
    sys.exit(1)
print("demo test: ok")
