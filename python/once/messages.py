"""once.messages — every message and enum of the shipped .proto files
(once.v1) under one name: ``once.messages.RequestGrantRequest``,
``once.messages.SUCCEEDED`` (the status codes are once.Code). The modules
themselves are generated at build time (once.proto.once_pb2,
once.proto.grants_pb2, once.proto.kv_pb2, once.proto.outbox_pb2)."""
from __future__ import annotations

from .proto import grants_pb2 as _g
from .proto import kv_pb2 as _k
from .proto import once_pb2 as _o
from .proto import outbox_pb2 as _ob


def _export() -> list:
    names = []
    for mod in (_o, _g, _k, _ob):
        fd = mod.DESCRIPTOR
        for n in list(fd.message_types_by_name) + \
                list(fd.enum_types_by_name):
            globals()[n] = getattr(mod, n)
            names.append(n)
        for e in fd.enum_types_by_name.values():
            if e.full_name == "once.v1.Code":  # once.Code has them
                continue
            for v in e.values:
                globals()[v.name] = v.number
                names.append(v.name)
    return names


__all__ = _export()
