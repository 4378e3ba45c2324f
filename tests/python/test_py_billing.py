"""test_py_billing.py — the PostgreSQL receiver
(examples/billing_receiver.py, pattern 1 of docs/outbox.md) billing every
finished grant exactly once while it is SIGKILLed at random points,
producers run through a lossy proxy, and onced itself is SIGKILLed and
restarted.

Owns: one real PostgreSQL 15 (initdb + pg_ctl in a temp dir, unix socket
only, started with the example's own start_postgres), one onced, a
once_proxy dropping requests and replies, producer threads that each
place a surface, ask for a grant and finish it with a random outcome,
again and again (a lost reply retried under the same rpc id until
answered), and the receiver process, restarted after each kill.
Invariant: the billing table (no UNIQUE on grant_id, so a duplicate shows)
holds each grant onced recorded as finished exactly once: its surfaces'
histories are the truth, read from onced after the producers stopped.
Every wait is bounded; PostgreSQL, the receiver and the proxy are stopped
in finally blocks and onced by its fixture, whatever failed.
Never: decides an outcome by a fixed sleep (a kill waits for the
receiver to bill something first: new billing rows, or its stored offset
moved and then a random 0-150 ms).

ONCE_BILLING_BROKEN=1 runs the broken receiver (--offset-after-effect:
the offset committed in a second transaction after the billing rows):
this test then fails with grants billed twice. ONCE_BILLING_SEED=N
repeats a run's random choices.
"""
from __future__ import annotations

import importlib.util
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

import psycopg2  # python3-psycopg2 (scripts/deps.sh installs it)

import once

from conftest import BUILD, ROOT, SLOW, client_through, wait_for

EXAMPLE = ROOT / "examples" / "billing_receiver.py"
_spec = importlib.util.spec_from_file_location("billing_receiver", EXAMPLE)
br = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(br)

RECEIVER_KILLS = 16
PER_SURFACE = 40  # grants per surface (onced keeps 64 in its history)
OUTCOMES = ("SUCCEEDED", "FAILED_BEFORE_START", "ABORTED", "RELEASED")
BROKEN = os.environ.get("ONCE_BILLING_BROKEN") == "1"


class Receiver:
    """examples/billing_receiver.py as a child process."""

    def __init__(self, url: str, dsn: str, log: Path,
                 rnd: random.Random) -> None:
        self.args = [sys.executable, str(EXAMPLE), "--server", url, "--dsn",
                     dsn, "--wait-ms", "200", "--max-events", "50"]
        self.rnd = rnd
        if BROKEN:
            self.args.append("--offset-after-effect")
        self.log = log
        self.proc = None
        self.env = dict(os.environ)
        self.env.setdefault("PYTHONPATH", str(BUILD / "python"))

    def start(self) -> None:
        # Acks after each batch or deferred (every 4: the offset row is
        # the truth, what was not acknowledged comes again and is skipped).
        ack_every = self.rnd.choice((1, 4))
        with open(self.log, "ab") as out:
            out.write(f"-- start, --ack-every {ack_every}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(self.args +
                                         ["--ack-every", str(ack_every)],
                                         stdout=out,
                                         stderr=subprocess.STDOUT,
                                         env=self.env)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Producers:
    """Threads finishing grants through the proxy until stopped."""

    def __init__(self, url: str, n: int, seed: int) -> None:
        self.url = url
        self.stop = threading.Event()
        self.surfaces: List[str] = []
        self.done = [0] * n
        self.errors: List[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(i, seed + i),
                                         daemon=True) for i in range(n)]

    def _persist(self, c: once.Client, fn):
        """fn() until answered: a lost reply is retried under its rpc id
        (never a new one), an unreachable onced is waited for."""
        end = time.monotonic() + 60 * SLOW
        pending = None
        while True:
            try:
                return c.retry(pending) if pending is not None else fn()
            except once.OutcomeUnknown as e:
                pending = pending or e
            except (once.Unavailable, once.DeadlineExceeded):
                pass
            if time.monotonic() > end:
                raise AssertionError("a producer call unanswered for 60 s")
            time.sleep(0.02)

    def _run(self, i: int, seed: int) -> None:
        rnd = random.Random(seed)
        try:
            c = client_through(self.proxy, attempt_timeout_ms=200 * SLOW,
                               deadline_ms=3000 * SLOW,
                               lease_ttl_ms=600_000)
            with c:
                n, gen, surface = 0, 0, ""
                while not self.stop.is_set():
                    if n % PER_SURFACE == 0:
                        surface = f"p{i}-s{n // PER_SURFACE}"
                        self.surfaces.append(surface)
                        gen = self._persist(c, lambda: c.set_placement(
                            surface, f"m{i}", f"/srv/{surface}")).generation
                    g = self._persist(c, lambda: c.request_grant(
                        f"p{i}-job-{n}", surface, f"m{i}", f"/srv/{surface}",
                        gen)).grant
                    self._persist(c, lambda: c.finish(
                        g.grant_id, rnd.choice(OUTCOMES)))
                    n += 1
                    self.done[i] = n
        except BaseException as e:  # reported by the test
            self.errors.append(e)

    def start(self, proxy) -> None:
        self.proxy = proxy
        for t in self.threads:
            t.start()

    def join(self, timeout: float = 120 * SLOW) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=timeout)
            assert not t.is_alive(), "a producer did not stop"
        assert not self.errors, self.errors


