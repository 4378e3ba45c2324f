#!/usr/bin/python3
"""workflow.py — a scheduler's workflow as a chain that survives the
scheduler (once.Journal, docs/chains.md), its job table in onced's KV.

The job table lives on the server: one key per job, wf/<chain>/jobs/<n>,
whose value says where the job is (queued -> placed -> granted ->
finished), its machine, generation, work row, grant and result; and
wf/<chain>/progress, the chain's progress (the current job and how many
are done). Every move of the table is one KV Txn guarded by the versions
this chain last wrote (the job's row and the progress key), sent as a
chain step: its rpc id is in the journal before it is sent, so after a
crash it is re-sent under that id and onced replays it (the same branch,
the same answer) instead of running it again.

For each job: place its surface on a machine -> row "placed" -> enqueue
the job for the machine's agent (Grants Enqueue; the agent Claims it,
which starts the grant, runs it and finishes it: examples/agent.py) ->
wait until the grant is there, row "granted" -> wait for its finish, row
"finished" with its outcome and the progress moved on -> next job. Each
commit consumes a reply, keeps the context (JSON: the phase, the job, the
versions) and records the next request with its rpc id, in one local
write; the waits only read. Kill this process anywhere and start it again
with the same --journal and --chain: it goes on from the journal.

    /usr/bin/python3 examples/agent.py --machine m1 &
    /usr/bin/python3 examples/workflow.py --jobs 3 --journal ./journal

--die-after N SIGKILLs the process right after the N-th reply is recorded,
before it is consumed (to see the resume hand the reply back).
Exit status: 0 done; 3 the pending step's lease ended while the chain was
down (see `oncectl chain show`); 4 a row was moved by someone else (its
version is not the one this chain wrote); 1 another error.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

try:
    import once
except ImportError:  # run from a source checkout: use the build tree's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" /
                           "python"))
    import once

from once import kv

M = once.messages
G = "/once.v1.Grants/"
# Answers that leave a call's outcome open: the same id (a step), or the
# same read, again.
TRANSIENT = (once.OutcomeUnknown, once.Unavailable, once.DeadlineExceeded)
# Phases whose request is sent right after the commit; the others wait.
SENT = ("place", "placed", "enqueue")


class Moved(Exception):
    """A Txn's compare failed: the row is not as this chain left it."""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=once.DEFAULT_URL)
    p.add_argument("--key-file", default="data/dev.key"
                   if os.path.exists("data/dev.key") else None)
    p.add_argument("--journal", default="journal")
    p.add_argument("--chain", default="workflow")
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--machine", default="m1")
    p.add_argument("--poll-ms", type=int, default=100,
                   help="how often a wait reads the surface")
    p.add_argument("--attempt-timeout-ms", type=int, default=0,
                   help="one attempt's bound before re-sending (0: "
                   "libonce's)")
    p.add_argument("--die-after", type=int, default=0)
    return p.parse_args()


def keys(a: argparse.Namespace, job: int):
    return f"wf/{a.chain}/jobs/{job:04d}", f"wf/{a.chain}/progress"


def seed(a: argparse.Namespace):
    """The first step: every job's row queued and the progress at job 0,
    if the table is not there yet."""
    _, prog = keys(a, 0)
    rows = [kv.put(keys(a, j)[0], json.dumps({"job": j, "state": "queued"}))
            for j in range(a.jobs)]
    return kv.txn_request(
        [kv.absent(prog)],
        rows + [kv.put(prog, json.dumps({"job": 0, "done": 0})),
                kv.get(prog)],
        [kv.get(prog)])


def move(a: argparse.Namespace, ctx: dict, **fields):
    """A Txn moving the job's row to fields, and the progress with it, only
    if both are at the versions this chain wrote last; the row as written
    is the last result (else: the row and the progress as they are)."""
    row, prog = keys(a, ctx["job"])
    new = dict(ctx["row"], **fields)
    job, done = ctx["job"], ctx["done"]
    if new["state"] == "finished":
        job, done = job + 1, done + 1
    return kv.txn_request(
        [kv.version(row) == ctx["rv"], kv.version(prog) == ctx["pv"]],
        [kv.put(row, json.dumps(new)),
         kv.put(prog, json.dumps({"job": job, "done": done})),
         kv.get(row)],
        [kv.get(row), kv.get(prog)])


def request(a: argparse.Namespace, ctx: dict):
    """The (method, request) of a phase in SENT."""
    job, phase = ctx["job"], ctx["phase"]
    surface = f"{a.chain}-s{job}"
    if phase == "place":
        return G + "SetPlacement", M.SetPlacementRequest(
            surface=surface, machine=a.machine, location=f"/w/{job}")
    if phase == "placed":
        return move(a, ctx, state="placed", machine=a.machine,
                    generation=ctx["generation"])
    return G + "Enqueue", M.EnqueueRequest(
        request_id=f"{a.chain}-job-{job}", attempt=1, surface=surface,
        payload=json.dumps({"job": job}).encode())


