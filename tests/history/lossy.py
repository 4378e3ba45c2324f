"""lossy.py — once_proxy (bench/once_proxy.c) on the path from the
campaign's clients to each onced replica, for the loss and delay
nemeses: `tc netem` is not in these machines' kernel, so delay and loss
come from the project's own lossy proxy.

One proxy per replica, started with --windows (it forwards untouched
until a window opens): its front is ipc://DIR/p<i>.ipc (the URL the
clients get), its back the replica's --listen. A follower's NOT_LEADER
hint names the leader's own URL, which the clients do not know, so
libonce ignores it and stays on the proxies' fronts. A window is opened
by SIGUSR1 (loss: --drop-req/--drop-rep/--dup-req) or SIGUSR2 (delay:
--delay-p/--delay-ms) and closed by SIGHUP, on which the proxy prints
what the window did; window() returns those counts, so the nemesis can
prove the window acted (a window that dropped or delayed nothing fails
the run).

Owns: the proxy processes and their logs (in the cluster's folder);
stopping them (stop(), from the run's finally).
Invariant: at most one window open at a time per proxy, and every window
closed before window() returns, also when it raises.
Never: touches the replicas; decides a verdict.
"""
from __future__ import annotations

import os
import re
import signal
import time
from typing import Dict, List, Optional

from cluster import Proc

# What a window does: loss drops a fifth of each direction and duplicates
# a twentieth of the requests; delay holds half the messages 1-300 ms.
FAULTS = ["--drop-req", "0.2", "--drop-rep", "0.2", "--dup-req", "0.05",
          "--delay-p", "0.5", "--delay-ms", "300"]
WINDOW = re.compile(r"once_proxy: window (\w+) (requests|replies) in (\d+) "
                    r"dropped (\d+) duplicated (\d+) delayed (\d+)")


class Proxies:
    """One once_proxy per replica of cluster, between its clients and it."""

    def __init__(self, binary: str, cluster, seed: int) -> None:
        self.procs: List[Proc] = []
        self.urls: List[str] = []
        for i, back in enumerate(cluster.urls):
            front = f"ipc://{cluster.dir}/p{i}.ipc"
            argv = [binary, "--front", front, "--back", back, "--seed",
                    str(seed * 10 + i), "--windows"] + FAULTS
            self.procs.append(Proc(f"proxy{i}", argv,
                                   f"{cluster.dir}/proxy{i}.log"))
            self.urls.append(front)

    def start(self) -> None:
        for p in self.procs:
            p.start()
        for p in self.procs:  # listening: its socket file is there
            path = p.argv[p.argv.index("--front") + 1][len("ipc://"):]
            end = time.monotonic() + 10
            while not os.path.exists(path):
                if not p.running or time.monotonic() > end:
                    raise TimeoutError(f"{p.name} did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def _ends(self, p: Proc) -> int:
        with open(p.log, errors="replace") as f:
            return f.read().count("once_proxy: window end")

    def window(self, i: int, what: str, hold: float,
               stop) -> Optional[Dict[str, int]]:
        """Opens a window of kind what (loss, delay) on replica i's proxy
        for hold seconds (less when stop is set), closes it and returns its
        counts (in, dropped, duplicated, delayed; both directions summed),
        or None when the proxy did not report within 5 s."""
        p = self.procs[i]
        if not p.running:
            return None
        ends = self._ends(p)
        p.signal(signal.SIGUSR1 if what == "loss" else signal.SIGUSR2)
        try:
            stop.wait(hold)
        finally:
            p.signal(signal.SIGHUP)
        end = time.monotonic() + 5
        while self._ends(p) == ends:
            if time.monotonic() > end:
                return None
            time.sleep(0.05)
        with open(p.log, errors="replace") as f:
            lines = WINDOW.findall(f.read())[-2:]
        got = {"in": 0, "dropped": 0, "duplicated": 0, "delayed": 0}
        for _, _, n, dr, du, de in lines:
            for k, v in zip(got, (n, dr, du, de)):
                got[k] += int(v)
        return got
