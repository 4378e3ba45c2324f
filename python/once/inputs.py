"""once.inputs — InputStore, libonce's kept-input store (once/inputs.h).

Owns: one once_inputs handle (a directory of kept start requests and
queued work items) and the calls that go through it: submit_grant,
submit_work, resend, resume, list, forget.
Invariant: an input is written durably to the store before it is sent,
and is re-sent only under the rpc id recorded with it (or a new id when
the caller asks, resend(new_id=True)); that is libonce's, this module only
carries arguments and answers.
Never: closes the store while a call on it is in flight, or lets a Python
exception escape into C from the resume callback.
"""
from __future__ import annotations

import ctypes
import enum
import threading
from ctypes import byref, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from . import _lib
from . import reasons as R
from .client import Client, c_bytes, c_str, c_uint, decode, status_error
from .errors import ClientClosed, OnceError, RpcId
from .proto import grants_pb2 as g


class InputState(enum.IntEnum):
    """The state of a kept input."""

    PENDING = 1  #: kept; maybe sent, not known accepted
    REJECTED = 2  #: refused by the server: not started, kept
    LEASE_ENDED = 3  #: its rpc id's lease ended first: kept, not re-sent


class InputKind(enum.IntEnum):
    START = 1  #: a RequestGrant (submit_grant)
    ENQUEUE = 2  #: an Enqueue (submit_work)


@dataclass(frozen=True)
class KeptInput:
    """One kept input, as listed (once_input_info)."""

    request_id: str
    attempt: int
    kind: InputKind
    surface: str
    machine: str
    location: str
    generation: int
    payload_len: int
    rpc_id: RpcId  #: the id it was (or will be) sent with
    principal: str
    state: InputState
    kept_unix_ms: int
    updated_unix_ms: int
    sends: int
    code: int  #: the last answer's code (0 before any)
    reason: str
    message: str
    file: str  #: its chain id in the store ("input/<hash>-<attempt>")


@dataclass(frozen=True)
class Resumed:
    """One input re-sent by resume(): response on acceptance (a
    RequestGrantResponse, or an EnqueueResponse for kind ENQUEUE), error
    otherwise."""

    input: KeptInput
    response: Optional[Any]
    error: Optional[OnceError]


@dataclass(frozen=True)
class ResumeReport:
    """What resume() did: every re-sent input, and how they were filed."""

    resumed: List[Resumed]
    accepted: int
    pending: int
    ended: int
    rejected: int


def _info(i: _lib.once_input_info) -> KeptInput:
    return KeptInput(
        _lib.text(i.request_id), i.attempt,
        InputKind(i.kind) if i.kind in (1, 2) else i.kind,
        _lib.text(i.surface), _lib.text(i.machine), _lib.text(i.location),
        i.generation, i.payload_len, RpcId(i.id.client_id, i.id.seq),
        _lib.text(i.principal),
        InputState(i.state) if i.state in (1, 2, 3) else i.state,
        i.kept_unix_ms, i.updated_unix_ms, i.sends, i.code,
        _lib.text(i.reason), _lib.text(i.message), _lib.text(i.file))


def _response_type(kind: int) -> Any:
    return g.EnqueueResponse if kind == InputKind.ENQUEUE else \
        g.RequestGrantResponse


