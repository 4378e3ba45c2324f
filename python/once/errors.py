"""once.errors — every failed call is an exception carrying its status.

Owns: the exception classes (one per gRPC status code, and a few finer
ones by reason), the RpcId value type, and turning a C once_status into
the right exception. The reasons themselves are once.reasons, generated
from the one table of reasons (proto/reasons.tsv).
Invariant: an exception's code, reason and message are exactly those
libonce reported; rpc_id is set whenever the call carried one (mutating
calls), so an OutcomeUnknown can always be retried with that id.
Never: retries anything itself, or invents a status libonce did not give
(the only Python-side reasons are BAD_ARGUMENT, for arguments refused
before libonce is called, and CLIENT_CLOSED).
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Type

from . import reasons as R


class Code(enum.IntEnum):
    """The gRPC canonical status codes (the numbers of once.v1.Code)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class RpcId(NamedTuple):
    """An rpc id: the lease's client id and a sequence number under it.

    ``str(RpcId(7, 3))`` is ``"7:3"``, the form oncectl's ``--rpc-id``
    takes; ``RpcId.parse("7:3")`` reads it back.
    """

    client_id: int
    seq: int

    def __str__(self) -> str:
        return f"{self.client_id}:{self.seq}"

    @classmethod
    def parse(cls, text: str) -> "RpcId":
        """Reads "CLIENT:SEQ" (both decimal, both non-zero)."""
        try:
            a, b = text.split(":")
            rid = cls(int(a, 10), int(b, 10))
        except ValueError:
            raise InvalidArgument(
                R.BAD_RPC_ID, f"{text!r} is not CLIENT:SEQ") from None
        if rid.client_id <= 0 or rid.seq <= 0:
            raise InvalidArgument(R.BAD_RPC_ID,
                                  f"{text!r}: client and seq must be > 0")
        return rid


class OnceError(Exception):
    """A call that did not end OK.

    Attributes:
        code: the status code (a :class:`Code`).
        reason: the machine-readable reason ("RPC_ID_CONFLICT", ...), or "".
        message: the explanation for people.
        rpc_id: the call's :class:`RpcId` when it carried one, else None.
        attempts: how many times the request was sent (0: never sent).
    """

    code: Code = Code.UNKNOWN

    def __init__(self, reason: str = "", message: str = "", *,
                 rpc_id: Optional[RpcId] = None, attempts: int = 0,
                 code: Optional[int] = None) -> None:
        if code is not None:
            self.code = Code(code) if code in Code._value2member_map_ \
                else code  # type: ignore[assignment]
        self.reason = reason
        self.message = message
        self.rpc_id = rpc_id
        self.attempts = attempts
        # How to send the same request again (set by the client on calls
        # that carried an rpc id; Client.retry uses it).
        self._resend: Optional[Tuple[Callable[..., Any], Any]] = None
        super().__init__(self.__str__())

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, Code) else str(self.code)
        s = f"{name}"
        if self.reason:
            s += f"/{self.reason}"
        if self.message:
            s += f": {self.message}"
        if self.rpc_id is not None:
            s += f" (rpc id {self.rpc_id})"
        return s

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={int(self.code)}, "
                f"reason={self.reason!r}, message={self.message!r}, "
                f"rpc_id={self.rpc_id!r}, attempts={self.attempts})")


class Cancelled(OnceError):
    code = Code.CANCELLED


class Unknown(OnceError):
    code = Code.UNKNOWN


class OutcomeUnknown(Unknown):
    """UNKNOWN/OUTCOME_UNKNOWN: the request was sent and no final reply
    came. It may or may not have run. Retry it with exactly ``rpc_id``
    (``client.retry(err)``, or ``rpc_id=err.rpc_id`` on the same method
    with the same arguments): the server runs it at most once and a retry
    gets the stored result."""


class InvalidArgument(OnceError, ValueError):
    """INVALID_ARGUMENT. Also raised before anything is sent when an
    argument is refused on this side (reason BAD_ARGUMENT)."""

    code = Code.INVALID_ARGUMENT


class DeadlineExceeded(OnceError):
    code = Code.DEADLINE_EXCEEDED


class NotFound(OnceError):
    code = Code.NOT_FOUND


class AlreadyExists(OnceError):
    code = Code.ALREADY_EXISTS


class Conflict(AlreadyExists):
    """ALREADY_EXISTS/RPC_ID_CONFLICT: this rpc id was used for a call
    with other arguments (another method or other request bytes)."""


class GrantConflict(AlreadyExists):
    """ALREADY_EXISTS/GRANT_CONFLICT: the same (request_id, attempt) was
    asked for with another input (another digest)."""


class OutboxNoConsumer(NotFound):
    """NOT_FOUND/OUTBOX_NO_CONSUMER: Outbox Read or Ack of a consumer not
    subscribed to the topic (subscribe it first; Consumer.run does)."""


class PermissionDenied(OnceError):
    code = Code.PERMISSION_DENIED


class ResourceExhausted(OnceError):
    code = Code.RESOURCE_EXHAUSTED


