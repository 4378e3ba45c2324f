"""once.kv — the parts of a KV transaction (once.v1.KV, docs/kv.md), for
``Client.kv_txn``::

    from once import kv

    c.kv_txn(compares=[kv.version("jobs/42") == 7],
             then=[kv.put("jobs/42", "running on m3")],
             else_=[kv.get("jobs/42")])

Owns: building KvCompare and KvOp messages from keys and values given as
str (sent as UTF-8) or bytes, and a whole Txn request (txn_request) for a
chain step (docs/chains.md).
Invariant: every helper returns a plain generated message (once_pb2 style),
so a hand-built KvCompare or KvOp goes wherever these do.
Never: sends anything, or checks sizes (onced does, with its KV_ reasons).
"""
from __future__ import annotations

from typing import Any, Iterable, List, Tuple, Union

from .errors import bad_argument
from .proto import kv_pb2

Bytes = Union[str, bytes]
TXN = "/once.v1.KV/Txn"

_C = kv_pb2.KvCompare


def b(v: Bytes, what: str = "key") -> bytes:
    """v as bytes: a str as UTF-8, bytes as they are."""
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be str or bytes, not {type(v).__name__}")


class _Target:
    """``value(key)`` or ``version(key)``: compared with ==, < or > it
    becomes a KvCompare."""

    def __init__(self, key: Bytes, target: int) -> None:
        self.key = b(key)
        self.target = target

    def _cmp(self, op: int, other: object) -> kv_pb2.KvCompare:
        if self.target == _C.VALUE:
            return _C(key=self.key, target=_C.VALUE, op=op,
                      value=b(other, "value"))  # type: ignore[arg-type]
        if isinstance(other, bool) or not isinstance(other, int) or \
                not 0 <= other < 1 << 64:
            raise bad_argument(f"a version is an int >= 0, not {other!r}")
        return _C(key=self.key, target=_C.VERSION, op=op, version=other)

    def __eq__(self, other: object) -> kv_pb2.KvCompare:  # type: ignore
        return self._cmp(_C.EQUAL, other)

    def __lt__(self, other: object) -> kv_pb2.KvCompare:
        return self._cmp(_C.LESS, other)

    def __gt__(self, other: object) -> kv_pb2.KvCompare:
        return self._cmp(_C.GREATER, other)

    __hash__ = None  # type: ignore[assignment]


def value(key: Bytes) -> _Target:
    """The key's value, compared bytewise: ``kv.value("cfg") == "on"``
    (an absent key fails every value compare)."""
    return _Target(key, _C.VALUE)


def version(key: Bytes) -> _Target:
    """The key's version: ``kv.version("jobs/42") == 7``; an absent key
    has version 0."""
    return _Target(key, _C.VERSION)


def exists(key: Bytes) -> kv_pb2.KvCompare:
    return _C(key=b(key), target=_C.EXISTS)


def absent(key: Bytes) -> kv_pb2.KvCompare:
    return _C(key=b(key), target=_C.ABSENT)


def put(key: Bytes, value: Bytes, *, lease: bool = False) -> kv_pb2.KvOp:
    """Sets key; lease=True binds it to the lease of the Txn's rpc id
    (onced deletes it when that lease ends)."""
    return kv_pb2.KvOp(put=kv_pb2.KvPut(key=b(key), value=b(value, "value"),
                                        lease=bool(lease)))


def delete(key: Bytes) -> kv_pb2.KvOp:
    return kv_pb2.KvOp(delete=kv_pb2.KvDelete(key=b(key)))


def delete_prefix(prefix: Bytes) -> kv_pb2.KvOp:
    return kv_pb2.KvOp(delete_prefix=kv_pb2.KvDeletePrefix(
        prefix=b(prefix, "prefix")))


def get(key: Bytes) -> kv_pb2.KvOp:
    """Reads key as it is at this op (after the ops before it)."""
    return kv_pb2.KvOp(get=kv_pb2.KvGet(key=b(key)))


def emit(topic: str, payload: Bytes = b"") -> kv_pb2.KvOp:
    """An outbox event on topic, committed with the Txn's other ops (its
    offset is in the op's result, ``results[i].emit.offset``); read it
    with once.Consumer (docs/outbox.md)."""
    return kv_pb2.KvOp(emit=kv_pb2.KvEmit(topic=topic,
                                          payload=b(payload, "payload")))


def _list(items: Iterable[Any], cls: type, what: str) -> List[Any]:
    out = list(items)
    for x in out:
        if not isinstance(x, cls):
            raise TypeError(f"{what} holds {cls.__name__} messages (the "
                            f"once.kv helpers make them), not "
                            f"{type(x).__name__}")
    return out


def txn_request(compares: Iterable[kv_pb2.KvCompare] = (),
                then: Iterable[kv_pb2.KvOp] = (),
                else_: Iterable[kv_pb2.KvOp] = ()
                ) -> Tuple[str, kv_pb2.KvTxnRequest]:
    """(method, request) of a Txn, as Client.kv_txn sends it: a chain step
    (``chain.step(*kv.txn_request(...))``) or a commit's ``next=``."""
    return TXN, kv_pb2.KvTxnRequest(
        compares=_list(compares, kv_pb2.KvCompare, "compares"),
        then_ops=_list(then, kv_pb2.KvOp, "then"),
        else_ops=_list(else_, kv_pb2.KvOp, "else_"))
