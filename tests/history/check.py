#!/usr/bin/python3
"""check.py — the project's own history checker (history.py's format).

Usage: check.py HISTORY.jsonl [--json OUT] [--budget N]
Prints "verdict: valid" or "verdict: invalid" with figures, and for each
violation the smallest failing window found (the operations involved,
with times in ms from the history's first invocation). Exit status 0
valid, 1 invalid, 2 the history could not be read or the search ran out
of its budget ("verdict: inconclusive").

Checks:
  exactly-once   per counter: every rpc id answered ok with one value
                 only; acknowledged increments' values distinct (positive
                 deltas); the final value (reads marked final) at least
                 the acknowledged sum and at most that plus the unknown
                 ones (each unknown applied at most once); with unit
                 deltas the acknowledged values a part of {1..final}.
  linearizable   per key: counters (incr/read) and registers (put/cas/
                 get, for the KV service): a Wing-Gong / Lowe search with
                 a cache of (linearized set, state); unknown operations
                 complete at infinity (taking effect or not); same-rpc-id
                 operations are one call; definite failures are left out.
  one-grant      per surface: no two grants certainly open at one time
                 (from the request's ok to its finish's invocation).
  lease-ended    no ok mutating result under a client id invoked after
                 that client's lease was seen closed or expired.
                 Per KV write and outbox call (put, cas, outbox_append,
                 outbox_ack): every rpc id answered ok with one value only
                 (a put's version, a cas's outcome, an append's offset).
  outbox-dense   per consumer (key topic/consumer): each Read's events
                 are cursor+1, cursor+2, ... with no gap or repeat; the
                 cursor a Read reports never goes back (below an earlier
                 Read's or an Ack answered ok); an offset holds one event
                 and an event (client:seq:index) one offset; an append's
                 event is at the offset it was answered; after the drain
                 (a final Read with no event) the offsets read are 1..last
                 with no hole and every append answered ok was read.

Owns: the verdict of a history.
Invariant: stdlib only; a history the checker cannot decide is never
called valid.
Never: trusts the workload (it reads only the history), or mutates it.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, __import__("os").path.dirname(__file__))
from history import FAIL, INF, MUTATING, OK, UNKNOWN, Op, load_file  # noqa


@dataclass
class Violation:
    check: str
    key: str
    what: str
    ops: List[Op] = field(default_factory=list)

    def text(self, t0: int, most: int = 30) -> str:
        lines = [f"[{self.check}] {self.key}: {self.what}"]
        ops = sorted(self.ops, key=lambda o: (o.invoke, o.id))
        if len(ops) > most:
            lines.append(f"    ({len(ops)} operations; the last {most})")
        for o in ops[-most:]:
            lines.append("    " + o.describe(t0))
        return "\n".join(lines)


class Inconclusive(Exception):
    """The search ran out of its budget."""


# ---- logical calls: attempts of one rpc id are one call ------------------


def logical_calls(ops: List[Op]) -> List[Op]:
    """Ops with the same (op, key, rpc) merged into one: ok when any attempt
    was ok (its value the first ok's, its completion the first ok's),
    unknown when none was ok and one was unknown, fail otherwise. Ops
    without an rpc id stay as they are."""
    groups: Dict[Tuple[str, str, str], List[Op]] = defaultdict(list)
    out: List[Op] = []
    for o in ops:
        if o.rpc:
            groups[(o.op, o.key, o.rpc)].append(o)
        else:
            out.append(o)
    for g in groups.values():
        oks = sorted((o for o in g if o.result == OK),
                     key=lambda o: o.complete)
        first = min(g, key=lambda o: o.invoke)
        if oks:
            res, val, comp = OK, oks[0].value, oks[0].complete
        elif any(o.result == UNKNOWN for o in g):
            res, val, comp = UNKNOWN, None, None
        else:
            res, val, comp = FAIL, None, max(o.complete or 0 for o in g)
        out.append(Op(id=first.id, process=first.process, op=first.op,
                      key=first.key, invoke=first.invoke, complete=comp,
                      result=res, value=val, args=first.args,
                      client=first.client, error=first.error))
    return out


# ---- (a) exactly once ------------------------------------------------------


def check_exactly_once(ops: List[Op]) -> List[Violation]:
    out: List[Violation] = []
    by_key: Dict[str, List[Op]] = defaultdict(list)
    finals: Dict[str, List[Op]] = defaultdict(list)
    for o in ops:
        if o.op == "incr":
            by_key[o.key].append(o)
        elif o.op == "read" and o.result == OK and o.args.get("final"):
            finals[o.key].append(o)
    for key, incrs in sorted(by_key.items()):
        calls: Dict[str, List[Op]] = defaultdict(list)
        for o in incrs:
            calls[o.rpc or f"op{o.id}"].append(o)
        acked: Dict[str, Tuple[int, Op]] = {}
        unknown_sum = 0
        positive = all(int(o.args.get("delta", 1)) > 0 for o in incrs)
        unit = all(int(o.args.get("delta", 1)) == 1 for o in incrs)
        for rpc, g in calls.items():
            oks = [o for o in g if o.result == OK]
            values = sorted({o.value for o in oks})
            if len(values) > 1:
                out.append(Violation(
                    "exactly-once", key,
                    f"rpc id {rpc} answered ok with values {values}: the "
                    "call was applied more than once", oks))
            if oks:
                acked[rpc] = (int(g[0].args.get("delta", 1)), oks[0])
            elif any(o.result == UNKNOWN for o in g):
                unknown_sum += int(g[0].args.get("delta", 1))
        n_unknown = unknown_sum
        if positive:
            seen: Dict[Any, Op] = {}
            for _, (_, o) in sorted(acked.items()):
                if o.value in seen:
                    out.append(Violation(
                        "exactly-once", key,
                        f"two calls were answered the same value {o.value}: "
                        "an acknowledged increment was lost, or one was "
                        "applied twice", [seen[o.value], o]))
                else:
                    seen[o.value] = o
        if not finals.get(key):
            continue
        fin = max(finals[key], key=lambda o: o.complete)
        F = int(fin.value)
        acked_sum = sum(d for d, _ in acked.values())
        if F < acked_sum:
            out.append(Violation(
                "exactly-once", key,
                f"final value {F} is below the {acked_sum} acknowledged: an "
                "acknowledged increment was lost", [fin]))
        elif F > acked_sum + n_unknown:
            out.append(Violation(
                "exactly-once", key,
                f"final value {F} is above the {acked_sum} acknowledged plus "
                f"{n_unknown} unknown: something was applied more than once",
                [fin]))
        if unit:
            for _, (_, o) in sorted(acked.items()):
                if not 1 <= int(o.value) <= F:
                    out.append(Violation(
                        "exactly-once", key,
                        f"acknowledged value {o.value} is outside 1..{F} "
                        "(the final value): a lost write", [o, fin]))
    return out


ONE_ANSWER = ("put", "cas", "outbox_append", "outbox_ack")


def check_one_answer(ops: List[Op]) -> List[Violation]:
    """Each rpc id of a KV write or an outbox call answered ok with one
    value: a resend is answered from the call's record, so a second value
    means the call ran twice (a put's new version, a cas's outcome, an
    append's offset, an Ack's cursor)."""
    out: List[Violation] = []
    calls: Dict[Tuple[str, str, str], List[Op]] = defaultdict(list)
    for o in ops:
        if o.op in ONE_ANSWER and o.rpc and o.result == OK:
            calls[(o.key, o.op, o.rpc)].append(o)
    for (key, op, rpc), g in sorted(calls.items()):
        values = sorted({json.dumps(o.value) for o in g})
        if len(values) > 1:
            out.append(Violation(
                "exactly-once", key,
                f"{op} rpc id {rpc} answered ok with values "
                f"{', '.join(values)}: the call was applied more than once",
                g))
    return out


# ---- (b) linearizability: models -------------------------------------------

# A model: init state, step(state, op) -> (ok, state'), and sym(op): a key
# under which unknown ops are interchangeable (None: never).


class _Any:
    """A state not known yet (the start of a window cut from a history):
    the first operation that observes a value fixes it."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()


