"""relay.py — a TCP relay on the path from one onced replica to the etcd
members, for the etcd-path loss and delay nemeses: onced talks to etcd
in JSON over HTTP/1.1 (libcurl, repl/etcd.h), a byte stream once_proxy
(whole nng messages) cannot carry, so this relay sits there instead.

One Relay per replica: a listener on a free loopback port per etcd
member, each connection piped both ways to that member, in the
campaign's own process (threads). Outside a window bytes pass as they
come. In a delay window every chunk read is held 1-300 ms (in order,
per direction) before it is passed on; in a loss window a new or open
connection is reset (RST) with probability 0.2 at each chunk, which
the replica sees as a request without an answer (libcurl's error, the
etcd client's EAGAIN) — a byte stream cannot lose part of itself and
stay a stream. window() returns the window's counts (chunks, delayed,
reset), so the nemesis can prove the window acted.

Owns: its listeners, the connections it accepted and their threads.
Invariant: close() closes every socket it made; a window is closed
before window() returns, also when it raises.
Never: touches a socket it did not make; reads or changes the bytes.
"""
from __future__ import annotations

import random
import socket
import struct
import threading
import time
from typing import Dict, List, Tuple

DELAY_MS = 300
RESET_P = 0.2


class Relay:
    """Listeners for one replica, one per etcd member (urls: the
    replica's --replicate list in their place)."""

    def __init__(self, members: List[Tuple[str, int]], seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()  # rng, counts, socks
        self.mode = ""  # "", "loss" or "delay" (the nemesis thread)
        self.counts = {"chunks": 0, "delayed": 0, "reset": 0}
        self.socks: List[socket.socket] = []
        self.closed = False
        self.urls: List[str] = []
        for m in members:
            ls = socket.socket()
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(("127.0.0.1", 0))
            ls.listen(64)
            self.socks.append(ls)
            self.urls.append("http://127.0.0.1:%d" % ls.getsockname()[1])
            threading.Thread(target=self._accept, args=(ls, m),
                             daemon=True).start()

    def _accept(self, ls: socket.socket, member: Tuple[str, int]) -> None:
        while not self.closed:
            try:
                a, _ = ls.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(member, timeout=2)
                b.settimeout(None)
            except OSError:
                a.close()
                continue
            with self.lock:
                self.socks += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst),
                                 daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                hold, reset = self._decide()
                if reset:
                    for s in (src, dst):  # RST, not FIN
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     struct.pack("ii", 1, 0))
                    break
                if hold:
                    time.sleep(hold)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    def _decide(self) -> Tuple[float, bool]:
        """For one chunk: how long to hold it, whether to reset."""
        with self.lock:
            self.counts["chunks"] += 1
            if self.mode == "delay":
                self.counts["delayed"] += 1
                return self.rng.randint(1, DELAY_MS) / 1000, False
            if self.mode == "loss" and self.rng.random() < RESET_P:
                self.counts["reset"] += 1
                return 0.0, True
        return 0.0, False

    def window(self, what: str, hold: float, stop) -> Dict[str, int]:
        """A window of kind what (loss, delay) for hold seconds (less when
        stop is set); its counts."""
        with self.lock:
            start = dict(self.counts)
            self.mode = what
        try:
            stop.wait(hold)
        finally:
            with self.lock:
                self.mode = ""
                end = dict(self.counts)
        return {k: end[k] - start[k] for k in end}

    def close(self) -> None:
        self.closed = True
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass


class Relays:
    """A Relay per replica of cluster (not in namespaces), each replica's
    --replicate pointed at its own; made before cluster.start()."""

    def __init__(self, cluster, seed: int) -> None:
        members = []
        for u in cluster.client_urls:
            host, port = u[len("http://"):].rsplit(":", 1)
            members.append((host, int(port)))
        self.relays: List[Relay] = []
        for i, p in enumerate(cluster.replicas):
            r = Relay(members, seed * 10 + i)
            p.argv[p.argv.index("--replicate") + 1] = ",".join(r.urls)
            self.relays.append(r)

    def window(self, i: int, what: str, hold: float,
               stop) -> Dict[str, int]:
        """A window on replica i's relay (Relay.window)."""
        return self.relays[i].window(what, hold, stop)

    def close(self) -> None:
        for r in self.relays:
            r.close()
