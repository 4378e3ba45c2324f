"""recorder.py — a history recorder around the once Python client: each
call made through a Recorder is one "op" line of history.py's format, with
its invoke and complete times (time.monotonic_ns, CLOCK_MONOTONIC, the
clock of every process of a run), its process and client id, arguments
and result: ok with the value, fail (the server or libonce said it did not
run), or unknown (OutcomeUnknown, or anything unexpected: may have run).

Owns: the mapping from client calls and their exceptions to op records.
Invariant: every call made through it is written exactly once, after it
ended, even when it raised; an op is "fail" only for a OnceError other
than OutcomeUnknown (libonce reports OUTCOME_UNKNOWN whenever an earlier
attempt may have run).
Never: retries by itself (the workload decides), or hides an exception
from its caller.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

import once
from history import FAIL, OK, UNKNOWN, Writer


def rpc_text(rid: Optional[once.RpcId]) -> Optional[str]:
    return None if rid is None else f"{rid.client_id}:{rid.seq}"


class Recorder:
    """Records the calls of one logical process (one call at a time)."""

    def __init__(self, writer: Writer, process: int) -> None:
        self.w, self.process = writer, process

    def record(self, op: str, key: str, args: Dict[str, Any], client: int,
               fn: Callable[[], Any],
               value_of: Callable[[Any], Any] = lambda v: v
               ) -> Tuple[str, Any, Optional[BaseException]]:
        """Runs fn and writes its op. Returns (result, value, exception);
        args may gain "rpc" from the reply or the exception."""
        t0 = time.monotonic_ns()
        err: Optional[BaseException] = None
        value = None
        try:
            reply = fn()
            result = OK
            if isinstance(reply, once.Reply):
                if reply.rpc_id is not None:
                    args.setdefault("rpc", rpc_text(reply.rpc_id))
                reply = reply.value
            value = value_of(reply)
        except once.OutcomeUnknown as e:
            result, err = UNKNOWN, e
        except once.OnceError as e:
            result, err = FAIL, e
        except Exception as e:  # noqa: BLE001 — unknown is the safe verdict
            result, err = UNKNOWN, e
        t1 = time.monotonic_ns()
        if isinstance(err, once.OnceError) and err.rpc_id is not None:
            args.setdefault("rpc", rpc_text(err.rpc_id))
        text = None
        if err is not None:
            text = (f"{type(err).__name__} {getattr(err, 'reason', '')}"
                    .strip())
        self.last_args = args
        self.w.write({"type": "op", "id": self.w.next_id(),
                      "process": self.process, "client": client, "op": op,
                      "key": key, "args": args, "invoke": t0, "complete": t1,
                      "result": result, "value": value, "error": text})
        return result, value, err

    # ---- the calls of the campaign's workload -------------------------------

    def incr(self, c: once.Client, name: str, delta: int = 1,
             rpc: Optional[Tuple[int, int]] = None):
        cid = rpc[0] if rpc else c.client_id
        args: Dict[str, Any] = {"delta": delta}
        if rpc:
            args["rpc"] = f"{rpc[0]}:{rpc[1]}"
        return self.record("incr", name, args, cid,
                           lambda: c.counter_incr_reply(name, delta,
                                                        rpc_id=rpc))

    def retry(self, c: once.Client, name: str, delta: int,
              err: once.OnceError):
        """The same rpc id again (Client.retry), recorded as an incr."""
        args = {"delta": delta, "rpc": rpc_text(err.rpc_id)}
        return self.record("incr", name, args, err.rpc_id.client_id,
                           lambda: c.retry_reply(err))

    def read(self, c: once.Client, name: str, final: bool = False):
        args = {"final": True} if final else {}
        return self.record("read", name, args, 0,
                           lambda: c.counter_get(name))

    def grant(self, c: once.Client, op: str, surface: str, args: Dict,
              method: str, req, value_of, rpc=None):
        """A Grants call (op grant_request or grant_finish) under a new rpc
        id, or under rpc (client_id, seq) to retry one."""
        if rpc:
            args["rpc"] = f"{rpc[0]}:{rpc[1]}"
        return self.record(op, surface, args, c.client_id,
                           lambda: c.invoke("/once.v1.Grants/" + method, req,
                                            rpc_id=rpc), value_of)

    def grant_request(self, c: once.Client, surface: str, request_id: str,
                      generation: int, rpc=None):
        req = once.grants_pb2.RequestGrantRequest(
            request_id=request_id, attempt=1, surface=surface, machine="m1",
            location="/w", generation=generation, credential_ttl_ms=600000)
        return self.grant(c, "grant_request", surface,
                          {"request_id": request_id}, "RequestGrant", req,
                          lambda r: r.grant.grant_id, rpc)

    def grant_finish(self, c: once.Client, surface: str, grant_id: int,
                     rpc=None):
        req = once.grants_pb2.FinishGrantRequest(grant_id=grant_id,
                                                 outcome=1)
        return self.grant(c, "grant_finish", surface, {"grant_id": grant_id},
                          "FinishGrant", req, lambda r: None, rpc)

    def lease_open(self, open_fn: Callable[[], once.Client]):
        box: Dict[str, once.Client] = {}

        def run():
            box["c"] = open_fn()
            return box["c"].client_id
        res, cid, err = self.record("lease_open", "", {}, 0, run)
        return box.get("c"), res, err

    def lease_renew(self, c: once.Client, cid: int = 0):
        """RenewLease of c's own lease, or of client id cid."""
        cid = cid or c.client_id
        return self.record("lease_renew", "", {"client": cid}, cid,
                           lambda: c.renew_lease(cid))

    def lease_open_bare(self, c: once.Client, ttl_ms: int):
        """OpenLease through c, a lease nobody renews: its client id."""
        return self.record(
            "lease_open", "", {"ttl_ms": ttl_ms}, 0,
            lambda: c.call("/once.v1.Lease/OpenLease",
                           once.once_pb2.OpenLeaseRequest(ttl_ms=ttl_ms)),
            lambda r: r.client_id)

    def lease_close(self, c: once.Client):
        cid = c.client_id
        return self.record("lease_close", "", {"client": cid}, cid,
                           lambda: c.close_lease())

    # ---- KV (once.v1.KV/Txn and Range) -------------------------------------

    def kv_txn(self, c: once.Client, op: str, key: str, args: Dict,
               compares, then, else_, value_of, rpc=None):
        """A KV Txn recorded as op (put, cas, outbox_append) on key, under a
        new rpc id or under rpc (client_id, seq) to resend one."""
        if rpc:
            args["rpc"] = f"{rpc[0]}:{rpc[1]}"
        return self.record(op, key, args, rpc[0] if rpc else c.client_id,
                           lambda: c.kv_txn_reply(compares, then, else_,
                                                  rpc_id=rpc), value_of)

    def put(self, c: once.Client, key: str, value: str, rpc=None):
        """An unconditional put; its value is the key's new version (the
        Txn's revision: a put applied twice answers two)."""
        kv = once.kv
        return self.kv_txn(c, "put", key, {"value": value}, [],
                           [kv.put(key, value)], [],
                           lambda r: r.results[0].put.version, rpc)

    def cas(self, c: once.Client, key: str, expect: Optional[str],
            value: str, rpc=None):
        """Compare-and-set: value if the key holds expect (None: if it is
        absent); the op's value is the Txn's succeeded. The else branch
        reads the key: the caller learns what it holds from
        self.last_seen."""
        kv = once.kv
        cmp = kv.absent(key) if expect is None else kv.value(key) == expect
        self.last_seen = None

        def value_of(r):
            if not r.succeeded and r.results and r.results[0].get.found:
                self.last_seen = r.results[0].get.kv.value.decode()
            return bool(r.succeeded)
        return self.kv_txn(c, "cas", key, {"expect": expect, "value": value},
                           [cmp], [kv.put(key, value)], [kv.get(key)],
                           value_of, rpc)

    def get(self, c: once.Client, key: str, final: bool = False):
        """A KV read (Range of one key): its value, None when absent."""
        def value_of(kvs):
            return kvs.value.decode() if kvs is not None else None
        return self.record("get", key, {"final": True} if final else {}, 0,
                           lambda: c.kv_get(key), value_of)

    # ---- the outbox (an emit in a Txn; Outbox Read and Ack) -----------------

    def append(self, c: once.Client, topic: str, payload: str, rpc=None):
        """A Txn emitting one event on topic: the op's value is the event's
        offset (KvEmitResult), its event id the rpc id with index 0."""
        kv = once.kv
        return self.kv_txn(c, "outbox_append", topic, {"payload": payload},
                           [], [kv.emit(topic, payload)], [],
                           lambda r: r.results[0].emit.offset, rpc)

    def outbox_read(self, c: once.Client, topic: str, consumer: str,
                    final: bool = False):
        """Outbox Read (key "topic/consumer"): the value is {"acked": the
        cursor the reply reports, "head", "events": [[offset, event id
        "client:seq:index"], ...]}."""
        req = once.outbox_pb2.OutboxReadRequest(
            topic=topic, consumer=consumer, max_events=20, max_wait_ms=200)

        def value_of(r):
            return {"acked": r.acked, "head": r.head, "events": [
                [e.offset, f"{e.id.client_id}:{e.id.seq}:{e.id.index}"]
                for e in r.events]}
        return self.record("outbox_read", f"{topic}/{consumer}",
                           {"final": True} if final else {}, 0,
                           lambda: c.invoke("/once.v1.Outbox/Read", req),
                           value_of)

    def outbox_ack(self, c: once.Client, topic: str, consumer: str,
                   offset: int, rpc=None):
        """Outbox Ack up to offset; the value is the cursor after it."""
        req = once.outbox_pb2.OutboxAckRequest(topic=topic, consumer=consumer,
                                               offset=offset)
        args: Dict[str, Any] = {"offset": offset}
        if rpc:
            args["rpc"] = f"{rpc[0]}:{rpc[1]}"
        return self.record("outbox_ack", f"{topic}/{consumer}", args,
                           c.client_id,
                           lambda: c.invoke("/once.v1.Outbox/Ack", req,
                                            rpc_id=rpc), lambda r: r.acked)
