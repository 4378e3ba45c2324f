"""once — exactly-once remote calls, from Python.

A thin layer over libonce (the C client library of onced): rpc ids,
acknowledgements, leases, retries with the same id and OUTCOME_UNKNOWN are
libonce's; this package gives them a Python face.

::

    import once

    with once.Client("ipc:///tmp/once.ipc", key_file="data/dev.key") as c:
        n = c.counter_incr("jobs", by=1)      # runs exactly once
        try:
            c.counter_incr("jobs", by=1)
        except once.OutcomeUnknown as e:      # sent, no answer: maybe ran
            n = c.retry(e)                    # same rpc id: stored result

What is here:
  Client        a handle (thread-safe, a context manager): counter_incr,
                call/invoke (any method), the Grants methods (request_grant,
                enqueue, claim, renew_credential, finish, get_surface, ...),
                the KV methods (kv_txn, kv_put, kv_get, kv_range,
                kv_delete), retry of a known rpc id, lease state and
                lease-lost callback
  kv            the parts of a KV transaction: kv.version(k) == 7,
                kv.absent(k), kv.put(k, v), kv.get(k), ...
  InputStore    keeps start requests / queued work on disk until accepted;
                resume() after a crash re-sends them under the same ids
  Consumer      a durable named consumer of an outbox topic: subscribe,
                read batches of events (offset, id, method, time,
                payload), ack, low_water, run(fn) / run_batches(fn)
                loops, resume(offset) for a receiver that stores its
                offset with its effect (docs/outbox.md)
  Journal       chains that survive the client (journal.chain(client,
                id)): step, send, commit(context, next=...), state;
                after a crash the pending step is re-sent under its
                recorded id and an unconsumed reply handed back
  verify_credential  checks a grant's credential offline
  OnceError     the base of every error; one subclass per status code and
                some per reason (OutcomeUnknown, Conflict, LeaseExpired,
                PermissionDenied, AlreadyOwned, GrantConflict, ...), each
                carrying code, reason, message and rpc_id
  reasons       every status reason as a constant (once.reasons.STALE_RPC)
                and TABLE: codes, meaning, what to do next; generated
                from the one table of reasons
  messages      the generated protobuf messages (once.v1), also as
                once.once_pb2, once.grants_pb2, once.kv_pb2 and
                once.outbox_pb2

docs/python.md in the repository has the whole story.
"""
from __future__ import annotations

from .client import DEFAULT_URL, Client, LeaseState, Reply
from .consumer import SYSTEM_TOPIC, Batch, Consumer, Event, EventId
from .credential import CredentialInfo, verify_credential
from .errors import (Aborted, AlreadyExists, AlreadyOwned, BadCredential,
                     Cancelled, ClientClosed, Code, Conflict,
                     CredentialExpired, DataLoss, DeadlineExceeded,
                     FailedPrecondition, GrantConflict, Internal,
                     InvalidArgument, LeaseExpired, NotFound, OnceError,
                     OutboxBadOffset, OutboxFull, OutboxNoConsumer,
                     OutcomeUnknown, OutOfRange, PermissionDenied,
                     ResourceExhausted, RpcId, StaleEpoch, StaleRpc,
                     Unauthenticated, Unavailable, Unimplemented, Unknown,
                     WindowFull)
from .inputs import (InputKind, InputState, InputStore, KeptInput,
                     ResumeReport, Resumed)
from .journal import Chain, ChainInfo, ChainState, Journal, counter_request
from . import kv, messages, reasons
from .proto import grants_pb2, kv_pb2, once_pb2, outbox_pb2

__version__ = "0.1.0"

__all__ = [
    "Client", "LeaseState", "Reply", "DEFAULT_URL", "RpcId", "Code",
    "InputStore", "InputState", "InputKind", "KeptInput", "Resumed",
    "ResumeReport", "Journal", "Chain", "ChainState", "ChainInfo",
    "counter_request", "Consumer", "Event", "EventId", "Batch",
    "SYSTEM_TOPIC", "CredentialInfo", "verify_credential", "messages",
    "reasons", "kv", "once_pb2", "grants_pb2", "kv_pb2", "outbox_pb2",
    "OnceError",
    "Cancelled", "Unknown",
    "OutcomeUnknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "Conflict", "GrantConflict", "PermissionDenied",
    "ResourceExhausted", "WindowFull", "FailedPrecondition", "LeaseExpired",
    "StaleRpc", "AlreadyOwned", "CredentialExpired", "StaleEpoch",
    "ClientClosed", "Aborted", "OutOfRange", "Unimplemented", "Internal",
    "Unavailable", "DataLoss", "Unauthenticated", "BadCredential",
    "OutboxFull", "OutboxNoConsumer", "OutboxBadOffset",
]
