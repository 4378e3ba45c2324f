"""once._grants — the Grants service as Client methods (docs/grants.md: start
grants: at most one open grant per work surface).

Owns: one method per once.v1.Grants RPC, building its request from
keyword arguments and returning the response message, and the server's
public key cached per Client for credential checks.
Invariant: the mutating ones go through Client.invoke with the method's
full name, so they carry an rpc id, raise OutcomeUnknown with it, and take
rpc_id= for an explicit retry, as every other call.
Never: sends a request whose fields did not convert (a wrong type or an
out-of-range number is refused here).
"""
from __future__ import annotations

from ctypes import byref, create_string_buffer
from typing import Any, Iterator, Optional, Type, Union

from google.protobuf.message import Message

from . import _lib
from .credential import CredentialInfo, verify_credential
from .errors import RpcId, bad_argument, error_for
from .proto import grants_pb2 as g

_G = "/once.v1.Grants/"
RpcIdArg = Union[RpcId, tuple, str, None]


def _msg(cls: Type[Message], **fields: Any) -> Any:
    """cls(**fields), a refused value raised as InvalidArgument."""
    try:
        return cls(**fields)
    except TypeError:
        raise
    except ValueError as e:
        raise bad_argument(f"{cls.__name__}: {e}") from None


def _outcome(v: Union[str, int]) -> int:
    if isinstance(v, str):
        try:
            return g.GrantOutcome.Value(v.upper().replace("-", "_"))
        except ValueError:
            raise bad_argument(f"outcome {v!r} is not one of "
                               f"{', '.join(g.GrantOutcome.keys()[1:])}") \
                from None
    return v


def _each(page_of: Any, field: str) -> Iterator[Any]:
    """The items in field of page_of(token), page after page."""
    token = ""
    while True:
        page = page_of(token)
        yield from getattr(page, field)
        token = page.next_page_token
        if not token:
            return