class CounterModel:
    init = 0

    @staticmethod
    def step(state: int, o: Op) -> Tuple[bool, int]:
        if state is ANY:
            if o.result == UNKNOWN:
                return True, ANY
            if o.op == "incr":
                return True, o.value
        if o.op == "incr":
            nxt = state + int(o.args.get("delta", 1))
            if o.result == UNKNOWN:
                return True, nxt
            return nxt == o.value, nxt
        if o.op == "read":
            if state is ANY:
                return True, o.value
            return o.value == state, state
        raise ValueError(f"counter model: no op {o.op}")

    @staticmethod
    def sym(o: Op) -> Optional[Any]:
        if o.op == "incr" and o.result == UNKNOWN:
            return ("incr", int(o.args.get("delta", 1)))
        return None


class RegisterModel:
    """A KV key: put(value), cas(expect -> value) answering true/false,
    get -> value (None: absent)."""
    init = None

    @staticmethod
    def step(state: Any, o: Op) -> Tuple[bool, Any]:
        if state is ANY and o.op != "put":
            if o.op == "get":
                return True, o.value
            if o.result == OK and o.value:
                return True, o.args.get("value")  # it matched
            return True, ANY
        if o.op == "put":
            return True, o.args.get("value")
        if o.op == "cas":
            hit = state == o.args.get("expect")
            nxt = o.args.get("value") if hit else state
            if o.result == UNKNOWN:
                return True, nxt
            return bool(o.value) == hit, nxt
        if o.op == "get":
            return o.value == state, state
        raise ValueError(f"register model: no op {o.op}")

    @staticmethod
    def sym(o: Op) -> Optional[Any]:
        if o.result == UNKNOWN and o.op == "put":
            return ("put", json.dumps(o.args.get("value")))
        return None


