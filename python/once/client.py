"""once.client — Client, the Python face of a libonce handle.

Owns: one once_client handle (opened in __init__, closed by close(), the
end of a ``with`` block, or the garbage collector), the calls made on it,
the lease-lost callback registered with libonce, and the count of calls in
flight on it.
Invariant: the handle is closed only when no call is in flight on it (C's
rule); every mutating call carries an rpc id assigned by libonce, or
exactly the one the caller gave (an explicit retry); arguments are checked
here before libonce is called, so a refused argument sends nothing and
uses no seq.
Never: retries a call under a new rpc id, opens a new lease by itself,
holds its lock across a call into libonce, or lets a Python exception
escape into C (the callback's are logged).
"""
from __future__ import annotations

import ctypes
import enum
import logging
import threading
import weakref
from ctypes import byref, c_int64, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass
from typing import (Any, Callable, Generic, Optional, Type, TypeVar, Union,
                    overload)

from google.protobuf.message import DecodeError, Message

from . import _lib
from . import reasons as R
from ._grants import GrantsMixin
from ._kv import KvMixin
from ._methods import METHODS
from .errors import (ClientClosed, LeaseExpired, OnceError, RpcId,
                     bad_argument, error_for)
from .proto import once_pb2

__all__ = ["Client", "LeaseState", "Reply", "DEFAULT_URL"]

log = logging.getLogger("once")

DEFAULT_URL = "ipc:///tmp/once.ipc"

M = TypeVar("M", bound=Message)
T = TypeVar("T")

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class LeaseState(enum.IntEnum):
    """The handle's view of its own lease (once_client_lease_state)."""

    NONE = 0  #: opened with lease=False
    LIVE = 1  #: the last renewal (or the open) worked
    FAILING = 2  #: the last renewal failed; renewal goes on
    LOST = 3  #: ended for good: mutating calls raise LeaseExpired


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A call that ended OK, with what libonce said about it.

    Attributes:
        value: the result (a message, or an int for counter calls).
        rpc_id: the rpc id the call carried (None on reads).
        replayed: the server answered from the stored completion record.
        attempts: how many times the request was sent.
    """

    value: T
    rpc_id: Optional[RpcId]
    replayed: bool
    attempts: int


# ---- argument checks (before anything is sent) ---------------------------


def c_str(name: str, v: Any, *, required: bool = True) -> Optional[bytes]:
    """v as NUL-free UTF-8 bytes for a C string argument."""
    if v is None:
        if required:
            raise bad_argument(f"{name} is required")
        return None
    if not isinstance(v, str):
        raise TypeError(f"{name} must be str, not {type(v).__name__}")
    if "\0" in v:
        raise bad_argument(f"{name} contains a NUL character")
    if required and v == "":
        raise bad_argument(f"{name} must not be empty")
    return v.encode("utf-8")


def c_uint(name: str, v: Any, bits: int) -> int:
    """v as an unsigned integer of that many bits."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be int, not {type(v).__name__}")
    if v < 0 or v >= (1 << bits):
        raise bad_argument(f"{name} {v} is outside 0..2^{bits}-1")
    return v


def c_bytes(name: str, v: Any) -> bytes:
    if isinstance(v, (bytearray, memoryview)):
        v = bytes(v)
    if not isinstance(v, bytes):
        raise TypeError(f"{name} must be bytes, not {type(v).__name__}")
    return v


def rpc_id_arg(v: Any) -> Optional[RpcId]:
    """An explicit rpc id (RpcId, a (client_id, seq) pair or "C:S")."""
    if v is None:
        return None
    if isinstance(v, str):
        return RpcId.parse(v)
    if isinstance(v, tuple) and len(v) == 2:
        cid = c_uint("rpc_id.client_id", v[0], 64)
        seq = c_uint("rpc_id.seq", v[1], 64)
        if cid == 0 or seq == 0:
            raise bad_argument("an explicit rpc_id needs client_id and seq "
                               "above 0")
        return RpcId(cid, seq)
    raise TypeError("rpc_id must be an RpcId, a (client_id, seq) pair or "
                    f"'CLIENT:SEQ', not {type(v).__name__}")