def finished_grants(url: str, surfaces: List[str]) -> Dict[int, str]:
    """onced's own record: every finished grant of the surfaces, with its
    outcome (a surface's history holds its last 64 grants)."""
    out = {}
    with once.Client(url, lease=False) as c:
        for s in surfaces:
            r = c.get_surface(s)
            assert not r.HasField("open_grant"), f"{s} has an open grant"
            assert len(r.history) < 64, f"{s}: history may be cut"
            for g in r.history:
                assert g.state == once.messages.GRANT_FINISHED
                out[g.grant_id] = once.messages.GrantOutcome.Name(g.outcome)
    return out


def billing_rows(db) -> int:
    with db, db.cursor() as cur:
        cur.execute("SELECT count(*) FROM billing")
        return cur.fetchone()[0]


def stored_offset(db) -> int:
    with db, db.cursor() as cur:
        cur.execute("SELECT last_offset FROM receiver_offset "
                    "WHERE consumer = 'billing'")
        row = cur.fetchone()
        return row[0] if row else 0


def test_billing_exactly_once_through_kills(onced_factory, proxy_factory):
    seed = int(os.environ.get("ONCE_BILLING_SEED", time.time_ns() % 100000))
    print(f"seed {seed}{' (broken receiver)' if BROKEN else ''}")
    rnd = random.Random(seed)
    began = time.monotonic()

    def left() -> float:
        """What is left of the test's 90 s (ctest's bound is 120 s: a
        failure here still runs the finally block that stops PostgreSQL,
        which a ctest timeout would not)."""
        return max(0.1, min(30 * SLOW, began + 90 * SLOW - time.monotonic()))
    o = onced_factory()
    pg_dir = Path(tempfile.mkdtemp(prefix="once-billing-pg-", dir="/tmp"))
    receiver = None
    producers = None
    try:
        dsn = br.start_postgres(pg_dir)
        db = psycopg2.connect(dsn)
        with db, db.cursor() as cur:
            cur.execute(br.SCHEMA)
        # The consumer first: a topic without consumers keeps nothing.
        with once.Client(o.url) as c:
            once.Consumer(c, once.SYSTEM_TOPIC, "billing").subscribe()
        p = proxy_factory(o, ["--drop-req", "0.05", "--drop-rep", "0.1",
                              "--seed", str(seed)])
        producers = Producers(p.url, 4, seed)
        producers.start(p)
        receiver = Receiver(p.url, dsn, pg_dir / "receiver.log", rnd)
        receiver.start()
        # RECEIVER_KILLS kills of the receiver and, at a random one of
        # the rounds between, one of onced (under the running receiver and
        # producers). A round picks its kill point at random: a random
        # 0-150 ms after the stored offset moved (anywhere in the loop:
        # in a Read, an Ack, a PostgreSQL transaction), or as soon as new
        # billing rows are seen (just after a commit of the effect: before
        # the Ack, or, in the broken receiver, before its offset's commit).
        onced_kill_at = rnd.randrange(2, RECEIVER_KILLS - 2)
        for k in range(RECEIVER_KILLS + 1):
            what = f"the receiver to bill something (round {k})"
            if rnd.random() < 0.6:
                before = billing_rows(db)
                wait_for(lambda: billing_rows(db) > before, left(), what,
                         0.001)
            else:
                before = stored_offset(db)
                wait_for(lambda: stored_offset(db) > before, left(), what,
                         0.02)
                time.sleep(rnd.uniform(0, 0.15))
            if k == onced_kill_at:
                o.kill()
                o.start()
                continue
            receiver.kill()
            receiver.start()
        producers.join(left())
        truth = finished_grants(o.url, producers.surfaces)
        with once.Client(o.url, lease=False) as c:
            head = once.Consumer(c, once.SYSTEM_TOPIC, "billing") \
                .topic_info().head
        wait_for(lambda: stored_offset(db) >= head, left(),
                 f"the receiver to reach offset {head}", 0.05)
        receiver.kill()
        with db, db.cursor() as cur:
            cur.execute("SELECT grant_id, outcome FROM billing")
            billed = cur.fetchall()
        db.close()
        counts: Dict[int, int] = {}
        for gid, _ in billed:
            counts[gid] = counts.get(gid, 0) + 1
        twice = sorted(g for g, n in counts.items() if n > 1)
        missing = sorted(set(truth) - set(counts))
        extra = sorted(set(counts) - set(truth))
        print(f"{len(truth)} grants finished, {len(billed)} billing rows, "
              f"{RECEIVER_KILLS} receiver kills, onced killed once, "
              f"{time.monotonic() - began:.1f} s")
        assert not twice, f"billed more than once: {twice[:20]}"
        assert not missing, f"never billed: {missing[:20]}"
        assert not extra, f"billed, never finished: {extra[:20]}"
        assert sorted(billed) == sorted(truth.items()), "outcomes differ"
        assert len(truth) >= 60, "too few grants to mean anything"
    finally:
        if producers is not None:
            producers.stop.set()
            for t in producers.threads:
                t.join(timeout=10)
        if receiver is not None:
            receiver.kill()
            log = receiver.log
            if log.exists():
                print("receiver log (tail):\n" +
                      log.read_text(errors="replace")[-3000:])
        br.stop_postgres(pg_dir, "immediate")
        shutil.rmtree(pg_dir, ignore_errors=True)