MODELS = {"incr": CounterModel, "read": CounterModel, "put": RegisterModel,
          "cas": RegisterModel, "get": RegisterModel}


class _Entry:
    __slots__ = ("op", "idx", "call", "time", "match", "prev", "next")

    def __init__(self, op, idx, call, time):
        self.op, self.idx, self.call, self.time = op, idx, call, time
        self.match = self.prev = self.next = None


def _lift(e: _Entry) -> None:
    for x in (e, e.match):
        x.prev.next = x.next
        if x.next is not None:
            x.next.prev = x.prev


def _unlift(e: _Entry) -> None:
    for x in (e.match, e):
        x.prev.next = x
        if x.next is not None:
            x.next.prev = x


def shrink(ops: List[Op], model, stuck: Op, budget: int) -> List[Op]:
    """The shortest window of ops that no linearization explains from any
    starting value (ANY), or [] when none is found. A window starts at a
    quiet moment c, the completion of an ok op that no other ok op spans
    (every ok op ended before c or began after it; unknown ops may take
    effect later, so each one invoked before c stays in), and ends at the
    first quiet moment e after the return of stuck (the op the whole
    search could not pass): it holds the ops invoked from c to e. Cut at
    quiet moments, failing the window means failing the history: the
    state at c is whatever the ops before it left, nothing invoked after
    e can come before an ok op of the window, and an unknown op can
    always take effect last."""
    oks = [o for o in ops if o.result == OK]

    def quiet(t: int) -> bool:
        return not any(o.invoke < t < o.complete for o in oks)
    ends = sorted({o.complete for o in oks if o.complete >= stuck.end})
    e = next((t for t in ends[:400] if quiet(t)), INF)
    cuts = sorted({o.complete for o in oks if o.complete <= stuck.invoke},
                  reverse=True)[:400]

    class Free(model):  # the same model from an unknown state
        init = ANY
    for c in cuts:
        if not quiet(c):
            continue
        window = [o for o in ops if o.invoke <= e and
                  (o.invoke >= c or o.end == INF)]
        try:
            ok, _ = linearizable(window, Free, budget, shrinking=False)
        except Inconclusive:
            return []
        if not ok:
            return window
    # No quiet moment before stuck: the history's start is one.
    window = [o for o in ops if o.invoke <= e]
    try:
        ok, _ = linearizable(window, model, budget, shrinking=False)
    except Inconclusive:
        return []
    return [] if ok else window


