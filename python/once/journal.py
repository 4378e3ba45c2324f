"""once.journal — Journal and Chain, libonce's chains that survive the
client (once/journal.h, docs/chains.md).

Owns: one once_journal handle (a directory holding a LevelDB) and the
once_chain handles opened on it; carrying arguments and answers.
Invariant: every rule — a request and its rpc id written before it is
sent, re-sent only under that id, the reply consumed together with the
new context and the next request in one write, an ended lease never
replaced by a new id — is libonce's; this module adds none.
Never: closes the journal while a chain of it is open; uses a chain from
two threads at once (a lock per chain serializes its calls).
"""
from __future__ import annotations

import ctypes
import enum
import threading
from ctypes import byref, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Type, Union

from google.protobuf.message import Message

from . import _lib
from . import reasons as R
from ._methods import METHODS
from .client import Client, bad_argument, c_bytes, c_str, decode, \
    status_error
from .errors import ClientClosed, RpcId
from .proto import once_pb2

INCREMENT = "/once.v1.Counter/Increment"


class ChainState(enum.IntEnum):
    """Where a chain stands (enum once_chain_state)."""

    IDLE = 1  #: nothing in flight: the context is all
    PENDING = 2  #: a request is recorded with its rpc id; maybe sent
    REPLIED = 3  #: its reply is recorded, not consumed
    LEASE_ENDED = 4  #: the pending step's lease ended: never re-sent


@dataclass(frozen=True)
class ChainInfo:
    """A chain as kept in the journal (once_chain_info), with its context
    and its payload: the reply when REPLIED, the pending request when
    PENDING or LEASE_ENDED, b"" when IDLE."""

    chain_id: str
    principal: str
    state: ChainState
    steps: int  #: replies consumed so far
    method: str  #: the step in flight ("" when IDLE)
    rpc_id: Optional[RpcId]
    lease_ttl_ms: int
    sends: int
    code: int  #: REPLIED: the answer's code; LEASE_ENDED: why
    reason: str
    message: str
    context: bytes
    payload: bytes
    created_unix_ms: int
    updated_unix_ms: int

    def reply(self, response_type: Optional[Type[Message]] = None) -> Any:
        """The recorded reply decoded as the method's response type (or
        response_type); None unless REPLIED with OK."""
        if self.state != ChainState.REPLIED or self.code != 0:
            return None
        info = METHODS.get(self.method)
        rtype = response_type or (info.response if info else None)
        return decode(rtype, self.payload)


def _take(p: c_void_p, n: c_size_t) -> bytes:
    try:
        return ctypes.string_at(p, n.value) if n.value else b""
    finally:
        _lib.lib.once_free(p)


def _info(i: _lib.once_chain_info, context: bytes,
          payload: bytes) -> ChainInfo:
    return ChainInfo(
        _lib.text(i.chain_id), _lib.text(i.principal),
        ChainState(i.state) if i.state in (1, 2, 3, 4) else i.state,
        i.steps, _lib.text(i.method),
        RpcId(i.id.client_id, i.id.seq) if i.id.seq else None,
        i.lease_ttl_ms, i.sends, i.code, _lib.text(i.reason),
        _lib.text(i.message), context, payload, i.created_unix_ms,
        i.updated_unix_ms)


def _request(method: str, request: Union[Message, bytes]) -> Tuple[bytes,
                                                                    bytes]:
    m = c_str("method", method)
    if not method.startswith("/") or method.count("/") != 2:
        raise bad_argument(f"method {method!r} is not a full name like "
                           f"{INCREMENT}")
    info = METHODS.get(method)
    if info is not None and not info.mutating:
        raise bad_argument(f"{method} is not mutating: a chain step is a "
                           "mutating call")
    if isinstance(request, Message):
        return m, request.SerializeToString()
    return m, c_bytes("request", request)


def counter_request(name: str, by: int) -> Tuple[str, Message]:
    """(method, request) of a counter increment, for commit(next=...)."""
    return INCREMENT, once_pb2.IncrementRequest(name=name, by=by)


