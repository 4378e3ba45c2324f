"""test_py_client.py — the Python Client against a real onced: replay and
conflict, the generic call, many threads on one client, arguments refused
before anything is sent, closing, and help(once)."""
from __future__ import annotations

import pydoc
import threading

import pytest

import once
from once import messages as m

LONG_TTL = 3_600_000  # no background renewal during a test


def test_counter_replay_and_conflict(onced):
    with once.Client(onced.url) as c, once.Client(onced.url,
                                                  lease=False) as other:
        assert c.lease_state == once.LeaseState.LIVE
        assert other.lease_state == once.LeaseState.NONE
        assert c.counter_incr("jobs", by=2) == 2
        r = c.counter_incr_reply("jobs", by=5)
        assert (r.value, r.replayed, r.attempts) == (7, False, 1)
        assert r.rpc_id == once.RpcId(c.client_id, 2)

        # The same id and arguments again: the stored result, one effect.
        again = other.counter_incr_reply("jobs", by=5, rpc_id=r.rpc_id)
        assert (again.value, again.replayed) == (7, True)
        assert other.counter_incr("jobs", 5, rpc_id=str(r.rpc_id)) == 7
        assert c.counter_get("jobs") == 7

        # The same id with other arguments: Conflict, nothing runs.
        with pytest.raises(once.Conflict) as ei:
            other.counter_incr("jobs", by=6, rpc_id=r.rpc_id)
        e = ei.value
        assert isinstance(e, once.AlreadyExists)
        assert (e.code, e.reason, e.rpc_id) == (once.Code.ALREADY_EXISTS,
                                                "RPC_ID_CONFLICT", r.rpc_id)
        assert "already used" in e.message
        assert c.counter_get("jobs") == 7


def test_generic_call(onced):
    with once.Client(onced.url) as c:
        rep = c.invoke("/once.v1.Counter/Increment",
                       m.IncrementRequest(name="g", by=3))
        assert isinstance(rep.value, m.IncrementResponse)
        assert rep.value.value == 3 and rep.rpc_id.seq == 1
        got = c.call("/once.v1.Counter/Get", m.GetRequest(name="g"),
                     m.GetResponse)
        assert got.value == 3
        # A replay through the generic call, with the bytes as sent.
        with once.Client(onced.url, lease=False) as d:
            again = d.invoke("/once.v1.Counter/Increment",
                             m.IncrementRequest(name="g", by=3),
                             rpc_id=rep.rpc_id)
            assert again.replayed and again.value.value == 3
        # Unknown methods: the caller says mutating and the reply type.
        raw = c.call("/once.v1.Counter/Get",
                     m.GetRequest(name="g").SerializeToString())
        assert raw.value == 3
        with pytest.raises(once.Unimplemented) as ei:
            c.call("/x.v1.Nope/Do", b"", mutating=False)
        assert ei.value.reason == "UNKNOWN_METHOD"
        assert c.stats().requests > 0
        info = c.lease_info()
        assert info.client_id == c.client_id and info.max_seq == 1


def test_threads_share_one_client(onced):
    threads, per = 16, 100
    got = [[] for _ in range(threads)]
    errors = []
    with once.Client(onced.url) as c:

        def work(i):
            try:
                for _ in range(per):
                    got[i].append(c.counter_incr("shared"))
                    c.counter_incr(f"own-{i}", by=i + 1)
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in ts)
        assert not errors, errors
        values = sorted(v for g in got for v in g)
        assert values == list(range(1, threads * per + 1))
        for g in got:
            assert g == sorted(g)  # each thread sees its own calls in order
        assert c.counter_get("shared") == threads * per
        for i in range(threads):
            assert c.counter_get(f"own-{i}") == per * (i + 1)
        assert c.first_incomplete == 2 * threads * per + 1