class InputStore:
    """A directory keeping start requests and queued work on this machine
    until onced has durably accepted them (created mode 0700 if missing).

    ::

        with once.InputStore("/var/lib/sched/inputs") as store:
            store.resume(client)      # after a crash: same rpc ids
            r = store.submit_grant(client, "job-7", "db-1", "m1", "/d", gen)

    An input whose answer never came stays PENDING in the directory; a new
    process resumes it with resume(), which re-sends it under the rpc id
    recorded with it, so the server runs it at most once. Thread-safe.
    """

    def __init__(self, directory: str) -> None:
        self._h: Optional[int] = None
        self._cv = threading.Condition(threading.Lock())
        self._busy = 0
        d = c_str("directory", directory)
        h = c_void_p()
        st = _lib.once_status()
        if _lib.lib.once_inputs_open(byref(h), d, byref(st)) != 0:
            raise status_error(st, None)
        self._h = h.value
        self.directory = directory

    def close(self) -> None:
        """Closes the store (the files stay), after the calls in flight."""
        with self._cv:
            h, self._h = self._h, None
            while self._busy:
                self._cv.wait()
        if h is not None:
            _lib.lib.once_inputs_close(h)

    def __enter__(self) -> "InputStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _lib.lib.once_inputs_close(h)

    def _enter(self) -> int:
        with self._cv:
            if self._h is None:
                raise ClientClosed(R.CLIENT_CLOSED, "the store is closed")
            self._busy += 1
            return self._h

    def _leave(self) -> None:
        with self._cv:
            self._busy -= 1
            if self._busy == 0:
                self._cv.notify_all()

    def _with_client(self, client: Client,
                     fn: Callable[[int, int], Tuple[int, Any]]) -> Any:
        if not isinstance(client, Client):
            raise TypeError("client must be a once.Client")
        s = self._enter()
        try:
            c = client._enter()
            try:
                return fn(c, s)
            finally:
                client._leave()
        finally:
            self._leave()

    def _sent(self, rv: int, st: _lib.once_status, cid: _lib.once_rpc_id,
              out: c_void_p, n: c_size_t, rtype: Any) -> Any:
        rid = RpcId(cid.client_id, cid.seq) if cid.seq else None
        if rv != 0:
            raise status_error(st, rid)
        try:
            data = ctypes.string_at(out, n.value) if n.value else b""
        finally:
            _lib.lib.once_free(out)
        return decode(rtype, data)

    def submit_grant(self, client: Client, request_id: str, surface: str,
                     machine: str, location: str, generation: int, *,
                     payload: bytes = b"", attempt: int = 1,
                     credential_ttl_ms: int = 0) -> g.RequestGrantResponse:
        """Keeps a RequestGrant durably under a fresh rpc id of client
        (which must hold a lease), then sends it. Returns the response when
        accepted (the kept file is then removed). Raises as the call does;
        on OutcomeUnknown/Unavailable the input stays PENDING for
        resume()/resend(); on a refusal it stays REJECTED (never re-sent)."""
        gi = _lib.once_grant_input()
        gi.request_id = c_str("request_id", request_id)
        gi.attempt = c_uint("attempt", attempt, 32)
        gi.surface = c_str("surface", surface)
        gi.machine = c_str("machine", machine, required=False)
        gi.location = c_str("location", location, required=False)
        gi.generation = c_uint("generation", generation, 64)
        body = c_bytes("payload", payload)
        buf = ctypes.create_string_buffer(body, len(body))
        gi.payload = ctypes.cast(buf, c_void_p) if body else None
        gi.payload_len = len(body)
        gi.credential_ttl_ms = c_uint("credential_ttl_ms", credential_ttl_ms,
                                      64)

        def go(c: int, s: int) -> Any:
            cid, out, n = _lib.once_rpc_id(), c_void_p(), c_size_t()
            st = _lib.once_status()
            rv = _lib.lib.once_grant_submit(c, s, byref(gi), byref(cid),
                                            byref(out), byref(n), byref(st))
            return self._sent(rv, st, cid, out, n, g.RequestGrantResponse)

        return self._with_client(client, go)

    def submit_work(self, client: Client, request_id: str, surface: str, *,
                    payload: bytes = b"",
                    attempt: int = 1) -> g.EnqueueResponse:
        """submit_grant for the queue path: keeps an Enqueue, then sends
        it; the file goes once the row is accepted."""
        wi = _lib.once_work_input()
        wi.request_id = c_str("request_id", request_id)
        wi.attempt = c_uint("attempt", attempt, 32)
        wi.surface = c_str("surface", surface)
        body = c_bytes("payload", payload)
        buf = ctypes.create_string_buffer(body, len(body))
        wi.payload = ctypes.cast(buf, c_void_p) if body else None
        wi.payload_len = len(body)

        def go(c: int, s: int) -> Any:
            cid, out, n = _lib.once_rpc_id(), c_void_p(), c_size_t()
            st = _lib.once_status()
            rv = _lib.lib.once_work_submit(c, s, byref(wi), byref(cid),
                                           byref(out), byref(n), byref(st))
            return self._sent(rv, st, cid, out, n, g.EnqueueResponse)

        return self._with_client(client, go)

    def resend(self, client: Client, request_id: str, attempt: int = 1, *,
               new_id: bool = False) -> Any:
        """Re-sends one kept input: new_id False, a PENDING one under its
        recorded rpc id; new_id True (the caller's explicit choice, any
        state), under a fresh id of client. Returns the response."""
        rid = c_str("request_id", request_id)
        att = c_uint("attempt", attempt, 32)
        if not isinstance(new_id, bool):
            raise TypeError("new_id must be bool")
        kind = InputKind.START
        for k in self.list():
            if k.request_id == request_id and k.attempt == attempt:
                kind = k.kind
                break

        def go(c: int, s: int) -> Any:
            cid, out, n = _lib.once_rpc_id(), c_void_p(), c_size_t()
            st = _lib.once_status()
            rv = _lib.lib.once_grant_input_resend(c, s, rid, att, new_id,
                                                  byref(cid), byref(out),
                                                  byref(n), byref(st))
            return self._sent(rv, st, cid, out, n, _response_type(kind))

        return self._with_client(client, go)

    def resume(self, client: Client) -> ResumeReport:
        """Re-sends every PENDING input of client's principal under its
        recorded rpc id (oldest first) and says how each was filed."""
        got: List[Resumed] = []

        def on_one(in_p: Any, rv: int, st_p: Any, resp: Any, n: int,
                   _arg: Any) -> None:
            try:
                info = _info(in_p.contents)
                if rv == 0:
                    data = ctypes.string_at(resp, n) if n else b""
                    got.append(Resumed(info, decode(_response_type(
                        info.kind), data), None))
                else:
                    got.append(Resumed(info, None,
                                       status_error(st_p.contents,
                                                    info.rpc_id)))
            except Exception as e:  # never into C
                got.append(Resumed(_info(in_p.contents), None,
                                   OnceError(R.BAD_RESPONSE, str(e),
                                             code=13)))

        cb = _lib.INPUT_RESUMED_FN(on_one)
        counts = [c_size_t() for _ in range(4)]

        def go(c: int, s: int) -> Any:
            st = _lib.once_status()
            rv = _lib.lib.once_grant_inputs_resume(
                c, s, cb, None, *(byref(x) for x in counts), byref(st))
            if rv != 0:
                raise status_error(st, None)
            return ResumeReport(got, *(int(x.value) for x in counts))

        return self._with_client(client, go)

    def list(self) -> List[KeptInput]:
        """Every kept input, oldest first."""
        out = ctypes.POINTER(_lib.once_input_info)()
        n = c_size_t()
        st = _lib.once_status()
        s = self._enter()
        try:
            rv = _lib.lib.once_grant_inputs_list(s, byref(out), byref(n),
                                                 byref(st))
        finally:
            self._leave()
        if rv != 0:
            raise status_error(st, None)
        try:
            return [_info(out[i]) for i in range(n.value)]
        finally:
            _lib.lib.once_free(out)

    def forget(self, request_id: str, attempt: int = 1) -> None:
        """Removes a kept input (the caller gives up on it); NotFound when
        it is not kept."""
        rid = c_str("request_id", request_id)
        att = c_uint("attempt", attempt, 32)
        st = _lib.once_status()
        s = self._enter()
        try:
            rv = _lib.lib.once_grant_input_forget(s, rid, att, byref(st))
        finally:
            self._leave()
        if rv != 0:
            raise status_error(st, None)