def wait(a: argparse.Namespace, c: once.Client, ctx: dict):
    """Reads the job's surface until the wait of ctx's phase is over; the
    Txn that records it. Reads only: safe to do again after a crash."""
    surface = f"{a.chain}-s{ctx['job']}"
    rid = f"{a.chain}-job-{ctx['job']}"
    while True:
        try:
            s = c.get_surface(surface)
        except TRANSIENT:
            continue
        grants = list(s.history) + ([s.open_grant]
                                    if s.HasField("open_grant") else [])
        mine = [g for g in grants if g.request_id == rid]
        if ctx["phase"] == "granting" and mine:
            return move(a, ctx, state="granted", grant=mine[0].grant_id)
        if ctx["phase"] == "finishing":
            done = [g for g in s.history if g.grant_id == ctx["row"]["grant"]]
            if done:
                return move(a, ctx, state="finished",
                            result=M.GrantOutcome.Name(done[0].outcome))
        time.sleep(a.poll_ms / 1000)


def advance(a: argparse.Namespace, ctx: dict, reply) -> dict:
    """The context after consuming reply."""
    ctx = dict(ctx)
    phase = ctx["phase"]
    if phase == "seed" or isinstance(reply, M.KvTxnResponse):
        if not reply.succeeded:
            raise Moved(f"job {ctx['job']} ({phase}): compare "
                        f"{reply.failed_compare} failed; as they are: " +
                        "; ".join(f"{r.get.kv.key.decode()} = "
                                  f"{r.get.kv.value.decode()} (version "
                                  f"{r.get.kv.version})"
                                  for r in reply.results))
        got = reply.results[-1].get.kv
        ctx.update(pv=reply.revision, rv=got.version)
    if phase == "seed":
        ctx.update(phase="place", job=0, done=0, seed=reply.revision,
                   row={"job": 0, "state": "queued"})
    elif phase == "place":
        ctx.update(phase="placed", generation=reply.generation)
    elif phase == "placed":
        ctx.update(phase="enqueue", row=json.loads(got.value))
    elif phase == "enqueue":
        ctx.update(phase="granting", row=dict(ctx["row"],
                                              work=reply.row.work_id))
    elif phase == "granting":
        ctx.update(phase="finishing", row=json.loads(got.value))
    else:  # finishing: the next job, its row as the seed wrote it
        job = ctx["job"] + 1
        ctx.update(job=job, done=ctx["done"] + 1, rv=ctx["seed"],
                   row={"job": job, "state": "queued"},
                   phase="place" if job < a.jobs else "done")
    return ctx


def connect(a: argparse.Namespace) -> once.Client:
    """A Client; opening its lease is tried again while onced cannot be
    reached (or the reply of OpenLease was lost)."""
    for tries in range(100, 0, -1):
        try:
            return once.Client(a.server, key_file=a.key_file,
                               attempt_timeout_ms=a.attempt_timeout_ms)
        except TRANSIENT as e:
            if tries == 1:
                raise
            print(f"workflow: {e}; connecting again", file=sys.stderr)
            time.sleep(0.1)
    raise AssertionError("not reached")


def drive(a: argparse.Namespace, c: once.Client, ch: once.Chain) -> int:
    """Decides every move from the chain's state alone."""
    replies = 0
    while True:
        s = ch.state
        if s.state == once.ChainState.LEASE_ENDED:
            print(f"workflow: step {s.method} under {s.rpc_id}: lease "
                  f"ended ({s.reason}); look at the server, then "
                  "commit or forget the chain")
            return 3
        ctx = json.loads(s.context) if s.context else {"phase": "seed",
                                                       "job": 0}
        try:
            if s.state == once.ChainState.PENDING:
                ch.send()                  # the same rpc id: replayed if ran
                continue
            if s.state == once.ChainState.IDLE:
                if ctx["phase"] == "done":
                    print(f"workflow: {ctx['done']} jobs done")
                    return 0
                # A wait phase (or a step whose record a crash prevented):
                # decide it from the context, a step under a fresh id.
                ch.step(*(seed(a) if ctx["phase"] == "seed" else
                          request(a, ctx) if ctx["phase"] in SENT else
                          wait(a, c, ctx)))
                continue
        except TRANSIENT as e:
            print(f"workflow: {e}; sending again", file=sys.stderr)
            continue                       # still PENDING, same rpc id
        replies += 1
        if replies == a.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        nxt = advance(a, ctx, s.reply())   # REPLIED: consume it
        print(f"workflow: job {ctx['job']} {ctx['phase']} done")
        ch.commit(json.dumps(nxt).encode(),
                  next=request(a, nxt) if nxt["phase"] in SENT else None)


def main() -> int:
    a = parse_args()
    with connect(a) as c, once.Journal(a.journal) as journal:
        return drive(a, c, journal.chain(c, a.chain))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Moved as e:
        print(f"workflow: moved by someone else: {e}", file=sys.stderr)
        sys.exit(4)
    except once.OnceError as e:
        print(f"workflow: {e}", file=sys.stderr)
        sys.exit(1)
