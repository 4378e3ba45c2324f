#!/usr/bin/python3
"""campaign.py — a fault campaign: a 3-member etcd cluster and 3 onced
replicas (cluster.py), clients recording a history (recorder.py) of
counter increments and reads, KV gets, puts and compare-and-sets, outbox
appends read and acknowledged by a consumer, and start grants, a seeded
random schedule of faults (the nemesis), then the checker (check.py), a
text report with the faults on a time line, and a gnuplot plot of
throughput and latency with the fault windows marked.

Usage: campaign.py --build BUILD [--seed N] [--duration S]
       [--nemeses all|none|partition|kind,kind] [--overlap N]
       [--broken SWITCH] [--expect V] [--out DIR]

Nemeses (one fault at a time, or with --overlap N that many threads whose
faults may come at once, each on processes no other fault holds:
overlap.py; each bounded in time, all healed at the end): kill-leader, stop-leader (the onced leader, found as a client finds
it), kill-replica, stop-replica (a random replica), kill-etcd-leader,
stop-etcd-leader (etcdctl endpoint status), kill-etcd, stop-etcd (a
random member), kill-etcd-quorum, stop-etcd-quorum (two members of
three: no quorum while clients write). Partitions (--nemeses partition,
or any part-* kind: every process then runs in a network namespace of
its own, netns.py; as root): part-leader-etcd, part-replica-etcd (a
replica cut from every etcd member), part-leader-clients,
part-replica-clients (a replica cut from its clients and the other
replicas), part-etcd-leader, part-etcd (an etcd member cut from the
other members, its clients still reaching it); each cut lasts 2-5 s. A
cut must be real: the cut path is probed (a TCP connect from the cut
side) before the cut (it must work, else the fault is not made), during
it (it must fail) and after the heal (it must work again within 10 s);
a probe that disagrees fails the run. With --nemeses partition the kinds
are drawn from a shuffled bag (every kind before any repeats, a kind of
each link first), and a run without a cut of each of the three links
(etcd, service, peer) fails.

Paths, disks and clocks (each kind must be made at least once in a run
that asks for it, drawn from a shuffled bag): loss-leader-clients,
delay-leader-clients (the clients reach every replica through a
once_proxy of its own, lossy.py; a window of drops or delays on the
leader's for 2-5 s, whose counts must show it acted);
loss-leader-etcd, delay-leader-etcd (each replica reaches etcd through a
TCP relay of its own in this process, relay.py; a window of connection
resets or held chunks on the leader's, 2-5 s, the same proof; not with
partitions);
disk-full-follower (as root: every replica's data folder is a tmpfs,
diskfull.py; a follower's filled until ENOSPC for 3-6 s: it must fail
clearly, then follow again within 30 s of the space coming back,
started again when it exited); clock-jump-leader (libfaketime in every
replica, clockjump.py; the leader's wall clock stepped 20-60 s forward
or back for 2-5 s, the step seen in its Stats).

Owns: the run: its processes (through cluster.py, lossy.py), the
mounts (diskfull.py), the relays (relay.py), the workload threads,
the nemesis thread, and the files in --out (history.jsonl, report.txt,
verdict.json, rates.csv, faults.dat, plot.png).
Invariant: the same seed gives the same fault schedule and the same
choices of operations (not the same interleaving); every fault ends
within its bound; every process is stopped on the way out, also on an
exception or SIGTERM.
Never: decides the verdict itself (check.py does); tolerates a run where
the faults asked for did not happen.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

KINDS = ["kill-leader", "stop-leader", "kill-replica", "stop-replica",
         "kill-etcd-leader", "stop-etcd-leader", "kill-etcd", "stop-etcd",
         "kill-etcd-quorum", "stop-etcd-quorum"]
# A partition kind: (whom it cuts, as target() names them; which link).
PARTITIONS = {"part-leader-etcd": ("leader", "etcd"),
              "part-replica-etcd": ("replica", "etcd"),
              "part-leader-clients": ("leader", "service"),
              "part-replica-clients": ("replica", "service"),
              "part-etcd-leader": ("etcd-leader", "peer"),
              "part-etcd": ("etcd", "peer")}
# Loss or delay on the clients' path to the onced leader (lossy.py: a
# once_proxy window): the kind and what its window does.
LOSSY = {"loss-leader-clients": "loss", "delay-leader-clients": "delay"}
# The same on the onced leader's path to etcd (relay.py: a TCP relay in
# this process; loss resets connections).
ETCD_PATH = {"loss-leader-etcd": "loss", "delay-leader-etcd": "delay"}
# A follower's data folder (a tmpfs of its own, diskfull.py) filled up.
DISK = ["disk-full-follower"]
# The onced leader's wall clock stepped (clockjump.py: libfaketime).
CLOCK = ["clock-jump-leader"]

# Kinds played from a shuffled bag, each of which must be made at least
# once in a run that asks for it.
NEWER = list(LOSSY) + list(ETCD_PATH) + DISK + CLOCK
COUNTERS = ["c0", "c1", "c2"]
KV_KEYS = ["kv0", "kv1", "kv2"]
TOPIC, CONSUMER = "t0", "q0"  # the outbox topic and its one consumer
SURFACES = ["s0", "s1"]
SKIP = 77  # ctest's SKIP_RETURN_CODE: partitions asked for, not root


def setup_path(build: str) -> None:
    sys.path.insert(0, os.path.join(build, "python"))


# ---- the workload ----------------------------------------------------------


class Workload:
    """Writer processes (a leased handle each: increments, reads, KV gets,
    puts and compare-and-sets, outbox appends (a Txn's emit), grants,
    renewals, and resends of acknowledged ids through a lease-less handle),
    reader processes (a lease-less handle each, its URLs starting at
    another replica: reads only), one lease prober (leases left to expire)
    and one outbox consumer (Read, then Ack of the last offset read)."""

    def __init__(self, urls: List[str], writer, seed: int, writers: int,
                 readers: int, resend_p: float) -> None:
        import once
        self.once = once
        self.urls, self.w, self.seed = urls, writer, seed
        self.nw, self.nr, self.resend_p = writers, readers, resend_p
        self.stop = threading.Event()
        self.threads: List[threading.Thread] = []
        self.gen: Dict[str, int] = {}
        self.errors: List[str] = []

    def client(self, start: int, lease: bool):
        n = len(self.urls)
        urls = ",".join(self.urls[(start + k) % n] for k in range(n))
        return self.once.Client(urls, lease=lease, lease_ttl_ms=120000,
                                deadline_ms=4000, attempt_timeout_ms=1000,
                                max_attempts=1000, backoff_initial_ms=5,
                                backoff_max_ms=100)

    def setup(self) -> None:
        with self.client(0, True) as c:
            for s in SURFACES:
                self.gen[s] = c.set_placement(s, "m1", "/w").generation
            # Subscribed before anything is produced: reads every event.
            c.invoke("/once.v1.Outbox/Subscribe",
                     self.once.outbox_pb2.OutboxSubscribeRequest(
                         topic=TOPIC, consumer=CONSUMER))

    def start(self) -> None:
        for i in range(self.nw):
            t = threading.Thread(target=self._guard, args=(self.writer, i),
                                 daemon=True)
            self.threads.append(t)
        for j in range(self.nr):
            t = threading.Thread(target=self._guard,
                                 args=(self.reader, self.nw + j), daemon=True)
            self.threads.append(t)
        self.threads.append(threading.Thread(
            target=self._guard, args=(self.lease_prober, self.nw + self.nr),
            daemon=True))
        self.threads.append(threading.Thread(
            target=self._guard, args=(self.consumer, self.nw + self.nr + 1),
            daemon=True))
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> bool:
        self.stop.set()
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, end - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)

    def _guard(self, fn, i: int) -> None:
        try:
            fn(i)
        except Exception as e:  # noqa: BLE001 — reported, not hidden
            import traceback
            self.errors.append(f"process {i}: {traceback.format_exc()}")
            del e

    def writer(self, i: int) -> None:
        from recorder import Recorder
        from history import OK, UNKNOWN
        rng = random.Random(self.seed * 1000 + i)
        rec = Recorder(self.w, i)
        rr = self.client(i, False)  # resends of known ids
        c = None
        n = 0
        seen: Dict[str, Optional[str]] = {}  # KV key -> value last seen
        while not self.stop.is_set():
            if c is None or c.lease_state == self.once.LeaseState.LOST:
                if c is not None:
                    c.close()
                c, res, _ = rec.lease_open(lambda: self.client(i, True))
                if c is None:
                    time.sleep(0.2)
                    continue
            n += 1
            x = rng.random()
            name = rng.choice(COUNTERS)
            if x < 0.5:
                res, v, err = rec.incr(c, name)
                for _ in range(3):
                    if res != UNKNOWN or err is None or \
                            getattr(err, "rpc_id", None) is None:
                        break
                    res, v, err2 = rec.retry(c, name, 1, err)
                    err = err2 if err2 is not None else err
                if res == UNKNOWN and getattr(err, "rpc_id", None):
                    c.release(err.rpc_id.seq)
                elif res == OK and rng.random() < self.resend_p:
                    cid, seq = rec.last_args["rpc"].split(":")
                    rec.incr(rr, name, 1, rpc=(int(cid), int(seq)))
            elif x < 0.7:
                rec.read(c, name)
            elif x < 0.82:
                self.kv_op(rec, c, rr, rng, seen, f"p{i}-{n}")
            elif x < 0.87:
                self.resend(rec, rr, rng, c, lambda r, h: rec.append(
                    h, TOPIC, f"p{i}-{n}", rpc=r))
            elif x < 0.95:
                self.grant(rec, c, rng.choice(SURFACES), f"p{i}-{n}",
                           rng.uniform(0, 0.05))
            else:
                rec.lease_renew(c)
        if c is not None:
            cid, seq = c.client_id, c.first_incomplete + 100
            res, _, _ = rec.lease_close(c)
            if res == OK:  # a new call under the ended lease must fail
                rec.incr(rr, COUNTERS[0], 1, rpc=(cid, seq))
            c.close()
        rr.close()

    @staticmethod
    def settle(call):
        """call(rpc) once with a new id, then up to 3 times under its id
        while the outcome is unknown; the last (result, value, err)."""
        from history import UNKNOWN
        res, v, err = call(None)
        for _ in range(3):
            if res != UNKNOWN or getattr(err, "rpc_id", None) is None:
                break
            rid = (err.rpc_id.client_id, err.rpc_id.seq)
            res, v, err2 = call(rid)
            err = err2 or err
        return res, v, err

    def resend(self, rec, rr, rng, c, call):
        """call(rpc, handle) settled on c (self.settle; an id still unknown
        is released), and when ok resent under its id through the
        lease-less rr with chance resend_p: answered from its record, or
        applied twice by a broken onced. The settled (result, value)."""
        from history import OK, UNKNOWN
        res, v, err = self.settle(lambda rpc: call(rpc, c))
        if res == UNKNOWN and getattr(err, "rpc_id", None):
            c.release(err.rpc_id.seq)
        elif res == OK and rng.random() < self.resend_p:
            cid, seq = rec.last_args["rpc"].split(":")
            call((int(cid), int(seq)), rr)
        return res, v

    def kv_op(self, rec, c, rr, rng, seen: Dict, value: str) -> None:
        """One KV operation on a random key: a get, a put, or (most often)
        a compare-and-set from the value this process last saw there (the
        else branch's get tells it the value when the compare fails)."""
        from history import OK
        key = rng.choice(KV_KEYS)
        y = rng.random()
        if y < 0.25:
            res, v, _ = rec.get(c, key)
            if res == OK:
                seen[key] = v
        elif y < 0.4:
            res, _ = self.resend(rec, rr, rng, c, lambda r, h: rec.put(
                h, key, value, rpc=r))
            if res == OK:
                seen[key] = value
        else:
            expect = seen.get(key)
            res, hit = self.resend(rec, rr, rng, c, lambda r, h: rec.cas(
                h, key, expect, value, rpc=r))
            if res == OK:
                seen[key] = value if hit else rec.last_seen

    def consumer(self, i: int) -> None:
        """The outbox consumer: Read (long-poll 200 ms), then Ack of the
        last offset read (settled like any call; an Ack still unknown is
        released: the next one covers it)."""
        from recorder import Recorder
        rec = Recorder(self.w, i)
        with self.client(i, True) as c:
            while not self.stop.is_set():
                self.consume(rec, c)

    def consume(self, rec, c, final: bool = False) -> Optional[int]:
        """One Read and the Ack after it: the events read (None: the Read
        did not answer)."""
        from history import OK, UNKNOWN
        res, v, _ = rec.outbox_read(c, TOPIC, CONSUMER, final)
        if res != OK:
            time.sleep(0.1)
            return None
        if v["events"]:
            last = v["events"][-1][0]
            res, _, err = self.settle(lambda rpc: rec.outbox_ack(
                c, TOPIC, CONSUMER, last, rpc=rpc))
            if res == UNKNOWN and getattr(err, "rpc_id", None):
                c.release(err.rpc_id.seq)
        return len(v["events"])

    def drain(self, timeout: float = 30) -> bool:
        """After every fault healed: the consumer reads (final) and acks
        until a Read answers no event: every event was read."""
        from recorder import Recorder
        rec = Recorder(self.w, 998)
        end = time.monotonic() + timeout
        with self.client(0, True) as c:
            while time.monotonic() < end:
                if self.consume(rec, c, final=True) == 0:
                    return True
        return False

    def grant(self, rec, c, surface: str, request_id: str,
              work: float) -> None:
        """A grant on surface, held for work seconds, then finished."""
        from history import OK
        res, gid, _ = self.settle(lambda rpc: rec.grant_request(
            c, surface, request_id, self.gen[surface], rpc=rpc))
        if res == OK:
            time.sleep(work)
            self.settle(lambda rpc: rec.grant_finish(c, surface, gid, rpc=rpc))

    def lease_prober(self, i: int) -> None:
        """Leases left to expire: OpenLease (TTL 1.5 s) on a lease-less
        handle, a few increments under explicit ids of it, no renewal for
        2.5 s, then RenewLease (LEASE_EXPIRED once the server saw it end)
        and one more increment under it, which must then fail — also
        across failovers, where a new leader gives live leases a fresh
        TTL."""
        from recorder import Recorder
        from history import OK
        rng = random.Random(self.seed * 1000 + i)
        rec = Recorder(self.w, i)
        with self.client(0, False) as c:
            while not self.stop.is_set():
                res, cid, _ = rec.lease_open_bare(c, 1500)
                if res != OK:
                    self.stop.wait(0.5)
                    continue
                for seq in range(1, 4):
                    rec.incr(c, rng.choice(COUNTERS), 1, rpc=(cid, seq))
                if self.stop.wait(2.5):
                    break
                rec.lease_renew(c, cid)
                rec.incr(c, rng.choice(COUNTERS), 1, rpc=(cid, 4))

    def reader(self, i: int) -> None:
        from recorder import Recorder
        rng = random.Random(self.seed * 1000 + i)
        rec = Recorder(self.w, i)
        with self.client(i - self.nw, False) as c:
            while not self.stop.is_set():
                rec.read(c, rng.choice(COUNTERS))
                time.sleep(rng.random() * 0.01)

    def final_reads(self, timeout: float = 60) -> bool:
        """After every fault healed: each counter and KV key read (final)
        until ok."""
        from recorder import Recorder
        from history import OK
        rec = Recorder(self.w, 999)
        end = time.monotonic() + timeout
        with self.client(0, False) as c:
            for name in COUNTERS + KV_KEYS:
                read = rec.get if name in KV_KEYS else rec.read
                while True:
                    res, _, _ = read(c, name, final=True)
                    if res == OK:
                        break
                    if time.monotonic() > end:
                        return False
                    time.sleep(0.2)
        return True


# ---- the nemesis -----------------------------------------------------------


def fault(kind: str, target: str, t0: int, t1: int, detail: str) -> dict:
    """A fault's history entry: kind on target from t0 to t1 (monotonic
    ns), with what it did."""
    return {"type": "fault", "kind": kind, "target": target, "start": t0,
            "end": t1, "detail": detail}


class Nemesis:
    """One fault at a time from a seeded schedule; each ends (healed)
    within its bound: a pause lasts 0.5-4 s, a killed process is started
    again after 0.3-2 s, a cut is healed after 2-5 s (each at least
    hold_min). bag: kinds drawn from a shuffled bag, not at random."""

    def __init__(self, cluster, writer, seed: int, kinds: List[str],
                 hold_min: float = 0, bag: bool = False, who: int = 0,
                 claims=None, stop=None) -> None:
        self.c, self.w, self.kinds = cluster, writer, kinds
        self.hold_min, self.bag = hold_min, bag
        # who: this thread's number among the run's (--overlap); claims:
        # overlap.Claims shared by them (None: the only one).
        self.who, self.claims = who, claims
        self.rng = random.Random(seed if who == 0 else f"{seed}/{who}")
        self.stop = stop if stop is not None else threading.Event()
        self.faults: List[dict] = []
        self.deaths: List[str] = []  # processes that died by themselves
        self.problems: List[str] = []  # cuts that did not cut or heal
        self.skipped: List[str] = []  # partitions drawn but not made
        self.drawn: List[str] = []
        self.proxies = None  # lossy.Proxies, for the LOSSY kinds
        self.disks = None  # diskfull.Disks, for the DISK kinds
        self.relays = None  # relay.Relays, for the ETCD_PATH kinds
        self.clocks = None  # clockjump.Clocks, for the CLOCK kinds
        self.aged_at = 0.0  # monotonic time of _aged_record's record
        self.thread = threading.Thread(target=self.run, daemon=True)

    def next_kind(self) -> str:
        if not self.bag:
            return self.rng.choice(self.kinds)
        if not self.drawn:  # one kind of each link first, then the rest
            order = self.rng.sample(self.kinds, len(self.kinds))
            first = {}
            for k in order:
                first.setdefault(PARTITIONS.get(k, (k, k))[1], k)
            self.drawn = list(first.values()) + \
                [k for k in order if k not in first.values()]
        return self.drawn.pop(0)

    def target(self, kind: str) -> List:
        """The processes the kind's fault hits ([] when there is none now:
        no leader known). A quorum fault hits two etcd members of three:
        clients keep writing while etcd cannot commit."""
        if kind.endswith("etcd-leader"):
            i = self.c.etcd_leader()
            return [] if i is None else self.claim([self.c.etcd[i]])
        if kind.endswith("etcd-quorum"):
            return self.claim(self.rng.sample(self.c.etcd, 2))
        if kind.endswith("etcd"):
            return self.claim([self.rng.choice(self.c.etcd)])
        if kind.endswith("leader"):
            i = self.c.onced_leader(timeout=5)
            return [] if i is None else self.claim([self.c.replicas[i]])
        return self.claim([self.rng.choice(self.c.replicas)])

    def claim(self, ps: List) -> List:
        """ps, claimed for this thread's fault ([] when another thread's
        fault holds one of them: no fault now)."""
        return ps if self.claimed(ps) else []

    def claimed(self, ps: List) -> bool:
        """Whether ps are claimed for this thread's fault now (always
        when it is the run's only nemesis)."""
        return self.claims is None or self.claims.claim(
            self.who, [p.name for p in ps])

    def far_side(self, link: str, p) -> List:
        """The processes a partition's probes reach across link from p
        (none for the service link: its far side is the clients)."""
        if link == "etcd":
            return list(self.c.etcd)
        if link == "peer":
            return [e for e in self.c.etcd if e is not p]
        return []

    def run(self) -> None:
        if any(k in CLOCK for k in self.kinds):
            self._aged_record()
        while not self.stop.wait(self.rng.uniform(1.0, 3.0)):
            self.deaths += (self.c.heal() if self.claims is None else
                            self.claims.heal_if_idle(self.c))
            try:
                f = self.play(self.next_kind())
            finally:
                if self.claims is not None:
                    self.claims.release(self.who)
            if f is not None:
                self.faults.append(f)
                self.w.write(f)

    def play(self, kind: str) -> Optional[dict]:
        """One fault of kind, made and healed (None: not made now)."""
        if kind in PARTITIONS:
            return self.partition(kind)
        if kind in LOSSY or kind in ETCD_PATH:
            return self.lossy(kind)
        if kind in DISK:
            return self.disk_full(kind)
        if kind in CLOCK:
            return self.clock_jump(kind)
        return self.signal_fault(kind)

    def require(self, ok: bool, kind: str, who: str, what: str) -> None:
        """Unless ok, a problem of the run: the fault kind on who did not
        do what it must (what)."""
        if not ok:
            self.problems.append(f"{kind} {who}: {what}")

    def signal_fault(self, kind: str) -> Optional[dict]:
        """SIGKILL (started again after hold) or SIGSTOP (SIGCONT)."""
        hold = self.rng.uniform(0.5, 4.0) if kind.startswith("stop") \
            else self.rng.uniform(0.3, 2.0)
        hold = max(hold, self.hold_min)
        ps = self.target(kind)
        if not ps or not all(p.running for p in ps):
            return None
        t0 = time.monotonic_ns()
        for p in ps:
            p.signal(signal.SIGKILL if kind.startswith("kill")
                     else signal.SIGSTOP)
        self.stop.wait(hold)
        for p in ps:
            if kind.startswith("kill"):
                self.c.restart(p)
            else:
                p.signal(signal.SIGCONT)
        return fault(kind, "+".join(p.name for p in ps), t0,
                     time.monotonic_ns(), f"{hold:.2f}s")

    def partition(self, kind: str) -> Optional[dict]:
        """One link of the target cut for hold seconds, then healed; the
        cut path probed before (must work, else no fault), during (must
        fail) and after (must work again within 10 s): a disagreeing
        probe is a problem of the run (a nemesis that does nothing)."""
        role, link = PARTITIONS[kind]
        hold = max(self.rng.uniform(2.0, 5.0), self.hold_min)
        ps = self.target(role)
        if not ps or not ps[0].running or ps[0].stopped:
            self.skipped.append(f"{kind}: no running {role}")
            return None
        p, net = ps[0], self.c.net
        if not self.claimed(self.far_side(link, p)):
            self.skipped.append(f"{kind} {p.name}: the far side of its "
                                f"{link} link is under another fault")
            return None
        member = self.c.member(p)
        src, dsts = self.c.path(member, link)
        before = net.reaches(src, dsts)
        if not all(before):
            self.skipped.append(f"{kind} {p.name}: {src} reached "
                                f"{before.count(True)} of {len(dsts)} "
                                f"before the cut")
            return None
        t0 = time.monotonic_ns()
        net.cut(member, link)
        during = net.reaches(src, dsts, 0.5)
        self.stop.wait(max(0.0, hold - (time.monotonic_ns() - t0) / 1e9))
        net.heal(member, link)
        t1 = time.monotonic_ns()
        healed = False
        while not healed and time.monotonic_ns() - t1 < 10e9:
            healed = all(net.reaches(src, dsts))
        detail = (f"{hold:.2f}s; {link} link cut; {src} -> "
                  f"{len(dsts)} address(es): {during.count(False)} "
                  f"failed while cut, "
                  f"{'all reached' if healed else 'NOT reached'} after")
        self.require(not any(during), kind, p.name, "the cut path still "
                     f"worked during the cut ({detail})")
        self.require(healed, kind, p.name, "the path did not work again "
                     "within 10 s of the heal")
        return fault(kind, p.name, t0, t1, detail)

    def lossy(self, kind: str) -> Optional[dict]:
        """A loss or delay window on the proxy in front of the onced
        leader (lossy.py) or on its relay to etcd (relay.py), 2-5 s: the
        window's counts must show drops or resets (loss) or delays
        (delay), else the run fails."""
        etcd = kind in ETCD_PATH
        what = (ETCD_PATH if etcd else LOSSY)[kind]
        hold = max(self.rng.uniform(2.0, 5.0), self.hold_min)
        i = self.c.onced_leader(timeout=5)
        if i is None:
            self.skipped.append(f"{kind}: no onced leader")
            return None
        t0 = time.monotonic_ns()
        path = self.relays if etcd else self.proxies
        got = path.window(i, what, hold, self.stop)
        t1 = time.monotonic_ns()
        name = self.c.replicas[i].name
        if got is None:
            self.problems.append(f"{kind} {name}: proxy{i} did not report "
                                 f"its window")
            return None
        if etcd:
            detail = (f"{hold:.2f}s; {name} -> relay -> etcd: "
                      f"{got['chunks']} chunks, {got['reset']} connections "
                      f"reset, {got['delayed']} delayed")
        else:
            detail = (f"{hold:.2f}s; clients -> proxy{i} -> {name}: "
                      f"{got['in']} messages, {got['dropped']} dropped, "
                      f"{got['duplicated']} duplicated, {got['delayed']} "
                      f"delayed")
        acted = got["delayed"] if what == "delay" else \
            got["reset" if etcd else "dropped"]
        self.require(acted > 0 or self.stop.is_set(), kind, name,
                     f"the {'relay' if etcd else 'proxy'}'s window did "
                     f"nothing ({detail})")
        return fault(kind, name, t0, t1, detail)

    def disk_full(self, kind: str) -> Optional[dict]:
        """A follower's tmpfs filled (diskfull.py) for 3-6 s: it must fail
        clearly within the hold + 10 s (exit, or a log line naming the
        full disk), then the filler goes, an exited follower is started
        again, and it must follow again within 30 s; else the run
        fails."""
        lead = self.c.onced_leader(timeout=5)
        cands = [j for j, p in enumerate(self.c.replicas)
                 if j != lead and p.running and not p.stopped]
        if lead is None or not cands:
            self.skipped.append(f"{kind}: no leader, or no running follower")
            return None
        j = self.rng.choice(cands)
        p, d = self.c.replicas[j], self.disks.dirs[j]
        hold = max(self.rng.uniform(3.0, 6.0), self.hold_min)
        at = os.path.getsize(p.log)
        t0 = time.monotonic_ns()
        wrote = self.disks.fill(d)
        left = self.disks.free_bytes(d)
        how = self._wait_failed(p, at, hold)
        self.disks.free(d)
        exited = not p.running
        if exited:
            at = os.path.getsize(p.log)
            self.c.restart(p)
        # Following again: said anew after a start (a follower that never
        # stopped says nothing new; it only has to be running).
        back = self._wait_log(p, at, ("repl: NOT_LEADER", "repl: leading"),
                              30) if exited else p.running
        t1 = time.monotonic_ns()
        detail = (f"{hold:.2f}s; {wrote >> 20} MiB written to fill "
                  f"{p.name}'s tmpfs ({left} bytes left); "
                  f"{how or 'NO failure seen'}; "
                  f"{'started again, ' if exited else ''}"
                  f"{'following again' if back else 'NOT back'}")
        self.require(how is not None, kind, p.name,
                     f"the full disk made no failure ({detail})")
        self.require(back, kind, p.name, "not following again within 30 s "
                     "of the space coming back")
        return fault(kind, p.name, t0, t1, detail)

    def clock_jump(self, kind: str) -> Optional[dict]:
        """The onced leader's wall clock stepped 20-60 s forward or back
        (seeded) for 2-5 s, then back to true time. The step must show
        within 3 s in the leader's Stats: the oldest retained record's age
        is taken on its wall clock, so it grows by half the step or more
        (forward), or falls by a second or more (back: to 0 while the old
        record's time is ahead of the clock, or to the age of one made
        during the step, which is older on that clock; without a step it
        only grows while _aged_record's record is there); a step not
        seen fails the run. A backward step while no record is 2 s old
        has nothing to show it by and is not made."""
        self._aged_record()
        i = self.c.onced_leader(timeout=5)
        if i is None:
            self.skipped.append(f"{kind}: no onced leader")
            return None
        step = self.rng.randint(20, 60) * self.rng.choice((1, -1))
        hold = max(self.rng.uniform(2.0, 5.0), self.hold_min)
        name, url = self.c.replicas[i].name, self.c.urls[i]
        before = self._record_age(url)
        if before is None or (step < 0 and before < 2000):
            self.skipped.append(f"{kind} {name}: {step:+d} s, oldest record "
                                f"age {before} ms: nothing to show it by")
            return None
        t0 = time.monotonic_ns()
        self.clocks.jump(i, step)
        seen = None
        try:
            end = time.monotonic() + 3
            while seen is None and time.monotonic() < end:
                age = self._record_age(url)
                if age is not None and (
                        (step > 0 and age - before >= step * 500) or
                        (step < 0 and age <= before - 1000)):
                    seen = age
                time.sleep(0.1)
            self.stop.wait(max(0.0, hold - (time.monotonic_ns() - t0) / 1e9))
        finally:
            self.clocks.jump(i, 0)
        t1 = time.monotonic_ns()
        detail = (f"{hold:.2f}s; {name}'s wall clock {step:+d} s; oldest "
                  f"record age {before} ms before, "
                  f"{'%d ms in the jump' % seen if seen is not None else 'NO change seen'}")
        self.require(seen is not None, kind, name,
                     f"the jump did not show in its Stats ({detail})")
        return fault(kind, name, t0, t1, detail)

    def _aged_record(self) -> None:
        """One completion record nobody acknowledges (an increment of the
        counter clock-probe, which no check reads, under a lease of 120 s
        opened through a lease-less handle and never renewed), made again
        after 60 s: the leader's oldest retained record then has an age a
        backward step can take back."""
        import once
        now = time.monotonic()
        if self.aged_at and now - self.aged_at < 60:
            return
        try:
            with once.Client(",".join(self.c.urls), lease=False,
                             deadline_ms=3000,
                             attempt_timeout_ms=1000) as c:
                cid = c.call("/once.v1.Lease/OpenLease",
                             once.once_pb2.OpenLeaseRequest(
                                 ttl_ms=120000)).client_id
                c.counter_incr("clock-probe", 1, rpc_id=(cid, 1))
            self.aged_at = now
        except once.OnceError:
            pass

    @staticmethod
    def _record_age(url: str) -> Optional[int]:
        """Stats.oldest_record_age_ms of the replica at url (the leader),
        or None when it did not answer."""
        import once
        try:
            with once.Client(url, lease=False, deadline_ms=1000,
                             attempt_timeout_ms=500) as c:
                return c.stats().oldest_record_age_ms
        except once.OnceError:
            return None

    def _wait_failed(self, p, at: int, hold: float) -> Optional[str]:
        """Holds hold seconds (up to 10 more while no failure is seen);
        how p failed after log offset at: its exit status and first
        error line, or None."""
        began = time.monotonic()
        line = None
        while True:
            line = line or self._log_line(p, at, ("No space left",
                                                  "cannot apply"))
            done = not p.running or line is not None
            waited = time.monotonic() - began
            if (done and waited >= hold) or waited >= hold + 10 or \
                    self.stop.is_set():
                break
            time.sleep(0.1)
        if not p.running:
            return f"exited (status {p.p.returncode}): {line or 'no line'}"
        return None if line is None else f"still running: {line}"

    def _wait_log(self, p, at: int, marks, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if p.running and self._log_line(p, at, marks) is not None:
                return True
            time.sleep(0.2)
        return False

    @staticmethod
    def _log_line(p, at: int, marks) -> Optional[str]:
        """The first line of p's log after offset at holding one of
        marks, or None."""
        with open(p.log, "rb") as f:
            f.seek(at)
            for raw in f.read().decode(errors="replace").splitlines():
                if any(m in raw for m in marks):
                    return raw.strip()[-200:]
        return None


# ---- report and plot -------------------------------------------------------


class Nemeses:
    """The run's nemesis threads: one, or --overlap N whose faults may
    come at once (overlap.py keeps them off each other's processes);
    their findings read together."""

    def __init__(self, n: int, make) -> None:
        from overlap import Claims
        self.claims = Claims() if n > 1 else None
        self.stop = threading.Event()
        self.all = [make(i, self.claims, self.stop) for i in range(n)]

    def start(self) -> None:
        for x in self.all:
            x.thread.start()

    def join(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for x in self.all:
            if x.thread.is_alive():
                x.thread.join(max(0.0, end - time.monotonic()))

    def alive(self) -> bool:
        return any(x.thread.is_alive() for x in self.all)

    def gather(self, what: str) -> List:
        return [y for x in self.all for y in getattr(x, what)]


def percentile(xs: List[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def write_rates(ops, t0: int, path: str) -> None:
    """Per second: ok operations completed, p50 and p99 latency (ms)."""
    buckets: Dict[int, List[float]] = {}
    for o in ops:
        if o.result == "ok" and o.complete is not None:
            s = int((o.complete - t0) / 1e9)
            buckets.setdefault(s, []).append((o.complete - o.invoke) / 1e6)
    with open(path, "w") as f:
        f.write("# second ok_ops p50_ms p99_ms\n")
        for s in range(0, max(buckets, default=0) + 1):
            lat = buckets.get(s, [])
            f.write(f"{s} {len(lat)} {percentile(lat, 0.5):.2f} "
                    f"{percentile(lat, 0.99):.2f}\n")


def plot(out: str, title: str) -> Optional[str]:
    png = os.path.join(out, "plot.png")
    gp = os.path.join(HERE, "campaign.gp")
    try:
        r = subprocess.run(["gnuplot", "-e",
                            f"rates='{out}/rates.csv'; "
                            f"faults='{out}/faults.dat'; png='{png}'; "
                            f"title_text='{title}'", gp],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"gnuplot: {e}"
    return None if r.returncode == 0 else f"gnuplot: {r.stderr.strip()}"


def served(ops, f: dict) -> int:
    """The operations that completed ok within fault f's window."""
    return sum(1 for o in ops if o.result == "ok" and o.complete and
               f["start"] <= o.complete <= f["end"])


def report(args, ops, faults, res, t0: int, extra: List[str],
           skipped: List[str], notes: List[str] = ()) -> str:
    import check
    import io
    lines = [f"campaign: seed {args.seed}, {args.duration:g} s, nemeses "
             f"{args.nemeses}, onced {os.path.basename(args.onced)}"
             + (f", broken on purpose: {args.broken}" if args.broken else ""),
             "", "faults (seconds from the first operation):"]
    for f in sorted(faults, key=lambda f: f["start"]):
        lines.append(f"  {(f['start'] - t0) / 1e9:7.2f} .. "
                     f"{(f['end'] - t0) / 1e9:7.2f}  {f['kind']:<20} "
                     f"{f['target']:<11} {f.get('detail', '')}; "
                     f"{served(ops, f)} ok during")
    by_kind: Dict[str, int] = {}
    for f in faults:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    lines.append("faults by kind: " + (", ".join(
        f"{k} {v}" for k, v in sorted(by_kind.items())) or "none"))
    ok = [o for o in ops if o.result == "ok" and o.complete]
    span = max((o.complete for o in ok), default=t0) - t0
    lat = [(o.complete - o.invoke) / 1e6 for o in ok]
    lines.append(f"throughput: {len(ok) / max(span / 1e9, 1e-9):.0f} ok "
                 f"ops/s; latency p50 {percentile(lat, 0.5):.1f} ms, p99 "
                 f"{percentile(lat, 0.99):.1f} ms, max "
                 f"{max(lat, default=0):.0f} ms")
    lines += [f"not made: {x}" for x in skipped]
    lines += list(notes) + extra
    buf = io.StringIO()
    check.report(res, ops, buf)
    lines += ["", buf.getvalue().rstrip()]
    return "\n".join(lines) + "\n"


# ---- the run ---------------------------------------------------------------


def overlap_pairs(fdicts: List[dict]) -> List[str]:
    """The overlapping faults of a run, as "kind target + kind target"."""
    from overlap import overlapping
    return [f"{a['kind']} {a['target']} + {b['kind']} {b['target']}"
            for a, b in overlapping(fdicts)]


def start_cluster(args, env, net=None, box=None):
    """The cluster, started (in net's namespaces when net is given; with
    box["disks"] set, each replica's data folder on a tmpfs of its own);
    on other ports again when a start failed (a port probed free can be
    taken before a member binds it), 3 tries."""
    from cluster import Cluster
    for attempt in range(1, 4):
        cl = Cluster(args.onced, ttl_s=2, env=env, keep=args.keep, net=net)
        try:
            if box is not None and "disks" in box:
                import diskfull
                box["disks"] = diskfull.Disks(
                    [f"{cl.dir}/data{i}" for i in range(len(cl.replicas))])
                box["disks"].mount_all()
            if box is not None and "relays" in box:
                import relay
                box["relays"] = relay.Relays(cl, args.seed)
            if box is not None and "clocks" in box:
                import clockjump
                box["clocks"] = clockjump.Clocks(cl.dir, len(cl.replicas))
                for i, p in enumerate(cl.replicas):
                    p.env = dict(p.env, **box["clocks"].env(i))
            cl.start()
            return cl
        except TimeoutError as e:
            print(f"campaign: the cluster did not start (attempt {attempt}): "
                  f"{e}\n{cl.dump_logs()}", file=sys.stderr)
            cl.stop(remove=False)
            if box is not None and box.get("disks") is not None:
                box["disks"].umount_all()
            if box is not None and box.get("relays") is not None:
                box["relays"].close()
            cl.remove()
    raise TimeoutError("the cluster did not start in 3 attempts")


def run(args) -> int:
    """One campaign; on any exit status but 0 the tail of every etcd
    member's and replica's log is printed (then the folder removed, and
    the network namespaces of a partition run)."""
    box: Dict[str, object] = {}
    try:
        rv = run_once(args, box)
    finally:
        if box.get("net") is not None:
            box["net"].close()
        if box.get("disks") is not None:
            box["disks"].umount_all()
        if box.get("relays") is not None:
            box["relays"].close()
    cl = box.get("cluster")
    if cl is not None:
        if rv != 0:
            print(cl.dump_logs(), file=sys.stderr)
        cl.remove()
    return rv


def parse_kinds(spec: str) -> Optional[List[str]]:
    """The nemesis kinds of --nemeses (none, all, partition, or a comma
    list), or None after saying which name is unknown."""
    if spec in ("none", "all", "partition"):
        return {"none": [], "all": list(KINDS),
                "partition": list(PARTITIONS)}[spec]
    kinds = spec.split(",")
    known = KINDS + list(PARTITIONS) + list(LOSSY) + list(ETCD_PATH) + \
        DISK + CLOCK
    for k in kinds:
        if k not in known:
            print(f"campaign: unknown nemesis {k} (all, none, partition, "
                  f"{', '.join(known)})", file=sys.stderr)
            return None
    return kinds


def make_net(box):
    """The network namespaces of a partition run (netns.py), built; None
    (said why) when this process may not make them."""
    import netns
    if os.geteuid() != 0:
        print("campaign: partitions need root (network namespaces)",
              file=sys.stderr)
        return None
    net = box["net"] = netns.Net()
    net.build()
    return net


def run_once(args, box) -> int:
    setup_path(args.build)
    import check
    from history import Writer, load_file

    kinds = parse_kinds(args.nemeses)
    if kinds is None:
        return 2
    if args.overlap > 1 and any(k not in KINDS and k not in PARTITIONS
                                for k in kinds):
        print("campaign: --overlap plays the signal and partition kinds "
              "only (the path, disk and clock kinds act on one shared "
              "proxy, relay, mount or clock)", file=sys.stderr)
        return 2
    net = None
    if any(k in PARTITIONS for k in kinds):
        net = make_net(box)
        if net is None:
            return SKIP
    if any(k in ETCD_PATH for k in kinds):
        if net is not None:
            print("campaign: the etcd-path kinds and partitions do not go "
                  "together (the relay is on loopback)", file=sys.stderr)
            return 2
        box["relays"] = None  # start_cluster puts them on the path
    if any(k in DISK for k in kinds):
        if os.geteuid() != 0:
            print("campaign: disk-full needs root (tmpfs mounts)",
                  file=sys.stderr)
            return SKIP
        box["disks"] = None  # start_cluster mounts them
    if any(k in CLOCK for k in kinds):
        import clockjump
        if clockjump.library() is None:
            print("campaign: clock jumps need libfaketime (scripts/deps.sh "
                  "installs faketime)", file=sys.stderr)
            return SKIP
        box["clocks"] = None  # start_cluster sets the replicas' files
    os.makedirs(args.out, exist_ok=True)
    hist = os.path.join(args.out, "history.jsonl")
    if os.path.exists(hist):
        os.unlink(hist)
    w = Writer(hist)
    w.write({"type": "meta", "seed": args.seed, "duration": args.duration,
             "nemeses": kinds, "broken": args.broken, "onced": args.onced})
    env = {"ONCED_BROKEN": args.broken} if args.broken else {}
    cl = nem = wl = proxies = None
    extra: List[str] = []

    def on_term(sig, frame):
        raise KeyboardInterrupt(signal.Signals(sig).name)
    # SIGTERM, or the run's own bound (ctest's TIMEOUT would SIGKILL this
    # process and leave its children, each in a session of its own):
    # everything is stopped on the way out.
    for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGHUP):
        signal.signal(sig, on_term)
    signal.alarm(int(args.duration) + args.bound)
    try:
        cl = box["cluster"] = start_cluster(args, env, net, box)
        urls = cl.urls
        if any(k in LOSSY for k in kinds):
            from lossy import Proxies
            proxies = Proxies(args.proxy, cl, args.seed)
            proxies.start()
            urls = proxies.urls
        wl = Workload(urls, w, args.seed, args.writers, args.readers,
                      args.resend)
        wl.setup()
        wl.start()
        nem = Nemeses(args.overlap, lambda i, claims, stop: Nemesis(
            cl, w, args.seed, kinds, args.hold_min,
            bag=args.nemeses == "partition" or
            any(k in NEWER for k in kinds), who=i, claims=claims,
            stop=stop))
        for x in nem.all:
            x.proxies, x.disks = proxies, box.get("disks")
            x.clocks, x.relays = box.get("clocks"), box.get("relays")
        if kinds:
            nem.start()
        time.sleep(args.duration)
        nem.stop.set()
        if kinds:  # a disk-full fault may take 46 s to end
            nem.join(60)
        extra += nem.gather("deaths") + cl.heal()
        if not wl.join(30):
            extra.append("workload: a process did not stop within 30 s")
        if not wl.final_reads():
            extra.append("final reads: no replica answered within 60 s")
        if not wl.drain():
            extra.append("outbox drain: the consumer did not catch up "
                         "within 30 s")
        extra += [f"workload error: {e}" for e in wl.errors]
    except BaseException as e:  # noqa: BLE001
        extra.append(f"campaign stopped: {type(e).__name__}: {e}")
    finally:
        if nem is not None:
            nem.stop.set()
            if nem.alive():  # it may be restarting a process
                nem.join(30)
        if wl is not None:
            wl.stop.set()
        if proxies is not None:
            proxies.stop()
        statuses = cl.stop(remove=False) if cl is not None else {}
        w.close()
        signal.alarm(0)
    if nem is not None:  # after the threads ended: all of them
        extra += nem.gather("problems")
    bad = {k: v for k, v in statuses.items() if v != 0}
    if bad:
        extra.append(f"replica exits on SIGTERM: {bad}")
    ops, faults, _ = load_file(hist)
    fdicts = [f.__dict__ for f in faults]
    t0 = min((o.invoke for o in ops), default=0)
    res = check.check(ops)
    write_rates(ops, t0, os.path.join(args.out, "rates.csv"))
    with open(os.path.join(args.out, "faults.dat"), "w") as f:
        f.write("# start_s end_s kind target\n")
        for x in fdicts:
            f.write(f"{(x['start'] - t0) / 1e9:.3f} {(x['end'] - t0) / 1e9:.3f}"
                    f" {x['kind']} {x['target']}\n")
    if not args.no_plot:
        err = plot(args.out, f"seed {args.seed}"
                   + (f", broken: {args.broken}" if args.broken else ""))
        if err:
            extra.append(err)
    pairs = overlap_pairs(fdicts)
    notes = [] if args.overlap < 2 else [
        f"faults at once: {len(pairs)} overlapping pair(s) from "
        f"{args.overlap} nemeses ({', '.join(pairs[:3])}"
        f"{', ...' if len(pairs) > 3 else ''}); "
        f"{nem.claims.refused if nem is not None else 0} draw(s) not made "
        f"(a process under another fault)"]
    text = report(args, ops, fdicts, res, t0, extra,
                  nem.gather("skipped") if nem is not None else [], notes)
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "verdict.json"), "w") as f:
        json.dump({"verdict": res["verdict"], "figures": res["figures"],
                   "faults": len(fdicts), "seed": args.seed,
                   "broken": args.broken}, f, indent=1)
    print(text, end="")
    problems = [x for x in extra if not x.startswith("gnuplot")]
    if kinds and not fdicts:
        problems.append("no fault was injected")
    if kinds and args.overlap > 1 and not pairs:
        problems.append(f"no two faults overlapped (--overlap "
                        f"{args.overlap})")
    if args.nemeses == "partition":
        links = {PARTITIONS[x["kind"]][1] for x in fdicts}
        problems += [f"no cut of a {link} link was made" for link in
                     ("etcd", "service", "peer") if link not in links]
    problems += [f"{x['kind']} {x['target']}: no operation succeeded "
                 f"while its disk was full (the cluster stopped serving)"
                 for x in fdicts if x["kind"] in DISK and
                 served(ops, x) == 0]
    made = {x["kind"] for x in fdicts}
    problems += [f"no {k} fault was made" for k in kinds
                 if k in NEWER and k not in made]
    if res["figures"]["ok"] < args.min_ok:
        problems.append(f"only {res['figures']['ok']} ok operations "
                        f"(at least {args.min_ok} wanted)")
    if problems:
        print("campaign: the run itself failed: " + "; ".join(problems))
        return 2
    if args.expect and res["verdict"] != args.expect:
        print(f"campaign: expected verdict {args.expect}, got "
              f"{res['verdict']}")
        return 1
    failed = {v.check for v in res["violations"]}
    for want in filter(None, args.expect_check.split(",")):
        name, _, prefix = want.partition("@")  # check@key-prefix
        if not any(v.check == name and v.key.startswith(prefix)
                   for v in res["violations"]):
            print(f"campaign: expected the check {want} to fail; failed: "
                  f"{sorted(failed) or 'none'}")
            return 1
    return 0 if args.expect or res["verdict"] == "valid" else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--onced", help="default: BUILD/tests/onced_test")
    ap.add_argument("--proxy", help="default: BUILD/bench/once_proxy")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--nemeses", default="all",
                    help="all (the signal kinds), none, partition (the "
                    "part-* kinds; root), or a comma list of kinds")
    ap.add_argument("--broken", default="",
                    help="ONCED_BROKEN for the replicas (store/fault.h)")
    ap.add_argument("--expect", choices=["valid", "invalid"])
    ap.add_argument("--expect-check", default="",
                    help="checks that must be among the failed ones "
                    "(CHECK or CHECK@KEY-PREFIX: on a key starting so)")
    ap.add_argument("--overlap", type=int, default=1,
                    help="nemesis threads whose faults may come at once "
                    "(each on processes no other fault holds; signal and "
                    "partition kinds only); a run with N > 1 where no two "
                    "faults overlapped fails")
    ap.add_argument("--hold-min", type=float, default=0,
                    help="every fault lasts at least this long (s)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--resend", type=float, default=0.1,
                    help="chance an acknowledged increment is resent")
    ap.add_argument("--min-ok", type=int, default=100)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--bound", type=int, default=180,
                    help="seconds beyond --duration before the run stops "
                    "itself (SIGALRM), everything cleaned up")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.onced = a.onced or os.path.join(a.build, "tests", "onced_test")
    a.proxy = a.proxy or os.path.join(a.build, "bench", "once_proxy")
    a.out = a.out or os.path.join(a.build, "campaign", f"seed-{a.seed}"
                                  + (f"-{a.broken}" if a.broken else ""))
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
