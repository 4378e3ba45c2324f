"""once._lib — loading libonce with ctypes and declaring its C API.

Owns: finding and loading libonce.so (once/client.h, once/grants.h,
once/inputs.h, once/outbox.h), the ctypes mirrors of the structs callers
allocate, and the argument/return types of every function bound.
Invariant: the structs mirror the C layouts field for field (the C headers
promise they keep size and layout; tests/python/test_py_layout.py compiles
the headers and compares every class's size and offsets); every function is
declared before use,
so ctypes never guesses an int where C has a pointer or a 64-bit value.
Never: calls into libonce itself (that is client.py's and inputs.py's job),
or loads a library that lacks a function bound here.

The library is looked for, in order, at:
  1. $ONCE_LIBRARY (a path to libonce.so*), when set;
  2. the path CMake wrote into once/_paths.py: the build tree's libonce in
     the build tree's copy of the package, the installed one in the
     installed copy;
  3. the dynamic loader's own search (ldconfig cache, LD_LIBRARY_PATH):
     libonce.so.0.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p,
                    c_int, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)
from typing import List

SONAME = "libonce.so.0"


class once_rpc_id(Structure):
    _fields_ = [("client_id", c_uint64), ("seq", c_uint64)]


class once_status(Structure):
    _fields_ = [
        ("code", c_int),
        ("reason", c_char * 64),
        ("message", c_char * 256),
        ("replayed", c_bool),
        ("attempts", c_uint32),
    ]


class once_options(Structure):
    _fields_ = [
        ("url", c_char_p),
        ("principal", c_char_p),
        ("deadline_ms", c_uint32),
        ("attempt_timeout_ms", c_uint32),
        ("max_attempts", c_uint32),
        ("backoff_initial_ms", c_uint32),
        ("backoff_max_ms", c_uint32),
        ("lease_ttl_ms", c_uint64),
        ("no_lease", c_bool),
    ]


class once_security(Structure):
    _fields_ = [
        ("key_file", c_char_p),
        ("key", POINTER(c_uint8)),
        ("tls_ca_file", c_char_p),
        ("tls_server_name", c_char_p),
    ]


class once_grant_credential(Structure):
    _fields_ = [
        ("grant_id", c_uint64),
        ("surface", c_char * 257),
        ("machine", c_char * 257),
        ("location", c_char * 1025),
        ("generation", c_uint64),
        ("epoch", c_uint64),
        ("issued_unix_ms", c_uint64),
        ("expires_unix_ms", c_uint64),
    ]


class once_grant_input(Structure):
    _fields_ = [
        ("request_id", c_char_p),
        ("attempt", c_uint32),
        ("surface", c_char_p),
        ("machine", c_char_p),
        ("location", c_char_p),
        ("generation", c_uint64),
        ("payload", c_void_p),
        ("payload_len", c_size_t),
        ("credential_ttl_ms", c_uint64),
    ]


class once_work_input(Structure):
    _fields_ = [
        ("request_id", c_char_p),
        ("attempt", c_uint32),
        ("surface", c_char_p),
        ("payload", c_void_p),
        ("payload_len", c_size_t),
    ]


class once_input_info(Structure):
    _fields_ = [
        ("request_id", c_char * 257),
        ("attempt", c_uint32),
        ("surface", c_char * 257),
        ("machine", c_char * 257),
        ("location", c_char * 1025),
        ("generation", c_uint64),
        ("payload_len", c_size_t),
        ("id", once_rpc_id),
        ("principal", c_char * 160),
        ("state", c_int),
        ("kept_unix_ms", c_uint64),
        ("updated_unix_ms", c_uint64),
        ("sends", c_uint32),
        ("code", c_int),
        ("reason", c_char * 64),
        ("message", c_char * 256),
        ("file", c_char * 80),
        ("kind", c_int),
    ]


class once_chain_info(Structure):
    _fields_ = [
        ("chain_id", c_char * 257),
        ("principal", c_char * 160),
        ("state", c_int),
        ("steps", c_uint64),
        ("method", c_char * 128),
        ("id", once_rpc_id),
        ("lease_ttl_ms", c_uint64),
        ("sends", c_uint32),
        ("code", c_int),
        ("reason", c_char * 64),
        ("message", c_char * 256),
        ("context_len", c_size_t),
        ("request_len", c_size_t),
        ("reply_len", c_size_t),
        ("created_unix_ms", c_uint64),
        ("updated_unix_ms", c_uint64),
    ]


class once_outbox_event(Structure):
    _fields_ = [
        ("offset", c_uint64),
        ("client_id", c_uint64),
        ("seq", c_uint64),
        ("index", c_uint32),
        ("method", c_char_p),
        ("time_unix_ms", c_uint64),
        ("payload", c_void_p),
        ("payload_len", c_size_t),
    ]


# void (*)(once_client *c, uint64_t client_id, const once_status *why, void *arg)
LEASE_LOST_FN = CFUNCTYPE(None, c_void_p, c_uint64, POINTER(once_status),
                          c_void_p)
# void (*)(const once_input_info *in, int rv, const once_status *st,
#          const void *resp, size_t resp_len, void *arg)
INPUT_RESUMED_FN = CFUNCTYPE(None, POINTER(once_input_info), c_int,
                             POINTER(once_status), c_void_p, c_size_t,
                             c_void_p)

_ST = POINTER(once_status)
_ID = POINTER(once_rpc_id)
_VPP = POINTER(c_void_p)
_SZP = POINTER(c_size_t)

# name: (restype, argtypes)
_PROTOTYPES = {
    "once_client_open_secure": (c_int, [POINTER(c_void_p),
                                        POINTER(once_options),
                                        POINTER(once_security), _ST]),
    "once_client_close": (None, [c_void_p]),
    "once_client_id": (c_uint64, [c_void_p]),
    "once_client_first_incomplete": (c_uint64, [c_void_p]),
    "once_client_release": (None, [c_void_p, c_uint64]),
    "once_client_lease_state": (c_int, [c_void_p]),
    "once_client_on_lease_lost": (None, [c_void_p, LEASE_LOST_FN, c_void_p]),
    "once_strerror": (c_char_p, [c_int]),
    "once_call": (c_int, [c_void_p, c_char_p, c_bool, _ID, c_void_p, c_size_t,
                          _VPP, _SZP, _ST]),
    "once_free": (None, [c_void_p]),
    "once_counter_incr": (c_int, [c_void_p, c_char_p, ctypes.c_int64, _ID,
                                  POINTER(ctypes.c_int64), _ST]),
    "once_counter_get": (c_int, [c_void_p, c_char_p, POINTER(ctypes.c_int64),
                                 _ST]),
    "once_lease_renew": (c_int, [c_void_p, c_uint64, POINTER(c_uint64),
                                 POINTER(c_uint64), _ST]),
    "once_lease_close": (c_int, [c_void_p, c_uint64, POINTER(c_uint64), _ST]),
    "once_grant_credential_verify": (c_int, [c_void_p, c_void_p, c_size_t,
                                             c_void_p, c_size_t, c_uint64,
                                             c_uint64,
                                             POINTER(once_grant_credential),
                                             _ST]),
    "once_grants_public_key": (c_int, [c_void_p, c_void_p, _ST]),
    "once_inputs_open": (c_int, [POINTER(c_void_p), c_char_p, _ST]),
    "once_inputs_close": (None, [c_void_p]),
    "once_grant_submit": (c_int, [c_void_p, c_void_p,
                                  POINTER(once_grant_input), _ID, _VPP, _SZP,
                                  _ST]),
    "once_work_submit": (c_int, [c_void_p, c_void_p, POINTER(once_work_input),
                                 _ID, _VPP, _SZP, _ST]),
    "once_grant_input_resend": (c_int, [c_void_p, c_void_p, c_char_p,
                                        c_uint32, c_bool, _ID, _VPP, _SZP,
                                        _ST]),
    "once_grant_inputs_resume": (c_int, [c_void_p, c_void_p,
                                         INPUT_RESUMED_FN, c_void_p, _SZP,
                                         _SZP, _SZP, _SZP, _ST]),
    "once_grant_inputs_list": (c_int, [c_void_p,
                                       POINTER(POINTER(once_input_info)),
                                       _SZP, _ST]),
    "once_grant_input_forget": (c_int, [c_void_p, c_char_p, c_uint32, _ST]),
    "once_input_state_name": (c_char_p, [c_int]),
    "once_journal_open": (c_int, [c_char_p, POINTER(c_void_p), _ST]),
    "once_journal_close": (None, [c_void_p]),
    "once_journal_list": (c_int, [c_void_p,
                                  POINTER(POINTER(once_chain_info)), _SZP,
                                  _ST]),
    "once_journal_show": (c_int, [c_void_p, c_char_p, POINTER(once_chain_info),
                                  _VPP, _SZP, _VPP, _SZP, _ST]),
    "once_chain_open": (c_int, [c_void_p, c_void_p, c_char_p,
                                POINTER(c_void_p), _ST]),
    "once_chain_close": (None, [c_void_p]),
    "once_chain_forget": (c_int, [c_void_p, _ST]),
    "once_chain_step": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, _ID,
                                _VPP, _SZP, _ST]),
    "once_chain_send": (c_int, [c_void_p, _ID, _VPP, _SZP, _ST]),
    "once_chain_commit": (c_int, [c_void_p, c_void_p, c_size_t, c_char_p,
                                  c_void_p, c_size_t, _ID, _ST]),
    "once_chain_state": (c_int, [c_void_p, POINTER(once_chain_info), _VPP,
                                 _SZP, _VPP, _SZP, _ST]),
    "once_outbox_subscribe": (c_int, [c_void_p, c_char_p, c_char_p, _ID,
                                      POINTER(c_bool), _ST]),
    "once_outbox_read": (c_int, [c_void_p, c_char_p, c_char_p, c_uint32,
                                 c_uint64, _VPP, _ST]),
    "once_outbox_read_after": (c_int, [c_void_p, c_char_p, c_char_p,
                                       c_uint64, c_uint32, c_uint64, _VPP,
                                       _ST]),
    "once_outbox_batch_count": (c_size_t, [c_void_p]),
    "once_outbox_batch_at": (c_int, [c_void_p, c_size_t,
                                     POINTER(once_outbox_event)]),
    "once_outbox_batch_low_water": (c_uint64, [c_void_p]),
    "once_outbox_batch_head": (c_uint64, [c_void_p]),
    "once_outbox_batch_acked": (c_uint64, [c_void_p]),
    "once_outbox_batch_free": (None, [c_void_p]),
    "once_outbox_ack": (c_int, [c_void_p, c_char_p, c_char_p, c_uint64, _ID,
                                POINTER(c_uint64), _ST]),
    "once_outbox_unsubscribe": (c_int, [c_void_p, c_char_p, c_char_p, _ID,
                                        POINTER(c_bool), _ST]),
}

def _candidates() -> List[str]:
    out: List[str] = []
    env = os.environ.get("ONCE_LIBRARY")
    if env:
        out.append(env)
    try:
        from . import _paths  # written by CMake; absent in the source tree
        if getattr(_paths, "LIBONCE", ""):
            out.append(_paths.LIBONCE)
    except ImportError:
        pass
    found = ctypes.util.find_library("once")
    if found:
        out.append(found)
    out.append(SONAME)
    return out


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        missing = [n for n in _PROTOTYPES if not hasattr(lib, n)]
        if missing:
            tried.append(f"{path}: lacks {', '.join(missing)}")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        lib.path = path  # type: ignore[attr-defined]
        return lib
    raise ImportError("once: cannot load libonce (set ONCE_LIBRARY to its "
                      "path); tried:\n  " + "\n  ".join(tried))


lib = _load()


def new_status() -> once_status:
    """A zeroed once_status to pass by reference."""
    return once_status()


def text(raw: bytes) -> str:
    """A C char array's bytes as str (UTF-8, undecodable bytes replaced)."""
    return raw.decode("utf-8", "replace")