def linearizable(ops: List[Op], model, budget: int = 2_000_000,
                 shrinking: bool = True) -> Tuple[bool, List[Op]]:
    """Wing-Gong / Lowe search over one key's ops (no definite failures).
    Returns (True, []) or (False, the failing window: the op whose return
    could not be passed at the deepest point, the ops concurrent with it,
    and the last ops linearized before it). Raises Inconclusive past
    budget steps."""
    events = []
    for i, o in enumerate(ops):
        c = _Entry(o, i, True, o.invoke)
        r = _Entry(o, i, False, o.end)
        c.match, r.match = r, c
        events += [c, r]
    # Calls before returns at equal times: equal times are concurrent.
    events.sort(key=lambda e: (e.time, 0 if e.call else 1, e.idx))
    head = _Entry(None, -1, True, -INF)
    prev = head
    for e in events:
        prev.next, e.prev = e, prev
        prev = e
    state, mask = model.init, 0
    stack: List[Tuple[_Entry, Any, frozenset]] = []
    cache = set()
    seen = frozenset()
    entry = head.next
    steps = 0
    deepest, stuck, order = -1, None, []
    while head.next is not None:
        steps += 1
        if steps > budget:
            raise Inconclusive(f"more than {budget} search steps")
        if entry is None:  # only happens if a return was lifted: guard
            break
        if entry.call:
            o = entry.op
            s = model.sym(o)
            if s is not None and s in seen:
                entry = entry.next  # an earlier twin stands for it
                continue
            ok, nxt = model.step(state, o)
            if ok:
                nmask = mask | (1 << entry.idx)
                if (nmask, nxt) not in cache:
                    cache.add((nmask, nxt))
                    stack.append((entry, state, seen))
                    state, mask = nxt, nmask
                    _lift(entry)
                    entry, seen = head.next, frozenset()
                    continue
            if s is not None:
                seen = seen | {s}
            entry = entry.next
        else:
            if len(stack) > deepest:
                deepest, stuck = len(stack), entry.op
                order = [x[0].op for x in stack]
            if not stack:
                break
            e, state, seen = stack.pop()
            mask &= ~(1 << e.idx)
            _unlift(e)
            s = e.op and model.sym(e.op)
            if s is not None:
                seen = seen | {s}
            entry = e.next
    if head.next is None:
        return True, []
    if shrinking:
        w = shrink(ops, model, stuck, budget)
        if w:
            return False, w
    window = [stuck]
    window += [o for o in ops if o is not stuck and o.invoke <= stuck.end
               and o.end >= stuck.invoke]
    window += [o for o in order[-3:] if o not in window]
    return False, window


def check_linearizable(ops: List[Op], budget: int) -> List[Violation]:
    out: List[Violation] = []
    by_key: Dict[Tuple[Any, str], List[Op]] = defaultdict(list)
    for o in logical_calls(ops):
        model = MODELS.get(o.op)
        if model is None or o.result == FAIL:
            continue
        if o.result == UNKNOWN and o.op in ("read", "get"):
            continue  # a read that never answered changed nothing
        by_key[(model, o.key)].append(o)
    for (model, key), kops in sorted(by_key.items(), key=lambda x: x[0][1]):
        ok, window = linearizable(kops, model, budget)
        if not ok:
            out.append(Violation(
                "linearizable", key,
                f"no linearization of its {len(kops)} operations; the "
                f"shortest failing window cut at quiet moments holds "
                f"{len(window)}", window))
    return out


# ---- (c) one open grant per surface ----------------------------------------


def check_one_grant(ops: List[Op]) -> List[Violation]:
    out: List[Violation] = []
    opened: Dict[str, Dict[Any, Op]] = defaultdict(dict)  # surface -> grant
    finishes: Dict[Any, List[Op]] = defaultdict(list)
    for o in ops:
        if o.op == "grant_request" and o.result == OK:
            opened[o.key].setdefault(o.value, o)
        elif o.op == "grant_finish" and o.result in (OK, UNKNOWN):
            finishes[o.args.get("grant_id")].append(o)
    for surface, grants in sorted(opened.items()):
        spans = []
        for gid, req in grants.items():
            fin = finishes.get(gid, [])
            until = min((f.invoke for f in fin), default=INF)
            spans.append((req.complete, until, gid, req, fin))
        spans.sort(key=lambda s: s[0])
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if b[0] >= a[1]:
                    break
                if b[0] < a[1] and a[0] < b[1]:
                    out.append(Violation(
                        "one-grant", surface,
                        f"grants {a[2]} and {b[2]} were both open (from "
                        "the second's grant to the first's finish): two "
                        "open grants on one surface",
                        [a[3], b[3]] + a[4][:1] + b[4][:1]))
    return out


# ---- (d) a lease that ended stays ended ------------------------------------


def check_lease_ended(ops: List[Op]) -> List[Violation]:
    out: List[Violation] = []
    ended: Dict[int, Op] = {}
    for o in ops:
        if o.result == OK and o.op == "lease_close":
            cid = int(o.args.get("client") or o.client)
        elif o.op == "lease_renew" and o.result == FAIL and \
                "LEASE_EXPIRED" in (o.error or ""):
            cid = int(o.args.get("client") or o.client)
        else:
            continue
        if cid and (cid not in ended or o.complete < ended[cid].complete):
            ended[cid] = o
    for o in ops:
        if o.result != OK or o.op not in MUTATING:
            continue
        cid = int(o.args.get("client") or 0) if o.op == "lease_renew" \
            else o.rpc_client()
        e = ended.get(cid)
        if e is not None and o.invoke > e.complete:
            out.append(Violation(
                "lease-ended", f"client {cid}",
                f"{o.op} answered ok after the lease was seen ended", [e, o]))
    return out


