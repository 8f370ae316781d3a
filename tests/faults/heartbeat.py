#!/usr/bin/python3
"""Leader-only work for the fenced fault cases: run by the exec module.

Appends to FILE, one line each, flushed:
  start <mono_ns> <pid> <identity> <term> <fence_file> <grandchild_pid>
  hb <mono_ns> <pid> <identity>            every 5 ms (CLOCK_MONOTONIC)
A `sleep` grandchild shares its process group (it must die with it).
--ignore-term: SIGTERM is ignored (only SIGKILL ends it).
"""
import os
import signal
import subprocess
import sys
import time

path = sys.argv[1]
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
me = os.getpid()
ident = os.environ.get("LEASEHOLD_IDENTITY", "?")
os.write(fd, (f"start {time.monotonic_ns()} {me} {ident} {os.environ.get('LEASEHOLD_TERM', '?')} "
              f"{os.environ.get('LEASEHOLD_FENCE_FILE', '-')} {grandchild.pid}\n").encode())
for _ in range(10_000_000):   # bounded: ~14 h at 5 ms
    os.write(fd, f"hb {time.monotonic_ns()} {me} {ident}\n".encode())
    time.sleep(0.005)
