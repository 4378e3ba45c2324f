#!/usr/bin/python3
"""agent.py — a machine's agent written with once's Python client.

It claims its own machine's queued work (a claim never takes another
machine's row), checks each credential offline with the server's public
key and the highest epoch seen per surface, "runs" the job, renewing the
credential under the same grant while it runs, and finishes the grant.
A claim whose answer was lost is retried with the same rpc id, which
returns the same rows (with fresh credentials) instead of claiming more.

Against `make run`'s onced, after examples/scheduler.py:

    /usr/bin/python3 examples/agent.py --machine m1 --idle-exit 2

Exit status: 0 done (idle for --idle-exit seconds, or --rounds reached);
2 the lease was lost; 1 another error.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Dict

try:
    import once
except ImportError:  # run from a source checkout: use the build tree's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" /
                           "python"))
    import once


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True)
    p.add_argument("--server", default=once.DEFAULT_URL)
    p.add_argument("--key-file", default="data/dev.key"
                   if os.path.exists("data/dev.key") else None,
                   help="key file to sign with (an agent:MACHINE principal "
                   "in production; default ./data/dev.key when present)")
    p.add_argument("--idle-exit", type=float, default=0,
                   help="exit after this many seconds without work (0: "
                   "never)")
    p.add_argument("--rounds", type=int, default=0,
                   help="exit after this many claims (0: no limit)")
    p.add_argument("--work-ms", type=int, default=50,
                   help="how long one job 'runs'")
    return p.parse_args()


def main() -> int:
    a = parse_args()
    stop = threading.Event()
    epochs: Dict[str, int] = {}

    def on_lost(client: once.Client, err: once.LeaseExpired) -> None:
        print(f"agent {a.machine}: lease lost ({err})", file=sys.stderr)
        stop.set()

    with once.Client(a.server, key_file=a.key_file,
                     on_lease_lost=on_lost) as c:
        pk = c.public_key()
        print(f"agent {a.machine}: client {c.client_id}, server key "
              f"{pk.hex()[:16]}...")
        idle_since = time.monotonic()
        rounds = done = 0
        while not stop.is_set():
            try:
                got = c.claim(a.machine, max=4, credential_ttl_ms=10_000)
            except once.OutcomeUnknown as e:
                got = c.retry(e)  # the same claim: the same rows
            rounds += 1
            for x in got.claimed:
                g = x.grant
                if not x.HasField("credential"):
                    print(f"agent {a.machine}: grant {g.grant_id} withheld: "
                          f"{x.credential_withheld}")
                    continue
                info = once.verify_credential(
                    pk, x.credential, min_epoch=epochs.get(g.surface, 0))
                epochs[g.surface] = info.epoch
                print(f"agent {a.machine}: running {x.row.request_id} "
                      f"(work {x.row.work_id}, grant {g.grant_id}, "
                      f"epoch {info.epoch}) at {info.location}")
                time.sleep(a.work_ms / 2000)
                fresh = c.renew_credential(g.grant_id, a.machine,
                                           credential_ttl_ms=10_000)
                once.verify_credential(pk, fresh.credential,
                                       min_epoch=epochs[g.surface])
                time.sleep(a.work_ms / 2000)
                fin = c.finish(g.grant_id, "SUCCEEDED").grant
                done += 1
                print(f"agent {a.machine}: finished grant {fin.grant_id} "
                      f"{once.grants_pb2.GrantOutcome.Name(fin.outcome)}")
            if got.claimed:
                idle_since = time.monotonic()
            elif a.idle_exit and time.monotonic() - idle_since > a.idle_exit:
                break
            if a.rounds and rounds >= a.rounds:
                break
            if not got.claimed:
                stop.wait(0.2)
        print(f"agent {a.machine}: {done} jobs done")
        return 2 if stop.is_set() else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except once.OnceError as e:
        print(f"agent: {e}", file=sys.stderr)
        sys.exit(1)
