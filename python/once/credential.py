"""once.credential — checking a grant's credential offline.

Owns: verify_credential (libonce's once_grant_credential_verify) and
CredentialInfo, what a checked credential says.
Invariant: a credential is trusted only when libonce says the signature by
the given public key holds over the body bytes exactly as received.
Never: calls onced (the public key is the only input from the server).
"""
from __future__ import annotations

import time
from ctypes import byref
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from . import _lib
from . import reasons as R
from .errors import bad_argument, error_for

PUBLIC_KEY_BYTES = 32


@dataclass(frozen=True)
class CredentialInfo:
    """What a verified credential says (a once.v1.CredentialBody)."""

    grant_id: int
    surface: str
    machine: str
    location: str
    generation: int
    epoch: int  #: fencing epoch: refuse anything below the highest seen
    issued_unix_ms: int
    expires_unix_ms: int


def _parts(credential: Any) -> Tuple[bytes, bytes]:
    if isinstance(credential, tuple) and len(credential) == 2:
        body, sig = credential
    elif hasattr(credential, "body") and hasattr(credential, "signature"):
        body, sig = credential.body, credential.signature
    else:
        raise TypeError("credential must be a once.v1.Credential message or "
                        "a (body, signature) pair")
    if not isinstance(body, bytes) or not isinstance(sig, bytes):
        raise TypeError("credential body and signature must be bytes")
    return body, sig


def verify_credential(public_key: bytes,
                      credential: Union[Any, Tuple[bytes, bytes]], *,
                      now_unix_ms: Optional[int] = None,
                      min_epoch: int = 0) -> CredentialInfo:
    """Checks a credential offline and returns what it says.

    Args:
        public_key: the server's 32-byte Ed25519 key
            (``Client.public_key()`` or ``oncectl key show``).
        credential: a once.v1.Credential (from RequestGrant, Claim or
            RenewCredential), or its (body, signature) bytes.
        now_unix_ms: the time to check expiry at (None: now).
        min_epoch: the highest epoch of the surface seen so far.

    Raises:
        once.BadCredential: the signature or body does not check.
        once.CredentialExpired: expired (its ``credential`` attribute
            still says which grant it was for: renew under that grant).
        once.StaleEpoch: epoch below min_epoch (a newer grant exists).
    """
    if not isinstance(public_key, bytes) or \
            len(public_key) != PUBLIC_KEY_BYTES:
        raise bad_argument("public_key must be 32 bytes")
    body, sig = _parts(credential)
    if now_unix_ms is None:
        now_unix_ms = int(time.time() * 1000)
    for name, v in (("now_unix_ms", now_unix_ms), ("min_epoch", min_epoch)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be int")
        if not 0 <= v < 1 << 64:
            raise bad_argument(f"{name} out of range")
    out = _lib.once_grant_credential()
    st = _lib.once_status()
    rv = _lib.lib.once_grant_credential_verify(public_key, body, len(body),
                                               sig, len(sig), now_unix_ms,
                                               min_epoch, byref(out),
                                               byref(st))
    info = None
    if rv == 0 or _lib.text(st.reason) in (R.CREDENTIAL_EXPIRED,
                                              R.STALE_EPOCH):
        info = CredentialInfo(out.grant_id, _lib.text(out.surface),
                              _lib.text(out.machine), _lib.text(out.location),
                              out.generation, out.epoch, out.issued_unix_ms,
                              out.expires_unix_ms)
    if rv != 0:
        err = error_for(st.code, _lib.text(st.reason), _lib.text(st.message))
        err.credential = info  # type: ignore[attr-defined]
        raise err
    assert info is not None
    return info