# ---- (e) the outbox: dense offsets, each event once ----------------------


def _outbox_reads(o: Op) -> List[Tuple[int, str]]:
    return [(int(off), str(eid)) for off, eid in o.value.get("events", [])]


def _outbox_cursor(ops: List[Op], cons: str, reads: List[Op]
                   ) -> List[Violation]:
    """The cursor a Read reports never goes back: not below one an
    earlier Read (completed before it was invoked) reported, nor below an
    Ack answered ok before it (else offsets acknowledged come again)."""
    marks = []  # (time, 0: a read's invoke / 1: a cursor known, value, op)
    for o in reads:
        marks.append((o.invoke, 0, int(o.value["acked"]), o))
        marks.append((o.complete, 1, int(o.value["acked"]), o))
    for o in ops:
        if o.op == "outbox_ack" and o.key == cons and o.result == OK:
            marks.append((o.complete, 1, max(int(o.args["offset"]),
                                             int(o.value or 0)), o))
    best, by = 0, None
    for t, kind, v, o in sorted(marks, key=lambda m: m[:2]):
        if kind == 1:
            if v > best:
                best, by = v, o
        elif v < best:
            return [Violation(
                "outbox-dense", cons,
                f"a Read reports the cursor at {v} after {best} was known "
                f"(a repeat: offsets {v + 1}..{best} come again)", [by, o])]
    return []


def check_outbox(ops: List[Op]) -> List[Violation]:
    """Per consumer (key "topic/consumer"): every Read's events are
    cursor+1, cursor+2, ... (no gap, no repeat after the cursor it
    reports); the cursor never goes back; an offset always holds the same
    event and an event (client:seq:index) one offset only (one append, one
    event); each append answered ok has its event at the offset it was
    answered. Once the consumer drained (a final Read with no event): the
    offsets read are 1..the last with no hole, and every append answered
    ok was read."""
    out: List[Violation] = []
    reads: Dict[str, List[Op]] = defaultdict(list)
    for o in ops:
        if o.op == "outbox_read" and o.result == OK:
            reads[o.key].append(o)
    appends: Dict[str, List[Op]] = defaultdict(list)
    for o in logical_calls(ops):
        if o.op == "outbox_append" and o.result == OK:
            appends[o.key].append(o)
    for cons, rs in sorted(reads.items()):
        rs.sort(key=lambda o: (o.invoke, o.id))
        at: Dict[int, Tuple[str, Op]] = {}
        where: Dict[str, Tuple[int, Op]] = {}
        for o in rs:
            want = int(o.value["acked"]) + 1
            for off, eid in _outbox_reads(o):
                if off != want:
                    out.append(Violation(
                        "outbox-dense", cons,
                        f"offset {off} delivered where {want} was next "
                        f"({'a repeat' if off < want else 'a gap'})", [o]))
                    break
                want += 1
            for off, eid in _outbox_reads(o):
                held = at.setdefault(off, (eid, o))
                w = where.setdefault(eid, (off, o))
                if held[0] != eid:
                    out.append(Violation(
                        "outbox-dense", cons, f"offset {off} held event "
                        f"{held[0]}, then {eid}", [held[1], o]))
                if w[0] != off:
                    out.append(Violation(
                        "outbox-dense", cons, f"event {eid} at offsets "
                        f"{w[0]} and {off}: one append, two events",
                        [w[1], o]))
        out += _outbox_cursor(ops, cons, rs)
        drained = any(o.args.get("final") and not o.value["events"]
                      for o in rs)
        topic = cons.split("/")[0]
        for a in appends.get(topic, []):
            eid = f"{a.rpc}:0"
            if eid in where and where[eid][0] != int(a.value):
                out.append(Violation(
                    "outbox-dense", cons, f"append {a.rpc} was answered "
                    f"offset {a.value}, its event read at {where[eid][0]}",
                    [a, where[eid][1]]))
            elif drained and eid not in where:
                out.append(Violation(
                    "outbox-dense", cons, f"append {a.rpc} (offset "
                    f"{a.value}) answered ok was never read", [a]))
        if drained and at:
            holes = sorted(set(range(1, max(at) + 1)) - set(at))
            if holes:
                out.append(Violation(
                    "outbox-dense", cons, f"offsets {holes[:10]} were never "
                    "read (a gap)", [at[max(at)][1]]))
    return out


