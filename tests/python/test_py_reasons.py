"""test_py_reasons.py — the Python client's reasons agree with the one
table of reasons (proto/reasons.tsv, generated into once.reasons): every
exception chosen by reason names a reason of the table under one of its
codes, and error_for picks that class. No onced is started.

Owns: nothing beyond its asserts.
Invariant: reads the built package only (PYTHONPATH=build/python).
Never: spells a reason itself but for the wire check below.
"""
from __future__ import annotations

import once
from once import errors, reasons


def test_each_reason_class_matches_the_table():
    for (code, reason), cls in errors._BY_REASON.items():
        assert reason in reasons.TABLE, reason
        codes = reasons.TABLE[reason][0]
        assert once.Code(code).name in codes, (reason, codes)
        e = errors.error_for(code, reason, "m")
        assert type(e) is cls and e.reason == reason and e.code == code


def test_constants_are_their_names():
    for name in reasons.TABLE:
        assert getattr(reasons, name) == name
    # The wire spelling, pinned apart from the table.
    assert reasons.OUTCOME_UNKNOWN == "OUTCOME_UNKNOWN"
