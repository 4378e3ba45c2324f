"""cluster.py — a real 3-member etcd cluster and onced replicas on it, as
child processes, for the fault campaigns (the Python twin of
tests/etcd_procs.c and tests/cluster.c: the same flags, free loopback
ports, ipc:// paths in a temp dir of their own; or, given a netns.Net,
each process in its own network namespace on its own addresses, the
replicas on tcp://, for the partition nemeses).

Owns: the etcd member and onced replica processes, their data folders and
logs under one temp dir; starting, signalling (SIGKILL, SIGSTOP, SIGCONT),
restarting and stopping them; finding the etcd leader (etcdctl endpoint
status) and the onced leader (as a client finds it: libonce follows the
followers' NOT_LEADER hints; once_client_route names the target).
Invariant: every wait is bounded; stop() continues every stopped process
and ends every child it started, whatever happened before.
Never: touches a process it did not start, or an address it did not pick.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

import once
from once import _lib

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"
# Ports on a namespace's own addresses (netns.py), by network.
NS_PORTS = {"peer": 2380, "etcd": 2379, "service": 7000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """One child process that can be killed, paused and started again."""

    def __init__(self, name: str, argv: List[str], log: str,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.name, self.argv, self.log, self.env = name, argv, log, env
        self.p: Optional[subprocess.Popen] = None
        self.stopped = False

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.p = subprocess.Popen(self.argv, stdout=log,
                                      stderr=subprocess.STDOUT, env=self.env,
                                      start_new_session=True)
        self.stopped = False

    @property
    def running(self) -> bool:
        return self.p is not None and self.p.poll() is None

    def signal(self, sig: int) -> None:
        if not self.running:
            return
        if sig == signal.SIGKILL:
            self.p.kill()
            self.p.wait(timeout=10)
            self.stopped = False
            return
        os.kill(self.p.pid, sig)
        self.stopped = sig == signal.SIGSTOP

    def stop(self, timeout: float = 20) -> Optional[int]:
        """SIGCONT, SIGTERM, wait; SIGKILL after timeout. The exit status
        (None when it had to be killed)."""
        if self.p is None:
            return 0
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGCONT)
            self.p.terminate()
            try:
                return self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None
        return self.p.returncode


class Cluster:
    """3 etcd members and n onced replicas (onced --replicate)."""

    def __init__(self, onced: str, n: int = 3, ttl_s: int = 2,
                 env: Optional[Dict[str, str]] = None,
                 keep: bool = False, net=None) -> None:
        """net: a built netns.Net (each process in its own namespace, on
        its addresses, replicas on tcp://); None: loopback ports and
        ipc:// paths."""
        self.dir = tempfile.mkdtemp(prefix="once-campaign-", dir="/tmp")
        self.onced, self.ttl_s, self.keep, self.net = onced, ttl_s, keep, net
        self.etcd: List[Proc] = []
        self.replicas: List[Proc] = []
        if net is None:
            peer = [f"http://127.0.0.1:{free_port()}" for _ in range(3)]
            self.client_urls = [f"http://127.0.0.1:{free_port()}"
                                for _ in range(3)]
            self.urls = [f"ipc://{self.dir}/r{i}.ipc" for i in range(n)]
        else:
            peer = ["http://%s:%d" % self._at(f"e{i}", "peer")
                    for i in range(3)]
            self.client_urls = ["http://%s:%d" % self._at(f"e{i}", "etcd")
                                for i in range(3)]
            self.urls = ["tcp://%s:%d" % self._at(f"r{i}", "service")
                         for i in range(n)]
        self.endpoints = ",".join(self.client_urls)
        initial = ",".join(f"m{i}={u}" for i, u in enumerate(peer))
        for i in range(3):
            argv = self._in(f"e{i}") + [
                ETCD, "--name", f"m{i}", "--data-dir",
                f"{self.dir}/m{i}", "--listen-client-urls",
                self.client_urls[i], "--advertise-client-urls",
                self.client_urls[i], "--listen-peer-urls", peer[i],
                "--initial-advertise-peer-urls", peer[i],
                "--initial-cluster", initial, "--initial-cluster-token",
                f"once-campaign-{self.dir}", "--initial-cluster-state",
                "new", "--max-request-bytes", "2097152"]
            self.etcd.append(Proc(f"etcd{i}", argv, f"{self.dir}/m{i}.log"))
        self.cluster_name = f"c{os.getpid()}"
        renv = dict(os.environ, **(env or {}))
        for i in range(n):
            argv = self._in(f"r{i}") + [
                onced, "--data", f"{self.dir}/data{i}", "--listen",
                self.urls[i], "--replicate", self.endpoints, "--cluster",
                self.cluster_name, "--replicate-ttl", str(ttl_s)]
            self.replicas.append(Proc(f"r{i}", argv,
                                      f"{self.dir}/onced{i}.log", renv))

    def _in(self, member: str) -> List[str]:
        """The argv prefix that runs a program in member's namespace."""
        return [] if self.net is None else self.net.ns(member)

    def _at(self, member: str, net: str):
        """(address, port) of member's listener on net (with a Net)."""
        return self.net.addr(member, net), NS_PORTS[net]

    def member(self, p: "Proc") -> str:
        """p's name in the Net: e<i> for etcd<i>, r<j> for r<j>."""
        return "e" + p.name[4:] if p.name.startswith("etcd") else p.name

    def path(self, member: str, link: str):
        """What cutting member's link cuts, as a probe sees it: (the
        namespace to connect from, the listeners it then cannot reach).
        A replica's etcd link: from it to every etcd member's client
        URL; its service link: from the root namespace (the clients) to
        its --listen; an etcd member's peer link: from it to the other
        members' peer URLs."""
        if link == "etcd":
            return member, [self._at(f"e{i}", "etcd")
                            for i in range(len(self.etcd))]
        if link == "service":
            return "root", [self._at(member, "service")]
        return member, [self._at(f"e{i}", "peer")
                        for i in range(len(self.etcd)) if f"e{i}" != member]

    # ---- start and stop ------------------------------------------------------

    def start(self) -> None:
        for p in self.etcd:
            p.start()
        self._wait(self._etcd_ready, 60, "etcd to grant a lease")
        for p in self.replicas:
            p.start()
        if self.onced_leader(timeout=60) is None:
            raise TimeoutError("no onced replica leads after 60 s")

    def _etcd_ready(self) -> bool:
        for p in self.etcd:
            if not p.running:
                raise TimeoutError(f"{p.name} exited (a port taken?)")
        return self.etcdctl(["lease", "grant", "5"]) is not None

    def _wait(self, cond, timeout: float, what: str):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = cond()
            if v is not None and v is not False:
                return v
            time.sleep(0.1)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    def stop(self, remove: bool = True) -> Dict[str, Optional[int]]:
        """Stops everything (replicas first); their exit statuses. The
        folder goes too, unless keep or not remove (then: remove())."""
        st = {p.name: p.stop() for p in self.replicas}
        for p in self.etcd:
            p.stop()
        if remove:
            self.remove()
        return st

    def remove(self) -> None:
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def all_procs(self) -> List[Proc]:
        return self.replicas + self.etcd

    def heal(self) -> List[str]:
        """Every stopped process continued, every dead one started again;
        the ones that were dead, with their exit status (outside a kill
        of the nemesis, a process that died did so by itself)."""
        dead = []
        if self.net is not None:
            self.net.heal_all()
        for p in self.all_procs():
            if p.running and p.stopped:
                p.signal(signal.SIGCONT)
        for p in self.etcd + self.replicas:
            if p.p is not None and not p.running:
                dead.append(f"{p.name} exited by itself (status "
                            f"{p.p.returncode})")
                self.restart(p)
        return dead

    def restart(self, p: Proc) -> None:
        if p in self.etcd and "new" in p.argv:
            p.argv[p.argv.index("new")] = "existing"
        p.start()

    def dump_logs(self, limit: int = 4000) -> str:
        out = []
        for p in self.all_procs():
            try:
                with open(p.log, "rb") as f:
                    f.seek(0, 2)
                    f.seek(max(0, f.tell() - limit))
                    out.append(f"---- {p.log} (last {limit} bytes)\n"
                               + f.read().decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)

    # ---- leaders ---------------------------------------------------------------

    def etcdctl(self, args: List[str], endpoints: Optional[str] = None,
                timeout: float = 5) -> Optional[str]:
        try:
            r = subprocess.run([ETCDCTL, "--endpoints",
                                endpoints or self.endpoints,
                                "--command-timeout", "2s"] + args,
                               capture_output=True, text=True,
                               timeout=timeout,
                               env=dict(os.environ, ETCDCTL_API="3"))
        except subprocess.TimeoutExpired:
            return None
        return r.stdout if r.returncode == 0 else None

    def etcd_leader(self) -> Optional[int]:
        """The index of the etcd member that leads (endpoint status of the
        running members), or None."""
        live = [i for i, p in enumerate(self.etcd)
                if p.running and not p.stopped]
        out = self.etcdctl(["endpoint", "status", "-w", "json"],
                           ",".join(self.client_urls[i] for i in live))
        if out is None:
            return None
        try:
            st = json.loads(out)
        except json.JSONDecodeError:
            return None
        for s in st:
            h = s.get("Status", {})
            if h.get("leader") and h.get("leader") == \
                    h.get("header", {}).get("member_id"):
                return self.client_urls.index(s["Endpoint"])
        return None

    def onced_leader(self, timeout: float = 10) -> Optional[int]:
        """The replica a client of every URL ends up sending to after a
        Stats call answered OK (libonce follows NOT_LEADER hints), or
        None when none answered within timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with once.Client(",".join(self.urls), lease=False,
                                 deadline_ms=3000, attempt_timeout_ms=500,
                                 backoff_max_ms=100) as c:
                    c.stats()
                    return self.urls.index(route_url(c))
            except (once.OnceError, ValueError):
                time.sleep(0.2)
        return None


class _Route(ctypes.Structure):
    _fields_ = [("url", ctypes.c_char * 256), ("index", ctypes.c_uint32),
                ("urls", ctypes.c_uint32), ("not_leader", ctypes.c_uint64),
                ("hints_followed", ctypes.c_uint64),
                ("hints_ignored", ctypes.c_uint64),
                ("rotations", ctypes.c_uint64)]


def route_url(c: once.Client) -> str:
    """The URL c sends its calls to now (once_client_route)."""
    r = _Route()
    h = c._enter()
    try:
        _lib.lib.once_client_route(ctypes.c_void_p(h), ctypes.byref(r))
    finally:
        c._leave()
    return r.url.decode()