class Journal:
    """A directory holding the chains of this machine (created mode 0700
    if missing; one process at a time)::

        with once.Journal("/var/lib/sched/journal") as journal:
            chain = journal.chain(client, "nightly")
            ...
    """

    def __init__(self, directory: str) -> None:
        d = c_str("directory", directory)
        h = c_void_p()
        st = _lib.once_status()
        self._lock = threading.Lock()
        self._chains: List["Chain"] = []
        self._h: Optional[int] = None
        if _lib.lib.once_journal_open(d, byref(h), byref(st)) != 0:
            raise status_error(st, None)
        self._h = h.value
        self.directory = directory

    def _handle(self) -> int:
        if self._h is None:
            raise ClientClosed(R.CLIENT_CLOSED, "the journal is closed")
        return self._h

    def chain(self, client: Client, chain_id: str) -> "Chain":
        """Opens chain_id (creating it IDLE, or resuming it: a pending step
        under another client id has its lease renewed first, and is marked
        LEASE_ENDED when that lease has ended)."""
        if not isinstance(client, Client):
            raise TypeError("client must be a once.Client")
        cid = c_str("chain_id", chain_id)
        with self._lock:
            j = self._handle()
            ch = c_void_p()
            st = _lib.once_status()
            c = client._enter()
            try:
                rv = _lib.lib.once_chain_open(j, c, cid, byref(ch), byref(st))
            finally:
                client._leave()
            if rv != 0:
                raise status_error(st, None)
            chain = Chain(self, client, ch.value, chain_id)
            self._chains.append(chain)
            return chain

    def list(self) -> List[ChainInfo]:
        """Every chain of the journal (no context or payload)."""
        rows = ctypes.POINTER(_lib.once_chain_info)()
        n = c_size_t()
        st = _lib.once_status()
        with self._lock:
            if _lib.lib.once_journal_list(self._handle(), byref(rows),
                                          byref(n), byref(st)) != 0:
                raise status_error(st, None)
        try:
            return [_info(rows[i], b"", b"") for i in range(n.value)]
        finally:
            _lib.lib.once_free(rows)

    def show(self, chain_id: str) -> ChainInfo:
        """One chain, read without opening it."""
        cid = c_str("chain_id", chain_id)
        i = _lib.once_chain_info()
        ctx, cl, pay, pl = c_void_p(), c_size_t(), c_void_p(), c_size_t()
        st = _lib.once_status()
        with self._lock:
            rv = _lib.lib.once_journal_show(self._handle(), cid, byref(i),
                                            byref(ctx), byref(cl), byref(pay),
                                            byref(pl), byref(st))
        if rv != 0:
            raise status_error(st, None)
        return _info(i, _take(ctx, cl), _take(pay, pl))

    def _closed(self, chain: "Chain") -> None:
        with self._lock:
            if chain in self._chains:
                self._chains.remove(chain)

    def close(self) -> None:
        """Closes every chain still open, then the journal."""
        for ch in list(self._chains):
            ch.close()
        with self._lock:
            h, self._h = self._h, None
        if h is not None:
            _lib.lib.once_journal_close(h)

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Chain:
    """One chain of a Journal, driven through a Client (journal.chain())::

        s = chain.state
        if s.state == once.ChainState.PENDING:
            chain.send()                      # same rpc id: replayed
        elif s.state == once.ChainState.IDLE and not s.context:
            chain.step(*once.counter_request("jobs", 1))
        reply = chain.state.reply()           # REPLIED: handed back
        chain.commit(b"next context", next=once.counter_request("jobs", 1))
    """

    def __init__(self, journal: Journal, client: Client, h: int,
                 chain_id: str) -> None:
        self._journal = journal
        self._client = client
        self._h: Optional[int] = h
        self._lock = threading.Lock()
        self.chain_id = chain_id

    def _handle(self) -> int:
        if self._h is None:
            raise ClientClosed(R.CLIENT_CLOSED, "the chain is closed")
        return self._h

    def _answer(self, rv: int, st: _lib.once_status, rid: _lib.once_rpc_id,
                out: c_void_p, n: c_size_t, method: str,
                response_type: Optional[Type[Message]]) -> Any:
        data = _take(out, n)
        if rv != 0:
            raise status_error(st, RpcId(rid.client_id, rid.seq)
                               if rid.seq else None)
        info = METHODS.get(method)
        return decode(response_type or (info.response if info else None),
                      data)

    def step(self, method: str, request: Union[Message, bytes],
             response_type: Optional[Type[Message]] = None) -> Any:
        """Records (method, request) with a fresh rpc id, sends it, records
        the reply and returns it decoded. Only on an IDLE chain. An
        OutcomeUnknown or Unavailable leaves the step PENDING: send()."""
        m, req = _request(method, request)
        rid, out, n = _lib.once_rpc_id(), c_void_p(), c_size_t()
        st = _lib.once_status()
        with self._lock:
            c = self._client._enter()
            try:
                rv = _lib.lib.once_chain_step(self._handle(), m, req, len(req),
                                              byref(rid), byref(out), byref(n),
                                              byref(st))
            finally:
                self._client._leave()
        return self._answer(rv, st, rid, out, n, method, response_type)

    def send(self, response_type: Optional[Type[Message]] = None) -> Any:
        """Sends the PENDING step under its recorded rpc id (the server
        replays it if it ran) and returns the reply; a REPLIED chain hands
        its recorded reply back without sending."""
        rid, out, n = _lib.once_rpc_id(), c_void_p(), c_size_t()
        st = _lib.once_status()
        with self._lock:
            method = self.state.method
            c = self._client._enter()
            try:
                rv = _lib.lib.once_chain_send(self._handle(), byref(rid),
                                              byref(out), byref(n), byref(st))
            finally:
                self._client._leave()
        return self._answer(rv, st, rid, out, n, method, response_type)

    def counter_incr(self, name: str, by: int = 1) -> int:
        """A step incrementing counter name; the value after it."""
        return self.step(*counter_request(name, by)).value

    def commit(self, context: bytes,
               next: Optional[Tuple[str, Union[Message, bytes]]] = None
               ) -> Optional[RpcId]:
        """Consumes the reply, keeps context and, with next=(method,
        request), records the next request under a fresh rpc id — one
        synced write. Returns that id (None without next); send() sends
        it."""
        ctx = c_bytes("context", context)
        m, req = _request(*next) if next is not None else (None, b"")
        rid = _lib.once_rpc_id()
        st = _lib.once_status()
        with self._lock:
            c = self._client._enter()
            try:
                rv = _lib.lib.once_chain_commit(self._handle(), ctx, len(ctx),
                                                m, req, len(req), byref(rid),
                                                byref(st))
            finally:
                self._client._leave()
        if rv != 0:
            raise status_error(st, None)
        return RpcId(rid.client_id, rid.seq) if rid.seq else None

    @property
    def state(self) -> ChainInfo:
        """Where the chain stands, its context and its payload."""
        i = _lib.once_chain_info()
        ctx, cl, pay, pl = c_void_p(), c_size_t(), c_void_p(), c_size_t()
        st = _lib.once_status()
        if _lib.lib.once_chain_state(self._handle(), byref(i), byref(ctx),
                                     byref(cl), byref(pay), byref(pl),
                                     byref(st)) != 0:
            raise status_error(st, None)
        return _info(i, _take(ctx, cl), _take(pay, pl))

    def close(self) -> None:
        """Closes the handle; the chain stays in the journal."""
        with self._lock:
            h, self._h = self._h, None
        if h is not None:
            _lib.lib.once_chain_close(h)
            self._journal._closed(self)

    def forget(self) -> None:
        """Removes the chain from the journal and closes the handle."""
        with self._lock:
            h, self._h = self._h, None
        if h is None:
            raise ClientClosed(R.CLIENT_CLOSED, "the chain is closed")
        st = _lib.once_status()
        rv = _lib.lib.once_chain_forget(h, byref(st))
        self._journal._closed(self)
        if rv != 0:
            raise status_error(st, None)

    def __enter__(self) -> "Chain":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
