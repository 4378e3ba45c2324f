"""once._kv — the KV service as Client methods (docs/kv.md): the user's own
keys, changed exactly once.

Owns: kv_txn and its shorthands kv_put / kv_delete, and the reads kv_get
and kv_range (which follows continuations).
Invariant: the Txn goes through Client.invoke with its full name, so it
carries an rpc id, raises OutcomeUnknown with it, and takes rpc_id= for an
explicit retry — answered from its completion record, the same branch and
values even when the keys changed since. A failed compare is a result
(``succeeded`` false), never an exception.
Never: retries under a new id, or reads a key by itself to decide what a
Txn does (compares are onced's).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional, Union

from . import kv
from .errors import RpcId, bad_argument
from .proto import kv_pb2

if TYPE_CHECKING:  # client.py imports this module
    from .client import Reply

_KV = "/once.v1.KV/"
RpcIdArg = Union[RpcId, tuple, str, None]
# What onced answers at most per Range page.
_PAGE = 1000


class KvMixin:
    """once.v1.KV (docs/python.md). Keys and values are str (UTF-8) or
    bytes; what comes back is bytes."""

    def kv_txn(self, compares: Iterable[kv_pb2.KvCompare] = (),
               then: Iterable[kv_pb2.KvOp] = (),
               else_: Iterable[kv_pb2.KvOp] = (), *,
               rpc_id: RpcIdArg = None) -> kv_pb2.KvTxnResponse:
        """Runs ``then`` if every compare holds, else ``else_``, exactly
        once; returns the KvTxnResponse (``succeeded``, ``results``,
        ``revision``, ``failed_compare``). rpc_id: None for a new call; a
        known id to retry that call with the same arguments."""
        return self.kv_txn_reply(compares, then, else_, rpc_id=rpc_id).value

    def kv_txn_reply(self, compares: Iterable[kv_pb2.KvCompare] = (),
                     then: Iterable[kv_pb2.KvOp] = (),
                     else_: Iterable[kv_pb2.KvOp] = (), *,
                     rpc_id: RpcIdArg = None
                     ) -> "Reply[kv_pb2.KvTxnResponse]":
        """kv_txn, with the rpc id, replayed flag and attempts."""
        method, req = kv.txn_request(compares, then, else_)
        return self.invoke(method, req, rpc_id=rpc_id)  # type: ignore

    def kv_put(self, key: kv.Bytes, value: kv.Bytes, *,
               if_version: Optional[int] = None, if_absent: bool = False,
               lease: bool = False,
               rpc_id: RpcIdArg = None) -> kv_pb2.KvTxnResponse:
        """Sets key to value exactly once. if_version=N: only if the key is
        at version N (0: absent); if_absent: only if it does not exist.
        When the compare fails nothing is written and the result's
        ``succeeded`` is false, with the key as it is in ``results[0].get``.
        """
        if if_absent and if_version is not None:
            raise bad_argument("if_version and if_absent exclude each other "
                               "(if_version=0 also means absent)")
        compares = [kv.absent(key)] if if_absent else \
            [kv.version(key) == if_version] if if_version is not None else []
        return self.kv_txn(compares, [kv.put(key, value, lease=lease)],
                           [kv.get(key)] if compares else [], rpc_id=rpc_id)

    def kv_delete(self, key: kv.Bytes, *, prefix: bool = False,
                  rpc_id: RpcIdArg = None) -> kv_pb2.KvTxnResponse:
        """Deletes key (prefix=True: every key starting with it) exactly
        once; ``results[0]`` says how many."""
        op = kv.delete_prefix(key) if prefix else kv.delete(key)
        return self.kv_txn([], [op], rpc_id=rpc_id)

    def kv_get(self, key: kv.Bytes) -> Optional[kv_pb2.KeyValue]:
        """The key (``value``, ``version``, ``create_revision``, ``lease``)
        or None when it does not exist."""
        req = kv_pb2.KvRangeRequest(key=kv.b(key), limit=1)
        page = self.invoke(_KV + "Range", req).value  # type: ignore
        return page.kvs[0] if page.kvs else None

    def kv_range(self, prefix: kv.Bytes = b"", *,
                 limit: Optional[int] = None,
                 keys_only: bool = False) -> List[kv_pb2.KeyValue]:
        """Every key starting with prefix (b"": every key the caller may
        read), in key order, at most limit (None: all), page after page;
        each page is read after the commit that holds it."""
        if limit is not None and (isinstance(limit, bool) or
                                  not isinstance(limit, int) or limit < 1):
            raise bad_argument(f"limit must be an int >= 1, not {limit!r}")
        out: List[kv_pb2.KeyValue] = []
        cont = b""
        while limit is None or len(out) < limit:
            want = _PAGE if limit is None else min(_PAGE, limit - len(out))
            req = kv_pb2.KvRangeRequest(key=kv.b(prefix, "prefix"),
                                        prefix=True, limit=want,
                                        continuation=cont, keys_only=keys_only)
            page = self.invoke(_KV + "Range", req).value  # type: ignore
            out.extend(page.kvs)
            if not page.more or not page.kvs:  # (an empty page ends it)
                break
            cont = page.continuation
        return out
