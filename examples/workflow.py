#!/usr/bin/python3
"""workflow.py — a scheduler's workflow as a chain that survives the
scheduler (once.Journal, docs/chains.md).

For each job: place its surface on a machine → request a start grant →
finish it (here the scheduler plays the agent that reports the finish) →
record the result in a counter → next job. Each activity is one chain
step; each commit consumes a reply, keeps the context (the job and phase,
as JSON) and records the next request with its rpc id, in one local write.
Kill this process anywhere and start it again with the same --journal and
--chain: it goes on from the journal, re-sending a pending step under its
recorded id (onced replays it), so every activity runs once.

    /usr/bin/python3 examples/workflow.py --jobs 3 --journal ./journal

--die-after N SIGKILLs the process right after the N-th reply is recorded,
before it is consumed (to see the resume hand the reply back).
Exit status: 0 done; 3 the pending step's lease ended while the chain was
down (see `oncectl chain show`); 1 another error.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

try:
    import once
except ImportError:  # run from a source checkout: use the build tree's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" /
                           "python"))
    import once

M = once.messages
G = "/once.v1.Grants/"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=once.DEFAULT_URL)
    p.add_argument("--key-file", default="data/dev.key"
                   if os.path.exists("data/dev.key") else None)
    p.add_argument("--journal", default="journal")
    p.add_argument("--chain", default="workflow")
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--machine", default="m1")
    p.add_argument("--die-after", type=int, default=0)
    return p.parse_args()


def request(a: argparse.Namespace, ctx: dict):
    """The (method, request) of the context's phase."""
    job, phase = ctx["job"], ctx["phase"]
    surface = f"{a.chain}-s{job}"
    if phase == "place":
        return G + "SetPlacement", M.SetPlacementRequest(
            surface=surface, machine=a.machine, location=f"/w/{job}")
    if phase == "grant":
        return G + "RequestGrant", M.RequestGrantRequest(
            request_id=f"{a.chain}-job-{job}", attempt=1, surface=surface,
            machine=a.machine, location=f"/w/{job}",
            generation=ctx["generation"])
    if phase == "finish":
        return G + "FinishGrant", M.FinishGrantRequest(
            grant_id=ctx["grant"], outcome=M.SUCCEEDED)
    return once.counter_request(f"{a.chain}.done", 1)


def advance(ctx: dict, reply) -> dict:
    """The context after consuming reply (the phases of one job, then the
    next job)."""
    ctx = dict(ctx)
    if ctx["phase"] == "place":
        ctx.update(phase="grant", generation=reply.generation)
    elif ctx["phase"] == "grant":
        ctx.update(phase="finish", grant=reply.grant.grant_id)
    elif ctx["phase"] == "finish":
        ctx.update(phase="record")
    else:
        ctx = {"job": ctx["job"] + 1, "phase": "place", "done": reply.value}
    return ctx


def main() -> int:
    a = parse_args()
    replies = 0
    with once.Client(a.server, key_file=a.key_file) as c, \
            once.Journal(a.journal) as journal:
        ch = journal.chain(c, a.chain)
        while True:
            s = ch.state
            if s.state == once.ChainState.LEASE_ENDED:
                print(f"workflow: step {s.method} under {s.rpc_id}: lease "
                      f"ended ({s.reason}); look at the server, then "
                      "commit or forget the chain")
                return 3
            try:
                if s.state == once.ChainState.IDLE and not s.context:
                    ch.step(*request(a, {"job": 0, "phase": "place"}))
                    continue
                if s.state == once.ChainState.PENDING:
                    ch.send()              # the same rpc id: replayed if ran
                    continue
            except (once.OutcomeUnknown, once.Unavailable) as e:
                print(f"workflow: {e}; sending again", file=sys.stderr)
                continue                   # still PENDING, same rpc id
            ctx = json.loads(s.context) if s.context else {}
            if s.state == once.ChainState.IDLE:
                print(f"workflow: {ctx['job']} jobs done "
                      f"(done counter {ctx.get('done')})")
                return 0
            replies += 1
            if replies == a.die_after:
                os.kill(os.getpid(), signal.SIGKILL)
            reply = s.reply()              # REPLIED: consume it
            nxt = advance(ctx or {"job": 0, "phase": "place"}, reply)
            print(f"workflow: job {ctx.get('job', 0)} "
                  f"{ctx.get('phase', 'place')} done")
            if nxt["job"] >= a.jobs:
                ch.commit(json.dumps(nxt).encode())
            else:
                ch.commit(json.dumps(nxt).encode(), next=request(a, nxt))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except once.OnceError as e:
        print(f"workflow: {e}", file=sys.stderr)
        sys.exit(1)