BAD_CALLS = [
    (once.InvalidArgument, lambda c: c.counter_incr("")),
    (once.InvalidArgument, lambda c: c.counter_incr("a\0b")),
    (TypeError, lambda c: c.counter_incr(7)),
    (TypeError, lambda c: c.counter_incr("n", by="1")),
    (TypeError, lambda c: c.counter_incr("n", by=1.5)),
    (once.InvalidArgument, lambda c: c.counter_incr("n", by=1 << 63)),
    (once.InvalidArgument, lambda c: c.counter_incr("n", rpc_id=(0, 1))),
    (once.InvalidArgument, lambda c: c.counter_incr("n", rpc_id="7")),
    (once.InvalidArgument, lambda c: c.counter_incr("n", rpc_id=(1, -1))),
    (TypeError, lambda c: c.counter_incr("n", rpc_id=3.0)),
    (once.InvalidArgument, lambda c: c.call("Counter/Get", m.GetRequest())),
    (once.InvalidArgument,
     lambda c: c.call("/once.v1.Counter/Get", m.IncrementRequest())),
    (once.InvalidArgument,
     lambda c: c.call("/once.v1.Counter/Get", m.GetRequest(),
                      m.IncrementResponse)),
    (once.InvalidArgument,
     lambda c: c.call("/once.v1.Counter/Get", m.GetRequest(), mutating=True)),
    (once.InvalidArgument,
     lambda c: c.call("/once.v1.Counter/Get", m.GetRequest(), rpc_id=(1, 1))),
    (once.InvalidArgument, lambda c: c.call("/x.v1.S/M", b"")),
    (TypeError, lambda c: c.call("/x.v1.S/M", "text", mutating=True)),
    (TypeError, lambda c: c.call("/x.v1.S/M", b"", int, mutating=True)),
    (once.InvalidArgument, lambda c: c.request_grant("", "s", "m", "l", 1)),
    (once.InvalidArgument, lambda c: c.request_grant("r", "s", "m", "l", -1)),
    (TypeError, lambda c: c.request_grant("r", "s", "m", "l", "1")),
    (once.InvalidArgument, lambda c: c.finish(1, "DONE")),
    (once.InvalidArgument, lambda c: c.claim("")),
    (once.InvalidArgument, lambda c: c.release(-1)),
    (TypeError, lambda c: c.retry(ValueError())),
    (once.InvalidArgument,
     lambda c: c.retry(once.Unavailable("NOT_SENT", "x"))),
    (once.InvalidArgument,
     lambda c: once.verify_credential(b"short", (b"", b""))),
]


def test_bad_arguments_send_nothing(onced):
    with once.Client(onced.url, lease_ttl_ms=LONG_TTL) as c:
        c.counter_incr("n")
        stats = "/once.v1.Admin/Stats"
        before = c.invoke(stats, m.StatsRequest()).value.requests
        for want, call in BAD_CALLS:
            with pytest.raises(want):
                call(c)
        after = c.invoke(stats, m.StatsRequest())
        # Only the second Stats reached onced (each of its attempts counts).
        assert after.value.requests - before == after.attempts, \
            "a refused call was sent"
        # No seq was used either: the next call is seq 2.
        assert c.counter_incr_reply("n").rpc_id.seq == 2
    # libonce's own refusal before sending: a key file it cannot read.
    with pytest.raises(once.InvalidArgument) as ei:
        once.Client(onced.url, key_file="/nonexistent/key")
    assert ei.value.reason == "BAD_KEY" and ei.value.attempts == 0
    with pytest.raises(TypeError):
        once.Client(onced.url, lease="yes")
    with pytest.raises(once.InvalidArgument):
        once.Client(onced.url, key=b"k" * 31, principal="p")
    with pytest.raises(once.InvalidArgument):
        once.Client(onced.url, deadline_ms=-1)


def test_closed_client_refuses(onced):
    c = once.Client(onced.url)
    with c:
        c.counter_incr("x")
    assert c.closed
    with pytest.raises(once.ClientClosed) as ei:
        c.counter_incr("x")
    assert ei.value.code == once.Code.FAILED_PRECONDITION
    c.close()  # twice is harmless


def test_unreachable_server_is_unavailable():
    with pytest.raises(once.Unavailable):
        once.Client("ipc:///tmp/once-py-nobody-here.ipc", deadline_ms=300,
                    attempt_timeout_ms=100)


def test_help_reads_well():
    text = pydoc.render_doc(once, renderer=pydoc.plaintext)
    for word in ("Client", "OutcomeUnknown", "InputStore", "retry",
                 "verify_credential"):
        assert word in text
    doc = pydoc.render_doc(once.Client, renderer=pydoc.plaintext)
    for meth in ("counter_incr", "call", "request_grant", "claim",
                 "renew_credential", "finish", "get_surface", "retry",
                 "lease_state", "on_lease_lost"):
        assert meth in doc