class GrantsMixin:
    """Start grants (the methods are documented in docs/python.md and in
    proto/grants.proto). Mutating ones take ``rpc_id=`` to retry a known
    id; every one returns the response message."""

    _public_key: Optional[bytes]

    def _g(self, method: str, req: Message, rpc_id: RpcIdArg) -> Any:
        return self.call(_G + method, req, rpc_id=rpc_id)  # type: ignore

    def set_placement(self, surface: str, machine: str, location: str = "", *,
                      rpc_id: RpcIdArg = None) -> g.SetPlacementResponse:
        """Maps surface to (machine, location); bumps its generation."""
        return self._g("SetPlacement",
                       _msg(g.SetPlacementRequest, surface=surface,
                            machine=machine, location=location), rpc_id)

    def request_grant(self, request_id: str, surface: str, machine: str,
                      location: str, generation: int, *, payload: bytes = b"",
                      attempt: int = 1, credential_ttl_ms: int = 0,
                      rpc_id: RpcIdArg = None) -> g.RequestGrantResponse:
        """Asks for the start grant of surface for (request_id, attempt),
        written for the placement (machine, location, generation).

        The same (request_id, attempt, input) again returns the same grant
        (``existing`` true); other input under it raises GrantConflict; a
        surface with another open grant raises AlreadyOwned. To keep the
        input durably until accepted use ``InputStore.submit_grant``."""
        if not request_id:
            raise bad_argument("request_id is required")
        return self._g("RequestGrant",
                       _msg(g.RequestGrantRequest, request_id=request_id,
                            attempt=attempt, surface=surface, machine=machine,
                            location=location, generation=generation,
                            payload=payload,
                            credential_ttl_ms=credential_ttl_ms), rpc_id)

    def enqueue(self, request_id: str, surface: str, *, payload: bytes = b"",
                attempt: int = 1,
                rpc_id: RpcIdArg = None) -> g.EnqueueResponse:
        """Queues work for surface; its destination is the surface's
        placement at this moment (InputStore.submit_work keeps it)."""
        if not request_id:
            raise bad_argument("request_id is required")
        return self._g("Enqueue",
                       _msg(g.EnqueueRequest, request_id=request_id,
                            attempt=attempt, surface=surface,
                            payload=payload), rpc_id)

    def claim(self, machine: str, *, max: int = 0, credential_ttl_ms: int = 0,
              rpc_id: RpcIdArg = None) -> g.ClaimResponse:
        """Turns machine's own queued rows into grants (at most max; 0:
        16). Never takes another machine's row."""
        if not machine:
            raise bad_argument("machine is required")
        return self._g("Claim",
                       _msg(g.ClaimRequest, machine=machine, max=max,
                            credential_ttl_ms=credential_ttl_ms), rpc_id)

    def renew_credential(self, grant_id: int, machine: str, *,
                         credential_ttl_ms: int = 0,
                         rpc_id: RpcIdArg = None
                         ) -> g.RenewCredentialResponse:
        """A fresh credential under the same grant."""
        return self._g("RenewCredential",
                       _msg(g.RenewCredentialRequest, grant_id=grant_id,
                            machine=machine,
                            credential_ttl_ms=credential_ttl_ms), rpc_id)

    def finish(self, grant_id: int, outcome: Union[str, int] = "SUCCEEDED",
               *, rpc_id: RpcIdArg = None) -> g.FinishGrantResponse:
        """Closes a grant with an outcome: SUCCEEDED, FAILED_BEFORE_START,
        ABORTED or RELEASED (names or GrantOutcome numbers)."""
        return self._g("FinishGrant",
                       _msg(g.FinishGrantRequest, grant_id=grant_id,
                            outcome=_outcome(outcome)), rpc_id)

    def cancel(self, grant_id: int, *,
               rpc_id: RpcIdArg = None) -> g.CancelGrantResponse:
        """Cancels a grant."""
        return self._g("CancelGrant",
                       _msg(g.CancelGrantRequest, grant_id=grant_id), rpc_id)

    def delete_machine(self, machine: str, *,
                       rpc_id: RpcIdArg = None) -> g.DeleteMachineResponse:
        """Deletes machine's pending rows (open grants are kept)."""
        return self._g("DeleteMachine",
                       _msg(g.DeleteMachineRequest, machine=machine), rpc_id)

    def delete_work(self, work_id: int, *,
                    rpc_id: RpcIdArg = None) -> g.DeleteWorkResponse:
        """Deletes a queued row."""
        return self._g("DeleteWork",
                       _msg(g.DeleteWorkRequest, work_id=work_id), rpc_id)

    def legacy_claim(self, surface: str, holder: str, *,
                     rpc_id: RpcIdArg = None) -> g.LegacyClaimResponse:
        """The old acquisition path (takes the same surface lock)."""
        return self._g("LegacyClaim",
                       _msg(g.LegacyClaimRequest, surface=surface,
                            holder=holder), rpc_id)

    def legacy_release(self, surface: str, holder: str, *,
                       rpc_id: RpcIdArg = None) -> g.LegacyReleaseResponse:
        """Releases a legacy hold."""
        return self._g("LegacyRelease",
                       _msg(g.LegacyReleaseRequest, surface=surface,
                            holder=holder), rpc_id)

    def set_permission(self, principal: str, allowed: bool, *,
                       rpc_id: RpcIdArg = None) -> g.SetPermissionResponse:
        """Allows or denies principal grants and credentials."""
        return self._g("SetPermission",
                       _msg(g.SetPermissionRequest, principal=principal,
                            allowed=allowed), rpc_id)

    def get_surface(self, surface: str) -> g.GetSurfaceResponse:
        """Placement, open grant, history and recorded rejections."""
        return self._g("GetSurface", _msg(g.GetSurfaceRequest,
                                          surface=surface), None)

    def list_queue(self, machine: str) -> g.ListQueueResponse:
        """machine's pending and expired rows."""
        return self._g("ListQueue", _msg(g.ListQueueRequest, machine=machine),
                       None)

    def list_surfaces(self, page_size: int = 0,
                      page_token: str = "") -> g.ListSurfacesResponse:
        """One page of the surfaces with an open grant, a pending row or
        recorded rejections, in name order; next_page_token (empty on
        the last page) asks for the next one."""
        return self._g("ListSurfaces",
                       _msg(g.ListSurfacesRequest, page_size=page_size,
                            page_token=page_token), None)

    def each_surface(self, page_size: int = 0) -> Iterator[Any]:
        """Every SurfaceSummary list_surfaces gives, page after page."""
        return _each(lambda t: self.list_surfaces(page_size, t), "surfaces")

    def list_machines(self, page_size: int = 0,
                      page_token: str = "") -> g.ListMachinesResponse:
        """One page of the machines with pending rows, kept expired rows
        or deleted, in name order; next_page_token (empty on the last
        page) asks for the next one."""
        return self._g("ListMachines",
                       _msg(g.ListMachinesRequest, page_size=page_size,
                            page_token=page_token), None)

    def each_machine(self, page_size: int = 0) -> Iterator[Any]:
        """Every MachineSummary list_machines gives, page after page."""
        return _each(lambda t: self.list_machines(page_size, t), "machines")

    def public_key(self) -> bytes:
        """The server's Ed25519 public key (32 bytes) that signs
        credentials; fetched once per Client."""
        if self._public_key is None:
            buf = create_string_buffer(32)
            st = _lib.once_status()
            h = self._enter()  # type: ignore[attr-defined]
            try:
                rv = _lib.lib.once_grants_public_key(h, buf, byref(st))
            finally:
                self._leave()  # type: ignore[attr-defined]
            if rv != 0:
                raise error_for(st.code, _lib.text(st.reason),
                                _lib.text(st.message))
            self._public_key = buf.raw
        return self._public_key

    def verify_credential(self, credential: Any, *,
                          now_unix_ms: Optional[int] = None,
                          min_epoch: int = 0) -> CredentialInfo:
        """verify_credential() with this server's public key."""
        return verify_credential(self.public_key(), credential,
                                 now_unix_ms=now_unix_ms, min_epoch=min_epoch)
