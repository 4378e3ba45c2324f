#!/usr/bin/python3
"""scheduler.py — a scheduler written with once's Python client.

It places work surfaces on machines, queues jobs for them (the queue path:
each machine's agent claims its own, examples/agent.py) and asks for a start
grant of its own (the direct path), checks the credential offline and
finishes the grant. Every request that starts work goes through an
InputStore: it is written to disk before it is sent and removed once onced
has accepted it. If this process dies before it sees an answer, the next
start resumes what is kept, under the same rpc ids, so nothing starts twice.

Against `make run`'s onced (from the repository root):

    /usr/bin/python3 examples/scheduler.py            # uses ./data/dev.key
    /usr/bin/python3 examples/agent.py --machine m1 --idle-exit 2

Exit status: 0 done; 3 some input's outcome is unknown (kept, resumed on
the next start); 1 another error.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

try:
    import once
except ImportError:  # run from a source checkout: use the build tree's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" /
                           "python"))
    import once


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=once.DEFAULT_URL)
    p.add_argument("--key-file", default="data/dev.key"
                   if os.path.exists("data/dev.key") else None,
                   help="key file to sign with (default ./data/dev.key when "
                   "present, as `make run` writes it)")
    p.add_argument("--store", default="scheduler-inputs",
                   help="the kept-input directory (default %(default)s)")
    p.add_argument("--run", default=time.strftime("run%H%M%S"),
                   help="names this run's surfaces and jobs")
    p.add_argument("--machines", default="m1,m2")
    p.add_argument("--jobs", type=int, default=4)
    return p.parse_args()


def main() -> int:
    a = parse_args()
    machines = [m for m in a.machines.split(",") if m]
    unknown = 0

    def on_lost(client: once.Client, err: once.LeaseExpired) -> None:
        print(f"scheduler: lease lost ({err}); stopping", file=sys.stderr)

    with once.Client(a.server, key_file=a.key_file,
                     on_lease_lost=on_lost) as c, \
            once.InputStore(a.store) as store:
        print(f"scheduler: client {c.client_id} on {a.server}")

        # 1. Whatever an earlier life kept and never saw answered.
        rep = store.resume(c)
        for r in rep.resumed:
            k = r.input
            if r.error is not None:
                print(f"scheduler: resumed {k.request_id} (rpc id "
                      f"{k.rpc_id}): {r.error}")
            elif k.kind == once.InputKind.START:
                g = r.response.grant
                print(f"scheduler: resumed {k.request_id} (rpc id "
                      f"{k.rpc_id}): grant {g.grant_id} on {g.surface}"
                      f"{' (already granted)' if r.response.existing else ''}")
            else:
                row = r.response.row
                print(f"scheduler: resumed {k.request_id} (rpc id "
                      f"{k.rpc_id}): queued as work {row.work_id} for "
                      f"{row.machine}")
        if rep.resumed:
            print(f"scheduler: resumed {rep.accepted} accepted, "
                  f"{rep.pending} still pending, {rep.rejected} rejected, "
                  f"{rep.ended} lease ended")

        # 2. Place this run's surfaces (one per job: a queued row per
        # surface, a newer request for a surface replaces a pending one),
        # round robin over the machines.
        surfaces = []
        for j in range(a.jobs):
            s, m = f"{a.run}-s{j}", machines[j % len(machines)]
            gen = c.set_placement(s, m, f"/srv/{s}").generation
            surfaces.append(s)
            print(f"scheduler: placed {s} on {m} (generation {gen})")

        # 3. The queue path: jobs for the machines' agents, kept until
        # accepted; each row's destination is its surface's placement now.
        for j, s in enumerate(surfaces):
            rid = f"{a.run}-job-{j}"
            try:
                row = store.submit_work(c, rid, s,
                                        payload=f"job {j}".encode()).row
                print(f"scheduler: queued {rid} as work {row.work_id} for "
                      f"{row.machine}")
            except once.OutcomeUnknown as e:
                unknown += 1
                print(f"scheduler: {rid}: {e}; kept for the next start")

        # 4. The direct path: a start grant for a report of our own.
        report = f"{a.run}-report"
        gen = c.set_placement(report, machines[0], "/srv/reports").generation
        try:
            r = store.submit_grant(c, f"{a.run}-report", report, machines[0],
                                   "/srv/reports", gen, payload=b"report")
        except once.OutcomeUnknown as e:
            print(f"scheduler: report: {e}; kept for the next start")
            return 3
        info = c.verify_credential(r.credential)
        print(f"scheduler: grant {info.grant_id} for {info.surface} on "
              f"{info.machine}, epoch {info.epoch}, credential valid until "
              f"{info.expires_unix_ms}")
        done = c.finish(info.grant_id, "SUCCEEDED").grant
        print(f"scheduler: grant {done.grant_id} finished "
              f"{once.grants_pb2.GrantOutcome.Name(done.outcome)}")
        left = store.list()
        print(f"scheduler: run {a.run} done: {a.jobs} jobs queued, "
              f"{len(left)} inputs kept")
    return 3 if unknown else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except once.OnceError as e:
        print(f"scheduler: {e}", file=sys.stderr)
        sys.exit(1)
