"""history.py — the history format of fault runs: one JSON object a line.

Owns: the record types (Op, Fault), reading and writing them, and the
vocabulary of operations, results and fault kinds.
Invariant: a history file is append-only JSON lines; every line has a
"type" ("meta", "op" or "fault"); readers skip types they do not know, so
new operations and new fault kinds can be added without breaking older
checkers.
Never: interprets results (check.py does), or needs anything outside
Python's standard library (Debian's /usr/bin/python3 runs it).

An "op" line::

    {"type": "op", "id": 17, "process": 3, "client": 42, "op": "incr",
     "key": "c0", "args": {"delta": 1, "rpc": "42:7"},
     "invoke": 1234567, "complete": 1299999,
     "result": "ok", "value": 5, "error": null}

- id: unique in the history; process: the logical process (one operation
  at a time); client: the lease's client id of the handle (0: none).
- op: incr (args delta, rpc "CID:SEQ"), read (a counter's Get; args
  final true for the reads made after every fault healed),
  grant_request (key = surface; args request_id, rpc; value grant id),
  grant_finish (args grant_id, rpc), lease_open (value client id),
  lease_renew / lease_close (args client); the KV service (key = a KV
  key): put (args value, rpc; value the key's new version), cas (args
  expect — null: the key absent —, value, rpc; value true/false, the
  Txn's succeeded), get (a Range of the key; value its value or null;
  args final as for read); the outbox: outbox_append (key = topic; a Txn
  with one emit; args payload, rpc; value the event's offset, its event
  id "rpc:0"), outbox_read (key = "topic/consumer"; args final for the
  drain after every fault healed; value {"acked": the cursor the reply
  reports, "head", "events": [[offset, "client:seq:index"], ...]}),
  outbox_ack (key = "topic/consumer"; args offset, rpc; value the
  cursor after it).
- invoke / complete: monotonic nanoseconds (CLOCK_MONOTONIC, one clock
  for every process of the run); complete is when the client stopped
  waiting, also for unknown results.
- result: "ok" (value holds the result), "fail" (the server said it did
  not run: a definite failure), "unknown" (timeout, OUTCOME_UNKNOWN: may
  have run, at most once).

A "fault" line: {"type": "fault", "kind": "kill_onced_leader",
"target": "r1", "start": NS, "end": NS, "detail": "..."}.
A "meta" line: anything about the run (seed, duration, nemeses, build).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"
RESULTS = (OK, FAIL, UNKNOWN)

# Operations that change state (an ok one under a client id whose lease
# was seen ended breaks "a lease that ended stays ended").
MUTATING = {"incr", "grant_request", "grant_finish", "lease_renew", "put",
            "cas", "outbox_append", "outbox_ack"}

INF = float("inf")


@dataclass
class Op:
    id: int
    process: int
    op: str
    key: str
    invoke: int
    complete: Optional[int]
    result: str
    value: Any = None
    args: Dict[str, Any] = field(default_factory=dict)
    client: int = 0
    error: Optional[str] = None

    @property
    def end(self) -> float:
        """Completion time for real-time order: unknown operations never
        completed as far as the order goes (infinity)."""
        if self.result == UNKNOWN or self.complete is None:
            return INF
        return self.complete

    @property
    def rpc(self) -> Optional[str]:
        return self.args.get("rpc")

    def rpc_client(self) -> int:
        """The client id of the rpc id (or the handle's)."""
        r = self.rpc
        if r:
            return int(str(r).split(":")[0])
        return self.client

    def describe(self, t0: int = 0) -> str:
        def ms(t: Optional[int]) -> str:
            return "-" if t is None else f"{(t - t0) / 1e6:.1f}"
        a = " ".join(f"{k}={v}" for k, v in sorted(self.args.items()))
        res = self.result
        if self.result == OK:
            res = f"ok {self.value}"
        elif self.error:
            res = f"{self.result} ({self.error})"
        return (f"#{self.id} p{self.process} c{self.client} {self.op} "
                f"{self.key} {a} [{ms(self.invoke)} .. {ms(self.complete)} "
                f"ms] {res}")

    def to_json(self) -> Dict[str, Any]:
        return {"type": "op", "id": self.id, "process": self.process,
                "client": self.client, "op": self.op, "key": self.key,
                "args": self.args, "invoke": self.invoke,
                "complete": self.complete, "result": self.result,
                "value": self.value, "error": self.error}


@dataclass
class Fault:
    kind: str
    target: str
    start: int
    end: Optional[int]
    detail: str = ""

    def to_json(self) -> Dict[str, Any]:
        return {"type": "fault", "kind": self.kind, "target": self.target,
                "start": self.start, "end": self.end, "detail": self.detail}


def op_from(d: Dict[str, Any]) -> Op:
    if d.get("result") not in RESULTS:
        raise ValueError(f"op {d.get('id')}: result {d.get('result')!r} is "
                         f"not one of {RESULTS}")
    return Op(id=int(d["id"]), process=int(d.get("process", 0)),
              op=str(d["op"]), key=str(d.get("key", "")),
              invoke=int(d["invoke"]),
              complete=None if d.get("complete") is None
              else int(d["complete"]),
              result=d["result"], value=d.get("value"),
              args=dict(d.get("args") or {}), client=int(d.get("client", 0)),
              error=d.get("error"))


def load(lines: Iterable[str]) -> Tuple[List[Op], List[Fault],
                                        List[Dict[str, Any]]]:
    """Ops, faults and meta records of a history (lines of JSON)."""
    ops: List[Op] = []
    faults: List[Fault] = []
    meta: List[Dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {n}: {e}") from None
        t = d.get("type", "op")
        if t == "op":
            ops.append(op_from(d))
        elif t == "fault":
            faults.append(Fault(d["kind"], str(d.get("target", "")),
                                int(d["start"]),
                                None if d.get("end") is None
                                else int(d["end"]), d.get("detail", "")))
        elif t == "meta":
            meta.append(d)
    return ops, faults, meta


def load_file(path: str):
    with open(path) as f:
        return load(f)


class Writer:
    """Appends records to a history file, one JSON line each, from any
    thread; ids are handed out here."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "a", buffering=1)
        self._mtx = threading.Lock()
        self._next = 0

    def next_id(self) -> int:
        with self._mtx:
            self._next += 1
            return self._next

    def write(self, record: Dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"))
        with self._mtx:
            self._f.write(line + "\n")

    def close(self) -> None:
        with self._mtx:
            self._f.close()
