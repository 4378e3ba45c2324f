"""once._methods — what the client knows about each method of the
shipped services (Counter, Lease, Admin, Grants, KV, Outbox).

Owns: the table full method name -> (mutating, request class, response
class), read from the service descriptors of the generated modules; which
methods are mutating is the server's dispatch table (the ones that carry
an rpc id).
Invariant: every method of the shipped .proto files is in the table, and
only those.
Never: decides anything for a method it does not know (the caller must say
whether such a call is mutating and what it answers).
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Type

from google.protobuf.message import Message

from .proto import grants_pb2, kv_pb2, once_pb2, outbox_pb2

# The methods that carry an rpc id (DISPATCH_MUTATING in onced).
MUTATING = frozenset({
    "/once.v1.Counter/Increment",
    "/once.v1.Grants/SetPlacement",
    "/once.v1.Grants/RequestGrant",
    "/once.v1.Grants/Enqueue",
    "/once.v1.Grants/Claim",
    "/once.v1.Grants/RenewCredential",
    "/once.v1.Grants/FinishGrant",
    "/once.v1.Grants/CancelGrant",
    "/once.v1.Grants/DeleteMachine",
    "/once.v1.Grants/DeleteWork",
    "/once.v1.Grants/LegacyClaim",
    "/once.v1.Grants/LegacyRelease",
    "/once.v1.Grants/SetPermission",
    "/once.v1.KV/Txn",
    "/once.v1.Outbox/Subscribe",
    "/once.v1.Outbox/Ack",
    "/once.v1.Outbox/Unsubscribe",
})


class MethodInfo(NamedTuple):
    name: str  # "/once.v1.Grants/RequestGrant"
    mutating: bool
    request: Type[Message]
    response: Type[Message]


def _build() -> Dict[str, MethodInfo]:
    table: Dict[str, MethodInfo] = {}
    for mod in (once_pb2, grants_pb2, kv_pb2, outbox_pb2):
        fd = mod.DESCRIPTOR
        for svc in fd.services_by_name.values():
            for m in svc.methods:
                full = f"/{svc.full_name}/{m.name}"
                table[full] = MethodInfo(full, full in MUTATING,
                                         getattr(mod, m.input_type.name),
                                         getattr(mod, m.output_type.name))
    return table


METHODS: Dict[str, MethodInfo] = _build()
