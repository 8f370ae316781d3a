"""A local leasehold cluster for fault tests and benchmarks (stdlib only).

One `leasehold-apiserver --port 0`, N `leasehold run` agents with short
timings, each running a leader-only ticker and writing a journal to a temp
dir. Every wait is bounded; every process is stopped when the `Cluster`
context ends, even on failure (SIGTERM, then SIGKILL after a bound). Only
127.0.0.1.

    with Cluster(3) as c:
        first = c.wait_leader()
        c.fault(mode="down"); ...; c.fault(mode="recover")
        c.healed("api-down", injected)
        c.check()          # scripts/check-journal: no overlap, leader in bound
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass

SOURCE_ROOT = os.environ.get("LEASEHOLD_SOURCE_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD_ROOT = os.environ.get("LEASEHOLD_BUILD_ROOT") or os.path.join(SOURCE_ROOT, "build")
APISERVER = os.path.join(BUILD_ROOT, "cmd", "leasehold-apiserver", "leasehold-apiserver")
AGENT = os.path.join(BUILD_ROOT, "cmd", "leasehold", "leasehold")
CHECKER = os.path.join(SOURCE_ROOT, "scripts", "check-journal")
PYTHON = "/usr/bin/python3"   # Debian's; the first python3 on PATH may be another one


def mono_ns():
    """CLOCK_MONOTONIC, the clock of the journals' mono_ns."""
    return time.monotonic_ns()


class Timeout(AssertionError):
    pass


