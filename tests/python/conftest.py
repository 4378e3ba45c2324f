"""conftest.py — fixtures of the Python client's tests: a real onced per
test (and, when asked, a real once_proxy in front of it).

Owns: one temp dir per onced (/tmp/once-py-XXXX: data dir, ipc socket,
log), the onced child process (the build tree's, ONCED_PATH), its start,
readiness wait, SIGSTOP/SIGCONT, kill and clean stop, and the once_proxy
child (ONCE_PROXY_PATH).
Invariant: every wait is bounded in time; teardown stops what it started
and fails the test when onced did not exit 0 (a valgrind run makes a
memory error exit 99); no two fixtures share a directory or socket.
Never: mocks onced, or leaves a child running.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ONCE_BUILD_DIR", ROOT / "build"))
if str(BUILD / "python") not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(BUILD / "python"))

import once  # noqa: E402

ONCED = os.environ.get("ONCED_PATH", str(BUILD / "server" / "onced"))
ONCECTL = os.environ.get("ONCECTL_PATH", str(BUILD / "cli" / "oncectl"))
PROXY = os.environ.get("ONCE_PROXY_PATH", str(BUILD / "bench" / "once_proxy"))
# make valgrind: every onced runs under this command (tests/harness.c too).
WRAPPER = shlex.split(os.environ.get("ONCE_TEST_ONCED_WRAPPER", ""))
# Time bounds grow when onced runs under valgrind.
SLOW = 20 if WRAPPER else 1
READY_S = 10 * SLOW


def wait_for(cond, timeout: float, what: str, step: float = 0.01):
    """Polls cond() until it is true (returns its value) or fails."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for "
                                 f"{what}")
        time.sleep(step)



def _thread_states(pid: int) -> List[str]:
    """The state letter of every thread of pid (from /proc)."""
    states = []
    task = Path(f"/proc/{pid}/task")
    for t in task.iterdir():
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        states.append(stat[stat.rindex(")") + 2])
    return states


