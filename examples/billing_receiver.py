#!/usr/bin/python3
"""billing_receiver.py — bills each finished grant exactly once into
PostgreSQL, from onced's system topic (docs/outbox.md, pattern 1).

It reads the once.system topic as the durable consumer "billing" and, for
each batch of events, in ONE PostgreSQL transaction: inserts a billing row
for every grant.finished event and sets its offset row to the batch's last
offset. After a crash (even a SIGKILL between the commit and the Ack) it
starts from the offset it stored: events at or below it are skipped, so
no grant is billed twice and none is missed. It acknowledges onced after
each commit, lazily: a lost Ack only delays reclamation.

    # PostgreSQL of its own in a directory (initdb + pg_ctl, unix socket,
    # no TCP), started when it is not running:
    /usr/bin/python3 examples/billing_receiver.py --pg-dir /tmp/billing-pg \\
        --idle-exit 2
    /usr/bin/python3 examples/billing_receiver.py --pg-dir /tmp/billing-pg \\
        --report      # the billing table
    /usr/bin/python3 examples/billing_receiver.py --pg-dir /tmp/billing-pg \\
        --stop-pg

or --dsn "host=... dbname=..." for a server of your own. It signs with
./data/dev.key when present (`make run`'s onced).

--offset-after-effect is the broken receiver that tests/python/
test_py_billing.py shows failing: it commits the billing rows and then, in
a second transaction, the offset, so a crash between the two bills the
batch again.

Exit status: 0 done (--idle-exit, --report, --stop-pg); 1 an error.
"""
from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psycopg2

try:
    import once
except ImportError:  # run from a source checkout: use the build tree's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" /
                           "python"))
    import once

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "billing"  # the cluster's superuser (trust on its own socket)

SCHEMA = """
CREATE TABLE IF NOT EXISTS billing (
    line        bigserial PRIMARY KEY,   -- no UNIQUE on grant_id: a
    grant_id    bigint NOT NULL,         -- duplicate must show, not fail
    surface     text NOT NULL,
    request_id  text NOT NULL,
    outcome     text NOT NULL,
    event_offset bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS receiver_offset (
    consumer    text PRIMARY KEY,
    last_offset bigint NOT NULL
);
"""


# ---- a PostgreSQL of its own (what the tests start too) ------------------