CHECKS: List[Tuple[str, Callable]] = [
    ("exactly-once", lambda ops: check_exactly_once(ops) +
     check_one_answer(ops)),
    ("linearizable", None),  # needs the budget: run by check()
    ("one-grant", check_one_grant),
    ("lease-ended", check_lease_ended),
    ("outbox-dense", check_outbox),
]


def check(ops: List[Op], budget: int = 2_000_000) -> Dict[str, Any]:
    """Every check over ops: {"verdict", "violations", "figures"}."""
    vs: List[Violation] = []
    inconclusive = None
    for name, fn in CHECKS:
        if fn is not None:
            vs += fn(ops)
            continue
        try:
            vs += check_linearizable(ops, budget)
        except Inconclusive as e:
            inconclusive = str(e)
    figures: Dict[str, Any] = {"operations": len(ops)}
    for r in (OK, FAIL, UNKNOWN):
        figures[r] = sum(1 for o in ops if o.result == r)
    kinds: Dict[str, int] = defaultdict(int)
    for o in ops:
        kinds[o.op] += 1
    figures["by_op"] = dict(sorted(kinds.items()))
    figures["kv"] = sum(kinds[k] for k in ("put", "cas", "get"))
    figures["outbox"] = {
        "appends": kinds["outbox_append"], "reads": kinds["outbox_read"],
        "acks": kinds["outbox_ack"],
        "events_read": sum(len(o.value.get("events", [])) for o in ops
                           if o.op == "outbox_read" and o.result == OK)}
    verdict = "invalid" if vs else ("inconclusive" if inconclusive
                                    else "valid")
    return {"verdict": verdict, "violations": vs, "figures": figures,
            "inconclusive": inconclusive}


def report(res: Dict[str, Any], ops: List[Op], out=sys.stdout) -> None:
    t0 = min((o.invoke for o in ops), default=0)
    f = res["figures"]
    print(f"verdict: {res['verdict']}", file=out)
    print(f"operations: {f['operations']} (ok {f['ok']}, fail {f['fail']}, "
          f"unknown {f['unknown']}); by op: "
          + ", ".join(f"{k} {v}" for k, v in f["by_op"].items()), file=out)
    ob = f["outbox"]
    print(f"KV operations: {f['kv']}; outbox: {ob['appends']} appends, "
          f"{ob['reads']} reads ({ob['events_read']} events), {ob['acks']} "
          "acks", file=out)
    if res["inconclusive"]:
        print(f"linearizability: inconclusive ({res['inconclusive']})",
              file=out)
    by_check: Dict[str, int] = defaultdict(int)
    for v in res["violations"]:
        by_check[v.check] += 1
    print("checks: " + ", ".join(
        f"{name} {'FAILED x' + str(by_check[name]) if by_check[name] else 'ok'}"
        for name, _ in CHECKS), file=out)
    for name, _ in CHECKS:  # of each check the first of each key, then
        vs = [v for v in res["violations"] if v.check == name]  # five
        firsts = {id(next(v for v in vs if v.key == k)) for k in
                  {v.key for v in vs}}
        vs.sort(key=lambda v: id(v) not in firsts)
        most = max(5, len(firsts))
        for v in vs[:most]:
            print(v.text(t0), file=out)
        if len(vs) > most:
            print(f"... and {len(vs) - most} more [{name}]", file=out)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("history")
    ap.add_argument("--json", help="write the verdict and figures here")
    ap.add_argument("--budget", type=int, default=2_000_000,
                    help="search steps per key before 'inconclusive'")
    a = ap.parse_args(argv)
    try:
        ops, _, _ = load_file(a.history)
    except (OSError, ValueError, KeyError) as e:
        print(f"check.py: {a.history}: {e}", file=sys.stderr)
        return 2
    res = check(ops, a.budget)
    report(res, ops)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"verdict": res["verdict"], "figures": res["figures"],
                       "violations": [
                           {"check": v.check, "key": v.key, "what": v.what,
                            "ops": [o.id for o in v.ops]}
                           for v in res["violations"]]}, f, indent=1)
    return {"valid": 0, "invalid": 1}.get(res["verdict"], 2)


if __name__ == "__main__":
    sys.exit(main())
