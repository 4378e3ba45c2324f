"""test_py_kv.py — once.v1.KV through the Python API against a real onced:
put/get/range/delete with str and bytes; a failed compare is a result, not
an exception, and writes nothing; a compare-and-set retried by its rpc id
after the key moved returns its first answer, and another payload under
the id is a Conflict; transitions through a lossy proxy (lost replies
retried under the same id) each applied exactly once; a lease-bound key
gone with its lease; a key past the limit refused with nothing written;
ranges across onced's 1000-key page."""
from __future__ import annotations

import pytest

import once
from once import kv

from conftest import SLOW, client_through


def test_put_get_range_delete(onced):
    with once.Client(onced.url) as c:
        r = c.kv_put("jobs/42", "queued")
        assert r.succeeded and r.revision > 0
        assert r.results[0].put.version == r.revision
        got = c.kv_get("jobs/42")
        assert (got.key, got.value, got.version) == (b"jobs/42", b"queued",
                                                     r.revision)
        assert c.kv_get(b"jobs/none") is None
        c.kv_put(b"jobs/43", b"\x00\xffbinary")
        assert [(x.key, x.value) for x in c.kv_range("jobs/")] == [
            (b"jobs/42", b"queued"), (b"jobs/43", b"\x00\xffbinary")]
        assert [x.key for x in c.kv_range("jobs/", limit=1)] == [b"jobs/42"]
        assert c.kv_range("jobs/", keys_only=True)[1].value == b""
        d = c.kv_delete("jobs/", prefix=True)
        assert d.results[0].delete_prefix.deleted == 2
        assert c.kv_range("jobs/") == []


def test_failed_compare_is_a_result(onced):
    with once.Client(onced.url) as c:
        v = c.kv_put("k", "one").revision
        r = c.kv_put("k", "two", if_version=v + 5)
        assert not r.succeeded and r.failed_compare == 1
        assert r.results[0].get.kv.value == b"one"
        assert not c.kv_put("k", "three", if_absent=True).succeeded
        assert c.kv_get("k").value == b"one"
        assert c.kv_put("k", "two", if_version=v).succeeded
        assert c.kv_get("k").value == b"two"
        with pytest.raises(once.InvalidArgument):
            c.kv_put("k", "x", if_version=1, if_absent=True)
        # The general form: a job submitted if absent, moved by version.
        t = c.kv_txn([kv.absent("jobs/7")], [kv.put("jobs/7", "queued")])
        assert t.succeeded
        ver = c.kv_get("jobs/7").version
        t = c.kv_txn([kv.version("jobs/7") == ver, kv.value("jobs/7") ==
                      "queued"],
                     [kv.put("jobs/7", "running on m3"), kv.get("jobs/7")],
                     [kv.get("jobs/7")])
        assert t.succeeded and t.results[1].get.kv.value == b"running on m3"
        assert t.results[1].get.kv.version == t.revision > ver


def test_cas_retry_returns_first_answer(onced):
    with once.Client(onced.url) as c, \
            once.Client(onced.url, lease=False) as other:
        first = c.kv_txn_reply([kv.absent("cas")], [kv.put("cas", "mine")],
                               [kv.get("cas")])
        assert first.value.succeeded and not first.replayed
        with once.Client(onced.url) as mover:  # the key moves on; c sends
            mover.kv_put("cas", "theirs")  # nothing that acknowledges 1
        # The id resent (as a restarted client would, from a handle
        # without a lease): its first answer, not the else branch it
        # would take now.
        again = other.kv_txn_reply([kv.absent("cas")],
                                   [kv.put("cas", "mine")], [kv.get("cas")],
                                   rpc_id=first.rpc_id)
        assert again.replayed and again.value == first.value
        with pytest.raises(once.Conflict) as ei:
            other.kv_txn([kv.absent("cas")], [kv.put("cas", "other")],
                         rpc_id=first.rpc_id)
        assert ei.value.reason == "RPC_ID_CONFLICT"
        assert c.kv_get("cas").value == b"theirs"


def test_lossy_transitions_apply_once(onced, proxy_factory):
    """Every transition moves the row by version; lost replies end in
    OutcomeUnknown and are retried under the same id until answered. The
    row's count equals the transitions that returned, exactly."""
    p = proxy_factory(onced, ["--drop-rep", "0.3", "--seed", "11"])
    opts = dict(max_attempts=1, attempt_timeout_ms=300 * SLOW,
                deadline_ms=2000 * SLOW, lease_ttl_ms=3_600_000)
    c = client_through(p, **opts)
    lost = 0
    with c:
        n, ver = 0, 0
        for _ in range(40):
            try:
                r = c.kv_txn([kv.version("row") == ver],
                             [kv.put("row", str(n + 1))], [kv.get("row")])
            except once.OutcomeUnknown as e:
                lost += 1
                for _ in range(100):  # the same id until it is answered
                    try:
                        r = c.retry(e)
                        break
                    except once.OutcomeUnknown:
                        continue
                else:
                    raise AssertionError(f"{e.rpc_id} unanswered 100 times")
            assert r.succeeded, "a retry took the other branch"
            n, ver = n + 1, r.revision
        assert lost > 0, "no reply was lost"
    with once.Client(onced.url, lease=False) as direct:
        row = direct.kv_get("row")
        assert row.value == b"40" and row.version == ver


def test_lease_bound_key_ends_with_lease(onced):
    with once.Client(onced.url) as agent, \
            once.Client(onced.url, lease=False) as watcher:
        agent.kv_put("agents/m3", "alive", lease=True)
        got = watcher.kv_get("agents/m3")
        assert got is not None and got.lease == agent.client_id
    # agent closed: its lease ended, and the key with it.
    with once.Client(onced.url, lease=False) as watcher:
        assert watcher.kv_get("agents/m3") is None


def test_refusals_write_nothing(onced):
    with once.Client(onced.url) as c:
        with pytest.raises(once.InvalidArgument) as ei:
            c.kv_put("k" * 1025, "v")
        assert ei.value.reason == "KV_KEY_TOO_LARGE"
        with pytest.raises(once.PermissionDenied) as ei:
            c.kv_txn([], [kv.put("a", "1"), kv.emit("once.system", b"x")])
        assert ei.value.reason == "OUTBOX_RESERVED_TOPIC"
        with pytest.raises(TypeError):
            c.kv_txn([kv.put("a", "1")])  # an op where a compare goes
        assert c.kv_range("") == []


def test_range_pages(onced):
    with once.Client(onced.url) as c:
        for start in range(0, 1001, 100):
            c.kv_txn([], [kv.put(f"p/{i:04d}", "v")
                          for i in range(start, min(start + 100, 1001))])
        keys = [x.key for x in c.kv_range("p/")]
        assert len(keys) == 1001 and keys[-1] == b"p/1000"
        assert len(c.kv_range("p/", limit=1000)) == 1000
        assert len(c.kv_range("p/", limit=1001)) == 1001
