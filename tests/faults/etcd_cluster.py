"""A real etcd cluster on loopback for tests (stdlib only).

    with EtcdCluster(3) as e:      # 3 members, ephemeral ports, data under a temp dir
        e.endpoints()              # ["http://127.0.0.1:P1", ...]
        e.kill(1); e.start(1)      # SIGKILL a member, start it again (same ports, same data)
        e.pause(2); e.resume(2)    # SIGSTOP / SIGCONT a member

Every member is stopped when the context ends, even on failure. Data dirs
live under /dev/shm when it exists (no disk syncs on a shared CI disk).
Raft timings are short (heartbeat 50 ms, election 500 ms) so elections
after a fault take well under a second. Also usable as a command:
`etcd_cluster.py --members 3 --dir D` starts a cluster, prints one JSON line
{"endpoints": [...], "pids": [...]} (the members' pids, for SIGSTOP) and
runs until SIGTERM (scripts/demo).
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
import urllib.request

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
HEARTBEAT_MS = 50
ELECTION_MS = 500


def free_ports(n):
    """n distinct ephemeral ports on 127.0.0.1 (bound together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def stopped(pid):
    """Every thread of process `pid` is stopped (state T in /proc)."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                stat = f.read()
            if stat[stat.rfind(")") + 2:][:1] != "T":
                return False
        return True
    except OSError:
        return False


class EtcdCluster:
    def __init__(self, members=3, workdir=None):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.own_dir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="leasehold-etcd-", dir=base)
        self.n = members
        ports = free_ports(2 * members)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:]
        self.procs = [None] * members
        self.token = f"lh-{os.getpid()}-{int(time.monotonic() * 1000)}"

    def name(self, i):
        return f"m{i}"

    def endpoint(self, i):
        return f"http://127.0.0.1:{self.client_ports[i]}"

    def endpoints(self):
        return [self.endpoint(i) for i in range(self.n)]

    def start(self, i):
        """Starts member i (again: same ports and data dir)."""
        peers = ",".join(f"{self.name(j)}=http://127.0.0.1:{self.peer_ports[j]}"
                         for j in range(self.n))
        data = os.path.join(self.workdir, self.name(i))
        cmd = [ETCD, "--name", self.name(i), "--data-dir", data,
               "--listen-client-urls", self.endpoint(i),
               "--advertise-client-urls", self.endpoint(i),
               "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
               "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
               "--initial-cluster", peers, "--initial-cluster-token", self.token,
               "--initial-cluster-state", "new",
               "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MS),
               "--logger", "zap", "--log-level", "warn"]
        log = open(os.path.join(self.workdir, f"{self.name(i)}.log"), "a")
        self.procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        log.close()

    def healthy(self, i, timeout=0.5):
        try:
            with urllib.request.urlopen(self.endpoint(i) + "/health", timeout=timeout) as r:
                return json.loads(r.read().decode()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, members=None, timeout=20.0):
        members = range(self.n) if members is None else members
        deadline = time.monotonic() + timeout
        while True:
            if all(self.healthy(i) for i in members):
                return
            for i in members:
                p = self.procs[i]
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"etcd member {i} exited ({p.returncode}); "
                                       f"log: {self.workdir}/{self.name(i)}.log")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"etcd members {list(members)} not healthy in {timeout} s")
            time.sleep(0.1)

    def kill(self, i):
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait(timeout=10)

    def pause(self, i):
        """SIGSTOP member i; returns once every thread of it is stopped (2 s at
        most): the stop takes hold after kill() returns, and a loaded machine
        let a member answer requests sent after it."""
        p = self.procs[i]
        p.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 2
        while not stopped(p.pid) and time.monotonic() < deadline:
            time.sleep(0.001)

    def resume(self, i):
        self.procs[i].send_signal(signal.SIGCONT)

    def raft_leader(self):
        """Index of the member that is raft leader (asked of any live member), or None."""
        for i in range(self.n):
            if self.procs[i] is None or self.procs[i].poll() is not None:
                continue
            try:
                req = urllib.request.Request(self.endpoint(i) + "/v3/maintenance/status",
                                             data=b"{}", method="POST")
                with urllib.request.urlopen(req, timeout=0.5) as r:
                    st = json.loads(r.read().decode())
                leader = st.get("leader")
                for j in range(self.n):
                    if self.procs[j] is None or self.procs[j].poll() is not None:
                        continue
                    req = urllib.request.Request(self.endpoint(j) + "/v3/maintenance/status",
                                                 data=b"{}", method="POST")
                    with urllib.request.urlopen(req, timeout=0.5) as r:
                        if json.loads(r.read().decode())["header"]["member_id"] == leader:
                            return j
            except (OSError, ValueError, KeyError):
                continue
        return None

    def __enter__(self):
        try:
            for i in range(self.n):
                self.start(i)
            self.wait_healthy()
        except BaseException:
            self.close(ok=False)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(ok=exc_type is None)
        return False

    def close(self, ok=True):
        for i in range(self.n):
            self.kill(i)
        if self.own_dir and (ok or os.environ.get("LEASEHOLD_KEEP_TEMP") != "1"):
            shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with EtcdCluster(a.members, a.dir) as e:
        print(json.dumps({"endpoints": e.endpoints(), "pids": [p.pid for p in e.procs]}),
              flush=True)
        while not stop:
            time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