def wait_for(pred, timeout, what, interval=0.05):
    """Polls pred() until it returns a truthy value; raises Timeout after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise Timeout(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


@dataclass
class Timings:
    lease: float = 2.0
    renew: float = 1.5
    retry: float = 0.3
    stop: float = 0.4
    backoff_min: float = 0.3
    backoff_max: float = 1.0
    margin: float = 2.0

    def bound(self):
        """Seconds from a heal until some replica leads again."""
        return self.lease + 1.2 * self.retry + self.backoff_max + self.stop + self.margin

    def exit_bound(self):
        """An agent exits within stop + 2 s after SIGTERM (agent.cpp); plus slack."""
        return self.stop + 3.0

    def config(self):
        ms = lambda s: f"{int(round(s * 1000))}ms"
        return {"lease_duration": ms(self.lease), "renew_deadline": ms(self.renew),
                "retry_period": ms(self.retry), "module_stop_timeout": ms(self.stop),
                "backoff_min": ms(self.backoff_min), "backoff_max": ms(self.backoff_max)}


def http_json(url, body=None, timeout=5.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode() or "null")


def stop_process(proc, term_bound, sig=signal.SIGTERM):
    """Signals, waits at most term_bound s, then SIGKILLs. Returns the exit code."""
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.send_signal(signal.SIGCONT)   # a paused process must see the signal
        except ProcessLookupError:
            pass
    try:
        return proc.wait(timeout=term_bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)


def first_start_after(c, t_ns, exclude=()):
    """mono_ns of the first leader-only module start after t_ns by a live agent
    not in `exclude`, or None."""
    starts = [ev["mono_ns"] for a in c.agents if a.identity not in exclude and a.alive()
              for ev in a.events()
              if ev.get("event") == "module_started" and ev.get("leader_only")
              and ev["mono_ns"] >= t_ns]
    return min(starts) if starts else None


class ApiServer:
    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.port = 0
        self.control_port = 0
        self.restarts = 0

    def start(self, port=0, timeout=10.0):
        log = open(os.path.join(self.workdir, f"apiserver.{self.restarts}.log"), "w")
        self.proc = subprocess.Popen([APISERVER, "--port", str(port)], stdout=subprocess.PIPE,
                                     stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise Timeout("leasehold-apiserver printed no port line")
        info = json.loads(self.proc.stdout.readline().decode())
        self.port, self.control_port = info["port"], info["control_port"]
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def agent_config(self, agent):
        """The agent's config fields that point it at this store: its leases
        bound to its session (LEASEHOLD_FAULT_SESSION=off: plain)."""
        return {"server": agent.relay.url if agent.relay else self.url,
                "session": os.environ.get("LEASEHOLD_FAULT_SESSION", "on")}

    def control(self, path, body=None):
        return http_json(f"http://127.0.0.1:{self.control_port}/_leasehold/{path}", body)

    def fault(self, **body):
        return self.control("faults", body)

    def stats(self):
        return self.control("stats")

    def reset_stats(self):
        return self.control("stats/reset", {})

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None:
            stop_process(self.proc, 5.0, sig)
            self.proc.stdout.close()

    def restart_same_port(self, timeout=10.0):
        """Kills the server (losing every lease) and starts a new one on the same port."""
        self.stop(signal.SIGKILL)
        self.restarts += 1
        deadline = time.monotonic() + timeout
        while True:   # the port may linger for a moment
            try:
                return self.start(self.port)
            except (Timeout, ValueError):
                stop_process(self.proc, 2.0, signal.SIGKILL)
                if time.monotonic() >= deadline:
                    raise


class Relay:
    """A TCP relay in front of the API server for one client, that can be cut:
    the agent sends no per-replica identity header and all agents share one
    User-Agent, so the server's own partition fault cannot single one out."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.cut = threading.Event()
        self.lock = threading.Lock()
        self.conns = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def set_cut(self, cut):
        if cut:
            self.cut.set()
            self._close_conns()
        else:
            self.cut.clear()

    def close(self):
        self.closed = True
        self.listener.close()
        self._close_conns()

    def _close_conns(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Agent:
    def __init__(self, cluster, identity):
        self.cluster = cluster
        self.base_identity = identity
        self.incarnation = 0
        self.dir = cluster.workdir
        self.config_path = os.path.join(self.dir, f"{identity}.json")
        self.log_path = os.path.join(self.dir, f"{identity}.log")
        self.proc = None
        self.relay = None
        self.modules_enabled = True
        self._name()

    def _name(self):
        """Each incarnation is its own replica for the checker: own identity and journal."""
        suffix = f".{self.incarnation}" if self.incarnation else ""
        self.identity = self.base_identity + suffix
        self.journal = os.path.join(self.dir, f"{self.identity}.journal")
        self.cluster.journal_paths.append(self.journal)

    @property
    def ended_ns(self):
        return self.cluster.ended.get(self.identity)

    def _ended(self):
        self.cluster.ended[self.identity] = mono_ns()

    def restart(self):
        """Stops this agent (if running) and starts a new incarnation."""
        self.stop()
        self.incarnation += 1
        self._name()
        self.start()

    def command(self):
        return [AGENT, "run", "--config", self.config_path]

    def modules(self, enabled):
        """The config's module list: one leader-only ticker."""
        return [{"name": "tick", "type": "ticker", "enabled": enabled,
                 "settings": {"interval_ms": self.cluster.tick_ms}}]

    def write_config(self, modules_enabled=True):
        """Writes the config atomically (the agent polls the file and must never see half of it)."""
        self.modules_enabled = modules_enabled
        c = self.cluster
        cfg = {"identity": self.identity, "namespace": "default", "lease_name": c.lease_name,
               **c.server.agent_config(self), "timings": c.timings.config(),
               "health_addr": "127.0.0.1:0",
               "journal": self.journal, "log_level": "info",
               "modules": self.modules(modules_enabled), **c.extra_config}
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(cfg, f, indent=1)
        os.replace(tmp, self.config_path)

    def start(self):
        if self.cluster.relays and self.relay is None:
            self.relay = Relay(self.cluster.server.port)
        self.write_config(self.modules_enabled)
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        """SIGKILL; the process does nothing after this point."""
        self.proc.kill()
        self._ended()
        self.proc.wait(timeout=10)

    def stop(self):
        """SIGTERM, SIGKILL after the exit bound. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        rc = stop_process(self.proc, self.cluster.timings.exit_bound())
        self._ended()
        return rc

    def wait_exit(self):
        """Waits for an exit already asked for (never signals again: a second
        SIGTERM makes the agent exit at once, without releasing its lease);
        SIGKILL after the exit bound. Returns the exit code."""
        if self.proc is None:
            return None
        try:
            rc = self.proc.wait(timeout=self.cluster.timings.exit_bound())
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(timeout=10)
        self._ended()
        return rc

    def events(self):
        out = []
        try:
            with open(self.journal, encoding="utf-8") as f:
                for line in f:
                    if line.endswith("\n"):
                        try:
                            out.append(json.loads(line))
                        except ValueError:
                            pass
        except FileNotFoundError:
            pass
        return out

    def log_lines(self, msg):
        """This agent's JSON log lines whose msg is `msg` (its incarnation's
        and earlier ones': the log file is appended to)."""
        out = []
        try:
            with open(self.log_path, encoding="utf-8") as f:
                for line in f:
                    try:
                        j = json.loads(line)
                    except ValueError:
                        continue
                    if j.get("msg") == msg:
                        out.append(j)
        except FileNotFoundError:
            pass
        return out

    def health_addr(self):
        """host:port of this incarnation's health server (its "agent started"
        line), or None before that line."""
        lines = [j for j in self.log_lines("agent started") if j.get("identity") == self.identity]
        return lines[-1]["health_addr"] if lines else None

    def leading_since(self):
        """mono_ns of the module_started of this agent's running leader-only module, or None."""
        running = {}
        for ev in self.events():
            if ev.get("event") == "module_started" and ev.get("leader_only"):
                running[ev.get("module")] = ev["mono_ns"]
            elif ev.get("event") in ("module_stopped", "module_killed", "module_crashed"):
                running.pop(ev.get("module"), None)
        return min(running.values()) if running and self.alive() else None

    def ticks_after(self, t_ns):
        return sum(1 for ev in self.events()
                   if ev.get("event") == "module_output" and ev.get("leader_only")
                   and str(ev.get("detail", "")).startswith("tick ")
                   and not str(ev.get("detail")).startswith("tick skipped")
                   and ev["mono_ns"] >= t_ns)


class Cluster:
    def __init__(self, replicas=3, timings=None, tick_ms=100, name="cluster", relays=False,
                 lease_name="leasehold-faults", agent_class=Agent, store=ApiServer,
                 extra_config=None):
        self.timings = timings or Timings()
        self.extra_config = extra_config or {}   # more fields of every agent's config
        self.tick_ms = tick_ms
        self.lease_name = lease_name
        self.relays = relays
        self.workdir = tempfile.mkdtemp(prefix=f"leasehold-{name}-")
        self.server = store(self.workdir)   # the lease store: start(), stop(), agent_config()
        self.journal_paths = []
        self.ended = {}   # identity -> mono_ns its process ended
        self.agents = [agent_class(self, f"agent-{i + 1}") for i in range(replicas)]
        self.heals = []
        self.keep = os.environ.get("LEASEHOLD_KEEP_TEMP") == "1"
        self.report = None

    def __enter__(self):
        try:
            self.server.start()
            for a in self.agents:
                a.start()
        except BaseException:
            self.close(ok=False)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(ok=exc_type is None)
        return False

    def stop_agents(self):
        """SIGTERMs every running agent at once; waits for all within the exit bound."""
        running = [a for a in self.agents if a.alive()]
        for a in running:
            try:
                a.signal(signal.SIGTERM)
                a.signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
        return {a.identity: a.wait_exit() for a in running}

    def close(self, ok):
        try:
            self.stop_agents()
        finally:
            for a in self.agents:
                if a.proc is not None and a.proc.poll() is None:
                    a.proc.kill()
                    a.proc.wait(timeout=10)
                if a.relay:
                    a.relay.close()
            self.server.stop()
        if ok and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            print(f"cluster files kept in {self.workdir}", file=sys.stderr)

    # --- observation -------------------------------------------------------
    def agent(self, identity):
        return next(a for a in self.agents if a.identity == identity)

    def leaders(self):
        """Agents with a leader-only module running (per their journals), alive."""
        return [a for a in self.agents if a.leading_since() is not None]

    def wait_leader(self, timeout=None, exclude=()):
        """Waits until exactly one live agent (not in exclude) leads; returns it."""
        def one():
            ls = [a for a in self.leaders() if a.identity not in exclude]
            return ls[0] if len(ls) == 1 else None
        return wait_for(one, timeout or self.timings.bound() + 5, "a leader")

    def wait_no_leader(self, timeout):
        return wait_for(lambda: not self.leaders(), timeout, "every leader-only module stopped")

    def wait_ticks(self, since_ns, n=3, timeout=None):
        return wait_for(lambda: sum(a.ticks_after(since_ns) for a in self.agents) >= n,
                        timeout or self.timings.bound() + 5, f"{n} ticks")

    # --- faults ------------------------------------------------------------
    def fault(self, **body):
        return self.server.fault(**body)

    def healed(self, name, injected_ns, healed_ns=None, exclude=()):
        """Records a fault window for the checker (liveness is measured from
        healed_ns; replicas in `exclude` do not count as a recovered leader)."""
        self.heals.append({"name": name, "injected_mono_ns": injected_ns,
                           "healed_mono_ns": healed_ns if healed_ns is not None else mono_ns(),
                           "exclude": list(exclude)})

    # --- verdict -----------------------------------------------------------
    def journals(self):
        return [p for p in self.journal_paths if os.path.exists(p)]

    def check(self, bound=None, stop=True, per_lease=False):
        """Stops the agents (unless stop=False) and runs the checker (with
        per_lease: each lease apart, for agents with balance groups). Returns
        its JSON report; raises AssertionError with its table on a violation."""
        if stop:
            self.stop_agents()
        heals_file = os.path.join(self.workdir, "heals.json")
        with open(heals_file, "w") as f:
            json.dump(self.heals, f)
        args = [PYTHON, CHECKER, "--bound", str(bound or self.timings.bound()),
                "--heals", heals_file] + (["--per-lease"] if per_lease else [])
        for identity, t in self.ended.items():
            args += ["--ended", f"{identity}={t}"]
        args += self.journals()
        table = subprocess.run(args, capture_output=True, text=True, timeout=60)
        js = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=60)
        print(table.stdout, end="")
        if table.stderr:
            print(table.stderr, end="", file=sys.stderr)
        if js.returncode not in (0, 1):
            raise AssertionError(f"check-journal failed: {js.stderr}")
        self.report = json.loads(js.stdout)
        if table.returncode != 0:
            raise AssertionError("check-journal found a violation:\n" + table.stdout)
        return self.report


def run_cases(argv, script, scope, run):
    """The command line of a fault-case script: `NAME` runs the case
    `case_NAME` found in `scope` (dashes for underscores) through
    `run(name, case) -> label`; `--list` prints the case names."""
    cases = {name[len("case_"):].replace("_", "-"): fn
             for name, fn in scope.items() if name.startswith("case_")}
    if argv == ["--list"]:
        print("\n".join(cases))
        return 0
    if len(argv) != 1 or argv[0] not in cases:
        print(f"usage: {script} NAME|--list  (cases: {', '.join(cases)})", file=sys.stderr)
        return 2
    started = time.monotonic()
    label = run(argv[0], cases[argv[0]])
    print(f"{label}: ok in {time.monotonic() - started:.1f} s")
    return 0