class WindowFull(ResourceExhausted):
    """RESOURCE_EXHAUSTED/WINDOW_FULL: too many unacknowledged calls;
    nothing was executed."""


class OutboxFull(ResourceExhausted):
    """RESOURCE_EXHAUSTED/OUTBOX_FULL: a producing call would take a topic
    past --outbox-max-bytes; nothing was written or recorded, so the same
    rpc id runs once consumers have acknowledged and the collector passed."""


class OutboxBadOffset(InvalidArgument):
    """INVALID_ARGUMENT/OUTBOX_BAD_OFFSET: an Outbox Ack of an offset above
    the topic's head (no such event yet)."""


class FailedPrecondition(OnceError):
    code = Code.FAILED_PRECONDITION


class LeaseExpired(FailedPrecondition):
    """FAILED_PRECONDITION/LEASE_EXPIRED: the lease of the call's client id
    has ended. On a client whose own lease is lost every later mutating
    call raises this without sending anything: open a new Client."""


class StaleRpc(FailedPrecondition):
    """FAILED_PRECONDITION/STALE_RPC: the id is below the acknowledgement
    watermark; its result is no longer kept."""


class AlreadyOwned(FailedPrecondition):
    """FAILED_PRECONDITION/ALREADY_OWNED: the surface has an open grant."""


class CredentialExpired(FailedPrecondition):
    """FAILED_PRECONDITION/CREDENTIAL_EXPIRED from verify_credential;
    ``credential`` still says which grant it was for."""

    credential: Any = None


class StaleEpoch(FailedPrecondition):
    """FAILED_PRECONDITION/STALE_EPOCH from verify_credential: a newer
    grant of the surface has been seen."""

    credential: Any = None


class ClientClosed(FailedPrecondition):
    """FAILED_PRECONDITION/CLIENT_CLOSED: the Client (or InputStore) was
    closed; nothing was sent."""


class Aborted(OnceError):
    code = Code.ABORTED


class OutOfRange(OnceError):
    code = Code.OUT_OF_RANGE


class Unimplemented(OnceError):
    code = Code.UNIMPLEMENTED


class Internal(OnceError):
    code = Code.INTERNAL


class Unavailable(OnceError):
    """UNAVAILABLE: the server could not be reached. With reason NOT_SENT
    the request never left this process."""

    code = Code.UNAVAILABLE


class DataLoss(OnceError):
    code = Code.DATA_LOSS


class Unauthenticated(OnceError):
    code = Code.UNAUTHENTICATED


class BadCredential(Unauthenticated):
    """UNAUTHENTICATED/BAD_CREDENTIAL from verify_credential: the signature
    or the body does not check."""


_BY_CODE: Dict[int, Type[OnceError]] = {
    c.code: c for c in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded,
                        NotFound, AlreadyExists, PermissionDenied,
                        ResourceExhausted, FailedPrecondition, Aborted,
                        OutOfRange, Unimplemented, Internal, Unavailable,
                        DataLoss, Unauthenticated)
}

_BY_REASON: Dict[Tuple[int, str], Type[OnceError]] = {
    (Code.UNKNOWN, R.OUTCOME_UNKNOWN): OutcomeUnknown,
    (Code.ALREADY_EXISTS, R.RPC_ID_CONFLICT): Conflict,
    (Code.ALREADY_EXISTS, R.GRANT_CONFLICT): GrantConflict,
    (Code.RESOURCE_EXHAUSTED, R.WINDOW_FULL): WindowFull,
    (Code.RESOURCE_EXHAUSTED, R.OUTBOX_FULL): OutboxFull,
    (Code.NOT_FOUND, R.OUTBOX_NO_CONSUMER): OutboxNoConsumer,
    (Code.INVALID_ARGUMENT, R.OUTBOX_BAD_OFFSET): OutboxBadOffset,
    (Code.FAILED_PRECONDITION, R.LEASE_EXPIRED): LeaseExpired,
    (Code.FAILED_PRECONDITION, R.STALE_RPC): StaleRpc,
    (Code.FAILED_PRECONDITION, R.ALREADY_OWNED): AlreadyOwned,
    (Code.FAILED_PRECONDITION, R.CREDENTIAL_EXPIRED): CredentialExpired,
    (Code.FAILED_PRECONDITION, R.STALE_EPOCH): StaleEpoch,
    (Code.FAILED_PRECONDITION, R.CLIENT_CLOSED): ClientClosed,
    (Code.UNAUTHENTICATED, R.BAD_CREDENTIAL): BadCredential,
}


def error_for(code: int, reason: str, message: str, *,
              rpc_id: Optional[RpcId] = None,
              attempts: int = 0) -> OnceError:
    """The exception for a status: the class of (code, reason) if there is
    one, else the class of the code, else OnceError."""
    cls = _BY_REASON.get((code, reason)) or _BY_CODE.get(code, OnceError)
    return cls(reason, message, rpc_id=rpc_id, attempts=attempts,
               code=None if cls is not OnceError else code)


def bad_argument(message: str) -> InvalidArgument:
    """An argument refused before anything was sent."""
    return InvalidArgument(R.BAD_ARGUMENT, message)