def status_error(st: _lib.once_status, rid: Optional[RpcId]) -> OnceError:
    return error_for(st.code, _lib.text(st.reason), _lib.text(st.message),
                     rpc_id=rid, attempts=st.attempts)


# ---- the handle's lifetime -----------------------------------------------


def _close_handle(h: int, keep: Any) -> None:
    """Closes a handle (the finalizer's and close()'s last step). keep holds
    the ctypes callback alive until the handle is gone."""
    _lib.lib.once_client_close(h)


class Client(GrantsMixin, KvMixin):
    """A connection to onced, with a lease, shared by any number of threads.

    ::

        with once.Client("ipc:///tmp/once.ipc", key_file="data/dev.key") as c:
            c.counter_incr("jobs", by=1)

    Every mutating call carries an rpc id (the lease's client id and the
    next seq); libonce retries it with the same id within the deadline and
    acknowledges completed calls under the hood. A call sent and never
    answered raises :class:`once.OutcomeUnknown` carrying its id; retry
    exactly that id with :meth:`retry` (here or on another Client) to get
    the stored result.

    Args:
        url: onced's address ("ipc:///tmp/once.ipc", "tcp://host:7400",
            "tls+tcp://host:port").
        key_file: a key file ("NAME KEYHEX", written by ``oncectl principal
            add --key-out`` or ``onced --dev``): every request is signed as
            NAME.
        key: or the 32-byte key itself of ``principal``.
        principal: the principal to act as (None: the key file's, or
            "anonymous").
        lease: open a lease (needed for mutating calls with fresh ids);
            False for reads, admin calls and retries of known ids.
        lease_ttl_ms: TTL asked of OpenLease (0: the server's default).
        deadline_ms, attempt_timeout_ms, max_attempts, backoff_initial_ms,
        backoff_max_ms: the retry policy of every call (0: libonce's
            defaults, 10 s, 2 s, 10, 5 ms, 500 ms).
        tls_ca_file, tls_server_name: for tls+tcp:// URLs.
        on_lease_lost: called once, as ``fn(client, error)``, when the lease
            is lost (see :meth:`on_lease_lost`).

    Raises:
        once.OnceError: the open failed (Unavailable when onced cannot be
            reached, InvalidArgument/BAD_KEY for an unreadable key file).
    """

    def __init__(self, url: str = DEFAULT_URL, *,
                 key_file: Optional[str] = None,
                 key: Optional[bytes] = None,
                 principal: Optional[str] = None,
                 lease: bool = True,
                 lease_ttl_ms: int = 0,
                 deadline_ms: int = 0,
                 attempt_timeout_ms: int = 0,
                 max_attempts: int = 0,
                 backoff_initial_ms: int = 0,
                 backoff_max_ms: int = 0,
                 tls_ca_file: Optional[str] = None,
                 tls_server_name: Optional[str] = None,
                 on_lease_lost: Optional[
                     Callable[["Client", LeaseExpired], None]] = None) -> None:
        self._h: Optional[int] = None
        self._cv = threading.Condition(threading.Lock())
        self._busy = 0  # calls in flight (under _cv)
        self._tls = threading.local()
        self._lost = threading.Event()
        self._lost_error: Optional[LeaseExpired] = None
        self._lost_fn = on_lease_lost
        self._public_key: Optional[bytes] = None

        o = _lib.once_options()
        o.url = c_str("url", url)
        o.principal = c_str("principal", principal, required=False)
        o.deadline_ms = c_uint("deadline_ms", deadline_ms, 32)
        o.attempt_timeout_ms = c_uint("attempt_timeout_ms", attempt_timeout_ms,
                                      32)
        o.max_attempts = c_uint("max_attempts", max_attempts, 32)
        o.backoff_initial_ms = c_uint("backoff_initial_ms", backoff_initial_ms,
                                      32)
        o.backoff_max_ms = c_uint("backoff_max_ms", backoff_max_ms, 32)
        o.lease_ttl_ms = c_uint("lease_ttl_ms", lease_ttl_ms, 64)
        if not isinstance(lease, bool):
            raise TypeError("lease must be bool")
        o.no_lease = not lease
        sec = _lib.once_security()
        sec.key_file = c_str("key_file", key_file, required=False)
        keybuf = None
        if key is not None:
            key = c_bytes("key", key)
            if len(key) != 32:
                raise bad_argument(f"key must be 32 bytes, not {len(key)}")
            if principal is None:
                raise bad_argument("key needs principal")
            keybuf = (ctypes.c_uint8 * 32).from_buffer_copy(key)
            sec.key = ctypes.cast(keybuf, ctypes.POINTER(ctypes.c_uint8))
        sec.tls_ca_file = c_str("tls_ca_file", tls_ca_file, required=False)
        sec.tls_server_name = c_str("tls_server_name", tls_server_name,
                                    required=False)
        if on_lease_lost is not None and not callable(on_lease_lost):
            raise TypeError("on_lease_lost must be callable")

        h = c_void_p()
        st = _lib.once_status()
        rv = _lib.lib.once_client_open_secure(byref(h), byref(o), byref(sec),
                                              byref(st))
        if rv != 0:
            raise status_error(st, None)
        self._h = h.value
        self.url = url
        # The trampoline holds only a weak reference to self, so the
        # finalizer (which keeps the trampoline alive) does not keep self.
        ref = weakref.ref(self)

        def trampoline(_c: Any, client_id: int, why: Any, _arg: Any) -> None:
            obj = ref()
            if obj is not None:
                obj._lease_lost(client_id, why.contents)

        self._trampoline = _lib.LEASE_LOST_FN(trampoline)
        self._finalizer = weakref.finalize(self, _close_handle, self._h,
                                           self._trampoline)
        _lib.lib.once_client_on_lease_lost(self._h, self._trampoline, None)

    # ---- lifetime ----------------------------------------------------------

    def close(self) -> None:
        """Closes the handle, waiting for the calls in flight on it.

        With a live lease and every seq complete, libonce ends the lease
        (CloseLease) so onced may reclaim its records at once; with a seq
        still unknown the lease is left to end after its TTL, so the id
        can still be retried from elsewhere. Closing twice is harmless.
        Must not be called from the lease-lost callback.
        """
        if getattr(self._tls, "in_callback", False):
            raise RuntimeError("once.Client.close() from its own lease-lost "
                               "callback")
        with self._cv:
            if self._h is None:
                return
            self._h = None
            while self._busy:
                self._cv.wait()
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once close() has begun."""
        return self._h is None

    def _enter(self) -> int:
        with self._cv:
            if self._h is None:
                raise ClientClosed(R.CLIENT_CLOSED, "the client is closed")
            self._busy += 1
            return self._h

    def _leave(self) -> None:
        with self._cv:
            self._busy -= 1
            if self._busy == 0 and self._h is None:
                self._cv.notify_all()

    # ---- the lease ---------------------------------------------------------

    @property
    def client_id(self) -> int:
        """The client id of the handle's lease (0 without a lease)."""
        h = self._enter()
        try:
            return int(_lib.lib.once_client_id(h))
        finally:
            self._leave()

    @property
    def first_incomplete(self) -> int:
        """The lowest seq whose reply has not been delivered (what the next
        call sends as its acknowledgement)."""
        h = self._enter()
        try:
            return int(_lib.lib.once_client_first_incomplete(h))
        finally:
            self._leave()

    @property
    def lease_state(self) -> LeaseState:
        """NONE, LIVE, FAILING or LOST (see :class:`LeaseState`)."""
        h = self._enter()
        try:
            return LeaseState(_lib.lib.once_client_lease_state(h))
        finally:
            self._leave()

    @property
    def lease_lost_error(self) -> Optional[LeaseExpired]:
        """How the lease was lost (None while it is not)."""
        return self._lost_error

    def wait_lease_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lease is lost or timeout seconds pass; True when
        it is lost."""
        return self._lost.wait(timeout)

    def on_lease_lost(
            self, fn: Optional[Callable[["Client", LeaseExpired],
                                        None]]) -> None:
        """Sets (or clears, with None) the function called once when the
        lease is lost: ``fn(client, error)``, error a LeaseExpired saying
        how it was learned. It runs on the thread that noticed (libonce's
        renewal thread or a calling thread), after the calls in flight were
        told; it must return promptly and must not close the client. If the
        lease is already lost and no callback has run, fn runs now."""
        if fn is not None and not callable(fn):
            raise TypeError("fn must be callable or None")
        self._lost_fn = fn
        if fn is not None and self._lost_error is not None and \
                not getattr(self, "_lost_fn_ran", False):
            self._run_lost_fn()

    def _lease_lost(self, client_id: int, why: _lib.once_status) -> None:
        err = status_error(why, None)
        if not isinstance(err, LeaseExpired):  # libonce always says so
            err = LeaseExpired(_lib.text(why.reason), _lib.text(why.message))
        err.client_id = client_id  # type: ignore[attr-defined]
        self._lost_error = err
        self._lost.set()
        self._run_lost_fn()

    def _run_lost_fn(self) -> None:
        fn = self._lost_fn
        if fn is None or getattr(self, "_lost_fn_ran", False):
            return
        self._lost_fn_ran = True
        self._tls.in_callback = True
        try:
            fn(self, self._lost_error)  # type: ignore[arg-type]
        except Exception:  # never into C
            log.exception("once: the lease-lost callback raised")
        finally:
            self._tls.in_callback = False

    def release(self, seq: int) -> None:
        """Says the caller will never retry this seq (an OutcomeUnknown
        holds the acknowledgement back until it is retried to completion
        or released)."""
        seq = c_uint("seq", seq, 64)
        h = self._enter()
        try:
            _lib.lib.once_client_release(h, seq)
        finally:
            self._leave()

    def renew_lease(self, client_id: int = 0) -> int:
        """RenewLease now (libonce also renews in the background); returns
        the time left in ms. client_id 0: this handle's own."""
        cid = c_uint("client_id", client_id, 64)
        ttl, left = c_uint64(), c_uint64()
        st = _lib.once_status()
        h = self._enter()
        try:
            rv = _lib.lib.once_lease_renew(h, cid, byref(ttl), byref(left),
                                           byref(st))
        finally:
            self._leave()
        if rv != 0:
            raise status_error(st, None)
        return int(left.value)

    def close_lease(self, client_id: int = 0) -> int:
        """CloseLease: ends a lease now (client_id 0: this handle's own,
        which is then lost). Returns how many completion records the
        collector will reclaim."""
        cid = c_uint("client_id", client_id, 64)
        kept = c_uint64()
        st = _lib.once_status()
        h = self._enter()
        try:
            rv = _lib.lib.once_lease_close(h, cid, byref(kept), byref(st))
        finally:
            self._leave()
        if rv != 0:
            raise status_error(st, None)
        return int(kept.value)

    def lease_info(self, client_id: int = 0) -> once_pb2.LeaseInfoResponse:
        """LeaseInfo of a lease (client_id 0: this handle's own)."""
        cid = c_uint("client_id", client_id, 64) or self.client_id
        return self.call("/once.v1.Lease/LeaseInfo",
                         once_pb2.LeaseInfoRequest(client_id=cid))

    def stats(self) -> once_pb2.StatsResponse:
        """/once.v1.Admin/Stats (operators only when onced authenticates)."""
        return self.call("/once.v1.Admin/Stats", once_pb2.StatsRequest())

    # ---- Counter -----------------------------------------------------------

    def counter_incr(self, name: str, by: int = 1, *,
                     rpc_id: Union[RpcId, tuple, str, None] = None) -> int:
        """Adds by to counter name, exactly once; returns the counter right
        after this increment (the stored value on a replay).

        rpc_id: None for a new call; an earlier call's id to retry it (it
        must be sent with the same name and by, or it is a Conflict).
        """
        return self.counter_incr_reply(name, by, rpc_id=rpc_id).value

    def counter_incr_reply(self, name: str, by: int = 1, *,
                           rpc_id: Union[RpcId, tuple, str, None] = None
                           ) -> Reply[int]:
        """counter_incr, with the rpc id, replayed flag and attempts."""
        name_b = c_str("name", name)
        if isinstance(by, bool) or not isinstance(by, int):
            raise TypeError(f"by must be int, not {type(by).__name__}")
        if not _I64_MIN <= by <= _I64_MAX:
            raise bad_argument(f"by {by} does not fit in 64 bits")
        rid = rpc_id_arg(rpc_id)
        return self._counter_incr(name_b, by, rid)

    def _counter_incr(self, name_b: bytes, by: int,
                      rid: Optional[RpcId]) -> Reply[int]:
        cid = _lib.once_rpc_id(*(rid or (0, 0)))
        value = c_int64()
        st = _lib.once_status()
        h = self._enter()
        try:
            rv = _lib.lib.once_counter_incr(h, name_b, by, byref(cid),
                                            byref(value), byref(st))
        finally:
            self._leave()
        got = RpcId(cid.client_id, cid.seq) if cid.seq else None
        if rv != 0:
            err = status_error(st, got)
            err._resend = (Client._counter_incr, (name_b, by))
            raise err
        return Reply(int(value.value), got, bool(st.replayed),
                     int(st.attempts))

    def counter_get(self, name: str) -> int:
        """The counter's value (0 if never incremented)."""
        name_b = c_str("name", name)
        value = c_int64()
        st = _lib.once_status()
        h = self._enter()
        try:
            rv = _lib.lib.once_counter_get(h, name_b, byref(value), byref(st))
        finally:
            self._leave()
        if rv != 0:
            raise status_error(st, None)
        return int(value.value)

    # ---- the generic call --------------------------------------------------

    @overload
    def call(self, method: str, request: Union[Message, bytes],
             response_type: Type[M], *, mutating: Optional[bool] = None,
             rpc_id: Union[RpcId, tuple, str, None] = None) -> M:
        ...

    @overload
    def call(self, method: str, request: Union[Message, bytes],
             response_type: None = None, *, mutating: Optional[bool] = None,
             rpc_id: Union[RpcId, tuple, str, None] = None) -> Any:
        ...

    def call(self, method: str, request: Union[Message, bytes],
             response_type: Optional[Type[Message]] = None, *,
             mutating: Optional[bool] = None,
             rpc_id: Union[RpcId, tuple, str, None] = None) -> Any:
        """Calls any method by its full name and returns the decoded reply.

        For the shipped services ("/once.v1.Grants/GetSurface", ...) the
        request type is checked, and response_type and mutating default to
        what the service says. For another service give both: mutating
        (True: the call carries an rpc id) and response_type (None: the
        reply's bytes are returned as they came).

        rpc_id: None for a new call; a known id to retry exactly that call
        (a mutating method only; the request must be the same).
        """
        return self.invoke(method, request, response_type, mutating=mutating,
                           rpc_id=rpc_id).value

    def invoke(self, method: str, request: Union[Message, bytes],
               response_type: Optional[Type[Message]] = None, *,
               mutating: Optional[bool] = None,
               rpc_id: Union[RpcId, tuple, str, None] = None) -> Reply[Any]:
        """call(), returning a :class:`Reply` (value, rpc id, replayed,
        attempts)."""
        method_b = c_str("method", method)
        if not method.startswith("/") or method.count("/") != 2:
            raise bad_argument(f"method {method!r} is not a full name like "
                               "/once.v1.Counter/Increment")
        info = METHODS.get(method)
        if info is not None:
            if mutating is None:
                mutating = info.mutating
            elif mutating != info.mutating:
                raise bad_argument(
                    f"{method} is {'' if info.mutating else 'not '}mutating")
            if response_type is None:
                response_type = info.response
            elif response_type is not info.response:
                raise bad_argument(f"{method} answers "
                                   f"{info.response.DESCRIPTOR.full_name}")
            if isinstance(request, Message) and \
                    request.DESCRIPTOR is not info.request.DESCRIPTOR:
                raise bad_argument(
                    f"{method} takes {info.request.DESCRIPTOR.full_name}, "
                    f"not {request.DESCRIPTOR.full_name}")
        elif mutating is None:
            raise bad_argument(f"{method} is not a shipped method: say "
                               "mutating=True or False")
        if not isinstance(mutating, bool):
            raise TypeError("mutating must be bool")
        if response_type is not None and not (
                isinstance(response_type, type) and
                issubclass(response_type, Message)):
            raise TypeError("response_type must be a protobuf message class")
        if isinstance(request, Message):
            payload = request.SerializeToString()
        else:
            payload = c_bytes("request", request)
        rid = rpc_id_arg(rpc_id)
        if rid is not None and not mutating:
            raise bad_argument(f"{method} is not mutating: it has no rpc id "
                               "to retry")
        return self._invoke(method_b, mutating, payload, response_type, rid)

    def _invoke(self, method_b: bytes, mutating: bool, payload: bytes,
                response_type: Optional[Type[Message]],
                rid: Optional[RpcId]) -> Reply[Any]:
        cid = _lib.once_rpc_id(*(rid or (0, 0)))
        out = c_void_p()
        n = c_size_t()
        st = _lib.once_status()
        h = self._enter()
        try:
            rv = _lib.lib.once_call(h, method_b, mutating,
                                    byref(cid) if mutating else None, payload,
                                    len(payload), byref(out), byref(n),
                                    byref(st))
        finally:
            self._leave()
        got = RpcId(cid.client_id, cid.seq) if mutating and cid.seq else None
        if rv != 0:
            err = status_error(st, got)
            if got is not None:
                err._resend = (Client._invoke,
                               (method_b, mutating, payload, response_type))
            raise err
        try:
            data = ctypes.string_at(out, n.value) if n.value else b""
        finally:
            _lib.lib.once_free(out)
        return Reply(decode(response_type, data), got, bool(st.replayed),
                     int(st.attempts))

    # ---- explicit retry ----------------------------------------------------

    def retry(self, error: OnceError) -> Any:
        """Sends the call that raised error again with the same rpc id and
        the same request bytes, and returns what that call would have
        returned (the stored result if it had run). Meant for
        OutcomeUnknown; works on any Client of the same server (a lease is
        not needed to retry a known id: ``Client(url, lease=False)``)."""
        return self.retry_reply(error).value

    def retry_reply(self, error: OnceError) -> Reply[Any]:
        """retry(), returning a :class:`Reply`."""
        if not isinstance(error, OnceError):
            raise TypeError("error must be a once.OnceError")
        if error.rpc_id is None or error._resend is None:
            raise bad_argument("this error carries no call to resend (it had "
                               "no rpc id)")
        fn, args = error._resend
        return fn(self, *args, error.rpc_id)


def decode(response_type: Optional[Type[Message]], data: bytes) -> Any:
    """The reply bytes as a response_type message (bytes when None)."""
    if response_type is None:
        return data
    msg = response_type()
    try:
        msg.ParseFromString(data)
    except DecodeError as e:
        raise error_for(13, R.BAD_RESPONSE,
                        f"the reply is not a {response_type.__name__}: "
                        f"{e}") from None
    return msg
