"""test_py_unknown.py — OUTCOME_UNKNOWN and lease loss through the Python
API: replies dropped by bench/once_proxy end in OutcomeUnknown with the rpc
id, and retrying exactly that id returns the stored result (one effect);
a lost lease is LeaseExpired, the callback runs once, the state says LOST
and later calls send nothing."""
from __future__ import annotations

import signal
import threading

import pytest

import once

from conftest import SLOW, client_through, wait_for


def test_outcome_unknown_then_explicit_retry(onced, proxy_factory):
    # Every second reply is lost (seeded). One attempt per call, so a lost
    # reply ends the call OUTCOME_UNKNOWN at once.
    p = proxy_factory(onced, ["--drop-rep", "0.5", "--seed", "7"])
    opts = dict(max_attempts=1, attempt_timeout_ms=300 * SLOW,
                deadline_ms=2000 * SLOW, lease_ttl_ms=3_600_000)
    c = client_through(p, **opts)
    unknown, values = [], []
    with c:
        for i in range(200):
            try:
                values.append(c.counter_incr("lossy", by=1))
            except once.OutcomeUnknown as e:
                unknown.append(e)
                if len(unknown) == 3:
                    break
        assert len(unknown) == 3, "no reply was dropped in 200 calls"
        for e in unknown:
            assert e.code == once.Code.UNKNOWN
            assert e.reason == "OUTCOME_UNKNOWN" and e.attempts == 1
            assert e.rpc_id.client_id == c.client_id and e.rpc_id.seq > 0
        # The unknown seqs hold the acknowledgement back.
        assert c.first_incomplete == unknown[0].rpc_id.seq

        # Retry exactly those ids, straight to onced, from a lease-less
        # client: the stored results (the requests did reach onced; wait
        # until onced has run the last one, in case it is still queued).
        with once.Client(onced.url, lease=False) as direct:
            wait_for(lambda: direct.lease_info(c.client_id).max_seq >=
                     unknown[-1].rpc_id.seq, 10 * SLOW,
                     "onced to run the unanswered calls")
            for e in unknown:
                r = direct.retry_reply(e)
                assert r.replayed and r.rpc_id == e.rpc_id
                values.append(r.value)
            assert direct.counter_get("lossy") == len(values)
        # Each call ran once: the values are exactly 1..N.
        assert sorted(values) == list(range(1, len(values) + 1))
        # The same retry on the handle that made the calls completes the
        # seqs (a lost reply is retried again until one gets through).
        for e in unknown:
            for _ in range(50):
                try:
                    v = c.retry(e)
                    break
                except once.OutcomeUnknown:
                    continue
            assert v in values
        wait_for(lambda: c.first_incomplete > unknown[-1].rpc_id.seq, 1,
                 "the retried seqs to complete")


def test_lease_lost_when_closed_by_another(onced):
    lost = []
    done = threading.Event()

    def on_lost(client, err):
        lost.append((client, err, threading.current_thread().name))
        done.set()

    with once.Client(onced.url, on_lease_lost=on_lost,
                     lease_ttl_ms=3_600_000) as c, \
            once.Client(onced.url, lease=False) as admin:
        c.counter_incr("l")
        assert c.lease_state == once.LeaseState.LIVE
        assert not c.wait_lease_lost(0)
        admin.close_lease(c.client_id)  # OPEN mode: anyone may
        with pytest.raises(once.LeaseExpired) as ei:
            c.counter_incr("l")
        e = ei.value
        assert isinstance(e, once.FailedPrecondition)
        assert (e.code, e.reason) == (once.Code.FAILED_PRECONDITION,
                                      "LEASE_EXPIRED")
        assert c.lease_state == once.LeaseState.LOST
        assert c.wait_lease_lost(5) and done.wait(5)
        assert len(lost) == 1 and lost[0][0] is c
        assert isinstance(lost[0][1], once.LeaseExpired)
        assert c.lease_lost_error is lost[0][1]
        # Later calls fail the same way and send nothing.
        stats = "/once.v1.Admin/Stats"
        before = admin.stats().requests
        with pytest.raises(once.LeaseExpired) as ei:
            c.counter_incr("l")
        assert ei.value.attempts == 0
        after = admin.invoke(stats, once.messages.StatsRequest())
        assert after.value.requests - before == after.attempts  # Stats only
        assert admin.counter_get("l") == 1
        assert len(lost) == 1  # the callback ran once


def test_lease_lost_when_onced_stops_answering(onced_factory):
    o = onced_factory(["--lease-ttl", "300ms"])
    c = once.Client(o.url, lease_ttl_ms=300)
    later = []
    c.counter_incr("t")
    o.stop_signal(signal.SIGSTOP)
    try:
        # No renewal succeeds for the whole TTL: lost, without a call.
        assert c.wait_lease_lost(10 * SLOW)
        assert c.lease_state == once.LeaseState.LOST
        # Setting a callback after the loss runs it at once.
        c.on_lease_lost(lambda cl, err: later.append(err))
        assert len(later) == 1 and later[0].reason == "LEASE_EXPIRED"
        with pytest.raises(once.LeaseExpired):
            c.counter_incr("t")
    finally:
        o.stop_signal(signal.SIGCONT)
    c.close()


def test_close_from_the_callback_is_refused(onced):
    seen = []

    def on_lost(client, err):
        try:
            client.close()
        except RuntimeError as e:
            seen.append(e)

    with once.Client(onced.url, on_lease_lost=on_lost) as c:
        c.close_lease()  # its own: lost at once
        wait_for(lambda: seen, 5, "the callback")
        assert c.lease_state == once.LeaseState.LOST
    assert "callback" in str(seen[0])