class Onced:
    """One onced on a fresh data dir and ipc socket."""

    def __init__(self, args: List[str] = (), dev: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="once-py-", dir="/tmp"))
        self.data = self.dir / "data"
        self.url = f"ipc://{self.dir}/onced.ipc"
        self.log = self.dir / "onced.log"
        self.args = list(args) + (["--dev"] if dev else [])
        self.dev = dev
        self.proc: Optional[subprocess.Popen] = None
        # The test SIGKILLed onced itself (kill(), stop_signal(SIGKILL)):
        # then a -9 exit is expected. A SIGTERM that hangs is not.
        self.killed = False
        self.hung = False

    @property
    def dev_key(self) -> str:
        return str(self.data / "dev.key")

    def start(self) -> "Onced":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                WRAPPER + [ONCED, "--data", str(self.data), "--listen",
                           self.url] + self.args,
                stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, READY_S, "onced to answer Stats", 0.05)
        if any(a in ("--http-listen", "--metrics-listen") for a in self.args):
            # Its HTTP listeners open after the nng ones (server/main.c),
            # then it logs "ready": Stats over nng can answer before they
            # accept (seen under valgrind: curl refused at once).
            wait_for(lambda: b"ready (pid" in self.log.read_bytes(),
                     READY_S, "onced to log ready (its HTTP listeners)",
                     0.05)
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"onced exited {self.proc.returncode}:\n"
                                 + self.log.read_text())
        if self.dev and not os.path.exists(self.dev_key):
            return False
        try:
            with once.Client(self.url, lease=False, deadline_ms=1000 * SLOW,
                             key_file=self.dev_key if self.dev else None) as c:
                c.stats()
            return True
        except once.OnceError:
            return False

    def stop_signal(self, sig: int) -> None:
        """Sends sig; for SIGSTOP, returns once every thread of onced is
        stopped (kill returns before they are, and a request sent in
        between would still be answered)."""
        self.killed = self.killed or sig == signal.SIGKILL
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            wait_for(lambda: all(s in "Tt" for s in
                                 _thread_states(self.proc.pid)),
                     10 * SLOW, "onced's threads to stop on SIGSTOP", 0.005)

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10 * SLOW)

    def stop(self) -> int:
        """SIGTERM, then waits; returns the exit status. onced that does not
        exit within the bound is SIGKILLed and marked hung."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30 * SLOW)
        except subprocess.TimeoutExpired:
            self.hung = True
            self.proc.kill()
            self.proc.wait()
            return -9

    def principal(self, name: str, role: str) -> str:
        """Adds a principal with oncectl; returns its key file."""
        key = self.dir / f"{name.replace(':', '_')}.key"
        subprocess.run([ONCECTL, "principal", "add", name, "--role", role,
                        "--data", str(self.data), "--key-out", str(key)],
                       check=True, capture_output=True, timeout=30)
        # onced notices a changed principals file by itself within its
        # recheck interval; SIGHUP makes it re-read now. Either way the new
        # table is in force once a call signed with the new key goes
        # through (a lease of one second, left to expire).
        if self.proc is None or self.proc.poll() is not None:
            return str(key)  # read at the next start
        os.kill(self.proc.pid, signal.SIGHUP)

        def signed_call_ok() -> bool:
            return subprocess.run(
                [ONCECTL, "--server", self.url, "--key-file", str(key),
                 "lease", "open", "--ttl", "1s"],
                capture_output=True, timeout=30).returncode == 0
        wait_for(signed_call_ok, 10 * SLOW, f"onced to load principal {name}",
                 0.1)
        return str(key)

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """bench/once_proxy between clients and an onced."""

    def __init__(self, back: str, dir: Path, args: List[str]) -> None:
        self.url = f"ipc://{dir}/proxy.ipc"
        self.proc = subprocess.Popen(
            [PROXY, "--front", self.url, "--back", back, "--quiet"] + args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.url[len("ipc://"):]), 10,
                 "once_proxy to listen")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def onced_factory():
    """onced_factory(args=[...], dev=False) starts an onced; all are stopped
    at teardown and must exit 0."""
    started: List[Onced] = []

    def make(args: List[str] = (), dev: bool = False) -> Onced:
        o = Onced(args, dev)
        started.append(o)
        return o.start()

    yield make
    bad = []
    for o in started:
        rc = o.stop()
        if o.hung:
            bad.append(f"onced did not stop within {30 * SLOW} s of SIGTERM "
                       f"(SIGKILLed):\n{o.log.read_text()}")
        elif rc != 0 and not (o.killed and rc == -signal.SIGKILL):
            bad.append(f"onced exited {rc}:\n{o.log.read_text()}")
        o.cleanup()
    assert not bad, "\n".join(bad)


@pytest.fixture
def onced(onced_factory) -> Onced:
    """A plain onced (OPEN mode: no principals file)."""
    return onced_factory()


class Clock:
    """onced_test's wall clock: the offset it adds, read from a file at
    every reading (ONCED_CLOCK_OFFSET_FILE)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(0)

    def set(self, offset_ms: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(offset_ms))
        os.replace(tmp, self.path)  # never read half written


# Past the 12 hours a queued row may wait (grants/rules.h).
PAST_PENDING_MAX_MS = 13 * 3600 * 1000


@pytest.fixture
def clocked(onced_factory, monkeypatch, tmp_path):
    """clocked(args=[...], dev=False) starts onced_test (the test seams)
    with a clock the test moves; returns (onced, Clock). Later onceds of
    the test are onced_test too."""
    def make(args: List[str] = (), dev: bool = False):
        clock = Clock(tmp_path / "clock-offset")
        monkeypatch.setattr(sys.modules[__name__], "ONCED",
                            str(BUILD / "tests" / "onced_test"))
        monkeypatch.setenv("ONCED_CLOCK_OFFSET_FILE", str(clock.path))
        return onced_factory(args=args, dev=dev), clock
    return make


def client_through(p: "Proxy", tries: int = 50, **opts) -> once.Client:
    """A Client on a lossy proxy: its OpenLease reply may be lost too, so
    opening is tried again (at most tries times)."""
    for _ in range(tries):
        try:
            return once.Client(p.url, **opts)
        except once.OnceError:
            continue
    raise AssertionError(f"no lease through the proxy in {tries} tries")


@pytest.fixture
def proxy_factory():
    """proxy_factory(onced, args) starts once_proxy in front of onced."""
    started: List[Proxy] = []

    def make(o: Onced, args: List[str]) -> Proxy:
        p = Proxy(o.url, o.dir, args)
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()