def _pg_os_user() -> Optional[str]:
    """Who runs PostgreSQL: ourselves, or (as root, which initdb refuses)
    the user postgres, else nobody."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise SystemExit("billing_receiver: running as root and no user "
                     "'postgres' or 'nobody' to run PostgreSQL as")


def _pg(dir: Path, *args: str, timeout: float = 60) -> int:
    """Runs a PostgreSQL tool as the cluster's user; output to dir/pg.out
    (a file, not a pipe: the postmaster pg_ctl starts keeps what it got)."""
    with open(dir / "pg.out", "ab") as out:
        return subprocess.run([str(PG_BIN / args[0]), *args[1:]],
                              user=_pg_os_user(), stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def pg_dsn(dir: Path) -> str:
    return f"host={dir} port=5432 user={PG_USER} dbname=postgres"


def start_postgres(dir: Path) -> str:
    """A PostgreSQL 15 cluster in dir (initdb the first time), listening
    on a unix socket in dir only (no TCP); started unless running. Returns
    its DSN. dir's parents must be searchable by the cluster's user."""
    dir = Path(dir).resolve()
    data = dir / "data"
    dir.mkdir(parents=True, exist_ok=True)
    user = _pg_os_user()
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(dir, pw.pw_uid, pw.pw_gid)
    if not (data / "PG_VERSION").exists():
        if _pg(dir, "initdb", "-D", str(data), "-U", PG_USER, "-A", "trust",
               "-E", "UTF8", "--locale=C", "--no-sync") != 0:
            raise RuntimeError(f"initdb failed: {dir / 'pg.out'}")
    if _pg(dir, "pg_ctl", "-D", str(data), "status") != 0:
        opts = f"-k {dir} -p 5432 -c listen_addresses='' -c fsync=on " \
               "-c synchronous_commit=on"
        if _pg(dir, "pg_ctl", "-D", str(data), "-l", str(dir / "pg.log"),
               "-w", "-t", "60", "-o", opts, "start", timeout=90) != 0:
            raise RuntimeError(f"pg_ctl start failed: {dir / 'pg.log'}")
    return pg_dsn(dir)


def stop_postgres(dir: Path, mode: str = "fast") -> None:
    """Stops the cluster in dir if it runs (mode: smart, fast, immediate)."""
    dir = Path(dir).resolve()
    if (dir / "data" / "postmaster.pid").exists():
        _pg(dir, "pg_ctl", "-D", str(dir / "data"), "-m", mode, "-w", "-t",
            "60", "stop", timeout=90)


# ---- the receiver ---------------------------------------------------------


def stored_offset(db, consumer: str) -> int:
    """The last offset applied, from the receiver's own table (its row is
    made the first time)."""
    with db, db.cursor() as cur:
        cur.execute(SCHEMA)
        cur.execute("INSERT INTO receiver_offset VALUES (%s, 0) "
                    "ON CONFLICT DO NOTHING", (consumer,))
        cur.execute("SELECT last_offset FROM receiver_offset "
                    "WHERE consumer = %s", (consumer,))
        return cur.fetchone()[0]


def billing_rows(batch: once.Batch, after: int) -> list:
    rows = []
    for ev in batch:
        if ev.offset <= after:
            continue
        s = ev.system()
        if s.kind == "grant.finished":
            g = s.grant
            rows.append((g.grant_id, g.surface, g.request_id,
                         once.messages.GrantOutcome.Name(g.outcome),
                         ev.offset))
    return rows


INSERT = ("INSERT INTO billing (grant_id, surface, request_id, outcome, "
          "event_offset) VALUES (%s, %s, %s, %s, %s)")
SET_OFFSET = ("UPDATE receiver_offset SET last_offset = "
              "GREATEST(last_offset, %s) WHERE consumer = %s")


def apply_batch(db, consumer: str, batch: once.Batch) -> int:
    """Pattern 1: the billing rows and the offset row in one transaction.
    The offset is read under FOR UPDATE, so two receivers running at once
    (an old one not quite dead) still bill each event once."""
    with db, db.cursor() as cur:
        cur.execute("SELECT last_offset FROM receiver_offset "
                    "WHERE consumer = %s FOR UPDATE", (consumer,))
        rows = billing_rows(batch, cur.fetchone()[0])
        cur.executemany(INSERT, rows)
        cur.execute(SET_OFFSET, (batch.last, consumer))
    return len(rows)


def apply_batch_broken(db, consumer: str, batch: once.Batch) -> int:
    """The broken receiver: the effect, committed; then the offset, in a
    transaction of its own. A crash between the two commits bills the
    batch again after the restart."""
    with db, db.cursor() as cur:
        cur.execute("SELECT last_offset FROM receiver_offset "
                    "WHERE consumer = %s", (consumer,))
        rows = billing_rows(batch, cur.fetchone()[0])
        cur.executemany(INSERT, rows)
    with db, db.cursor() as cur:
        cur.execute(SET_OFFSET, (batch.last, consumer))
    return len(rows)


def receive(a: argparse.Namespace, dsn: str) -> None:
    apply = apply_batch_broken if a.offset_after_effect else apply_batch
    db = psycopg2.connect(dsn)
    try:
        with once.Client(a.server, key_file=a.key_file,
                         attempt_timeout_ms=a.wait_ms + 1000,
                         deadline_ms=a.wait_ms + 10000) as c:
            cons = once.Consumer(c, once.SYSTEM_TOPIC, a.consumer,
                                 max_events=a.max_events, wait_ms=a.wait_ms)
            start = stored_offset(db, a.consumer)
            cons.resume(start)  # skip what is applied; move the cursor
            print(f"billing: {a.consumer} resumes after offset {start}",
                  flush=True)

            def on_batch(b: once.Batch) -> None:
                n = apply(db, a.consumer, b)
                print(f"billing: offsets ..{b.last}: {n} grants billed "
                      f"(low water {b.low_water})", flush=True)

            done = cons.run_batches(on_batch, idle_exit=a.idle_exit,
                                    ack_every=a.ack_every)
            print(f"billing: idle, done up to offset {done}", flush=True)
    finally:
        db.close()


def report(dsn: str) -> None:
    db = psycopg2.connect(dsn)
    with db, db.cursor() as cur:
        cur.execute(SCHEMA)
        cur.execute("SELECT grant_id, surface, outcome, event_offset "
                    "FROM billing ORDER BY line")
        for row in cur.fetchall():
            print("grant %d  %s  %s  (offset %d)" % row)
        cur.execute("SELECT consumer, last_offset FROM receiver_offset")
        for row in cur.fetchall():
            print("consumer %s: offset %d" % row)
    db.close()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=once.DEFAULT_URL)
    p.add_argument("--key-file", default="data/dev.key"
                   if os.path.exists("data/dev.key") else None)
    p.add_argument("--consumer", default="billing")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn", help="a PostgreSQL to bill into")
    where.add_argument("--pg-dir", type=Path,
                       help="a PostgreSQL of its own in this directory "
                       "(started when not running)")
    p.add_argument("--stop-pg", action="store_true",
                   help="stop --pg-dir's PostgreSQL and exit")
    p.add_argument("--report", action="store_true",
                   help="print the billing table and exit")
    p.add_argument("--idle-exit", type=float, default=None,
                   help="exit after this many seconds without an event")
    p.add_argument("--max-events", type=int, default=100)
    p.add_argument("--wait-ms", type=int, default=1000,
                   help="long-poll of each Read (default %(default)s)")
    p.add_argument("--ack-every", type=int, default=1,
                   help="Ack onced every this many batches (default "
                   "%(default)s): the offset row is the truth, so a late "
                   "Ack only means events read again and skipped")
    p.add_argument("--offset-after-effect", action="store_true",
                   help="the BROKEN receiver: offset in a second "
                   "transaction (bills twice after a crash between them)")
    return p.parse_args()


def main() -> int:
    a = parse_args()
    if a.stop_pg:
        if a.pg_dir is None:
            raise SystemExit("--stop-pg needs --pg-dir")
        stop_postgres(a.pg_dir)
        return 0
    dsn = a.dsn or start_postgres(a.pg_dir)
    if a.report:
        report(dsn)
        return 0
    while True:
        try:
            receive(a, dsn)
            return 0
        except (once.Unavailable, once.OutcomeUnknown,
                once.DeadlineExceeded, once.LeaseExpired) as e:
            # onced away (restarting, failing over): start again from
            # the stored offset; nothing is lost or billed twice.
            print(f"billing: {e}; starting again", file=sys.stderr,
                  flush=True)
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
