"""test_py_consumer.py — once.Consumer against a real onced: events a KV
Txn emits come back in offset order with their stable ids, method, time
and payload; Read does not move the cursor and Ack does; the run loop
acknowledges exactly the events its callback returned from (an exception
leaves that event to come again); resume(offset) skips what a receiver
stored as applied and moves the cursor there; run_batches with
ack_every acknowledges every so many batches and when caught up, reading
past what it applied in between; the system topic carries
grant.finished with the grant; refusals are the typed exceptions of the
reasons table; low_water rises once every consumer acknowledged and the
collector passed."""
from __future__ import annotations

import pytest

import once
from once import kv

from conftest import SLOW, wait_for


def emit(c: once.Client, topic: str, *payloads: bytes) -> once.Reply:
    return c.kv_txn_reply([], [kv.emit(topic, p) for p in payloads])


def test_events_ids_offsets_and_cursor(onced):
    with once.Client(onced.url) as c:
        cons = once.Consumer(c, "jobs", "billing", wait_ms=0)
        assert cons.subscribe() is True
        assert cons.subscribe() is False  # again: a no-op
        r1 = emit(c, "jobs", b"a", b"b")
        r2 = emit(c, "jobs", b"c")
        # A replayed producer (its id resent, as a restarted process
        # would) makes no new event.
        with once.Client(onced.url, lease=False) as other:
            again = other.kv_txn_reply([], [kv.emit("jobs", b"c")],
                                       rpc_id=r2.rpc_id)
        assert again.replayed and again.value == r2.value
        assert [x.emit.offset for x in r1.value.results] == [1, 2]
        b = cons.read()
        assert [e.offset for e in b] == [1, 2, 3] and b.last == 3
        assert [e.payload for e in b] == [b"a", b"b", b"c"]
        assert [e.id for e in b] == [
            once.EventId(r1.rpc_id.client_id, r1.rpc_id.seq, 0),
            once.EventId(r1.rpc_id.client_id, r1.rpc_id.seq, 1),
            once.EventId(r2.rpc_id.client_id, r2.rpc_id.seq, 0)]
        assert all(e.method == "/once.v1.KV/Txn" and e.time_unix_ms > 0
                   for e in b)
        assert (b.head, b.acked, b.low_water) == (3, 0, 1)
        # Reading does not move the cursor; an Ack does.
        assert [e.offset for e in cons.read()] == [1, 2, 3]
        assert cons.ack(2) == 2
        assert [e.offset for e in cons.read()] == [3]
        assert cons.ack(1) == 2  # never back
        assert [e.offset for e in cons.read()] == [3]
        t = cons.topic_info()
        assert t.head == 3 and [(x.name, x.acked) for x in t.consumers] == [
            ("billing", 2)]


def test_refusals_are_typed(onced):
    with once.Client(onced.url) as c:
        cons = once.Consumer(c, "jobs", "nobody", wait_ms=0)
        with pytest.raises(once.OutboxNoConsumer) as ei:
            cons.read()
        assert ei.value.reason == once.reasons.OUTBOX_NO_CONSUMER
        cons.subscribe()
        with pytest.raises(once.OutboxBadOffset):
            cons.ack(5)
        with pytest.raises(once.PermissionDenied) as pd:
            emit(c, once.SYSTEM_TOPIC, b"forged")
        assert pd.value.reason == once.reasons.OUTBOX_RESERVED_TOPIC
        with pytest.raises(once.InvalidArgument):  # refused here
            once.Consumer(c, "", "x")
        assert cons.unsubscribe() is True
        with pytest.raises(once.OutboxNoConsumer):
            cons.ack(0)


def test_run_acknowledges_what_was_applied(onced):
    with once.Client(onced.url) as c:
        once.Consumer(c, "jobs", "r").subscribe()
        emit(c, "jobs", *[b"%d" % i for i in range(1, 6)])
        seen = []

        def fails_on_4(ev: once.Event):
            if ev.payload == b"4":
                raise RuntimeError("not applied")
            seen.append(ev.offset)

        cons = once.Consumer(c, "jobs", "r", wait_ms=0)
        with pytest.raises(RuntimeError):
            cons.run(fails_on_4, idle_exit=0)
        assert seen == [1, 2, 3] and cons.after == 3
        assert cons.topic_info().consumers[0].acked == 3
        # A new receiver (say after a crash) gets event 4 again, and a
        # STOP answer acknowledges the event it stops on.
        seen.clear()
        cons = once.Consumer(c, "jobs", "r", wait_ms=0)

        def stop_at_4(ev: once.Event):
            seen.append(ev.offset)
            return once.Consumer.STOP if ev.offset == 4 else None

        assert cons.run(stop_at_4) == 4 and seen == [4]
        assert cons.topic_info().consumers[0].acked == 4
        assert cons.run(lambda ev: seen.append(ev.offset), idle_exit=0) == 5
        assert seen == [4, 5]


def test_resume_skips_what_the_receiver_stored(onced):
    with once.Client(onced.url) as c:
        once.Consumer(c, "jobs", "pg").subscribe()
        emit(c, "jobs", b"1", b"2", b"3", b"4")
        # The receiver stored offset 3 with its effect, then died before
        # its Ack: onced's cursor is still 0.
        cons = once.Consumer(c, "jobs", "pg", wait_ms=0)
        cons.resume(3)
        assert cons.topic_info().consumers[0].acked == 3
        got = []
        cons.run_batches(lambda b: got.extend(e.offset for e in b),
                         idle_exit=0)
        assert got == [4]
        # after= alone (no Ack): Read starts past it (an onced older than
        # Read's after returns 1..4 and the skipped are not handed out);
        # the batch still says where to acknowledge.
        once.Consumer(c, "jobs", "pg2").subscribe()
        b = once.Consumer(c, "jobs", "pg2", after=2, wait_ms=0).read()
        assert [e.offset for e in b] == [3, 4] and b.last == 4


def test_run_batches_defers_acks(onced):
    with once.Client(onced.url) as c:
        once.Consumer(c, "jobs", "late").subscribe()
        for i in range(10):
            emit(c, "jobs", b"%d" % i)
        cons = once.Consumer(c, "jobs", "late", max_events=2, wait_ms=0)
        seen, cursors = [], []

        def apply(b: once.Batch) -> None:
            cursors.append(cons.topic_info().consumers[0].acked)
            seen.extend(e.offset for e in b)

        assert cons.run_batches(apply, idle_exit=0.2, ack_every=3) == 10
        # Acked after the third batch, then when caught up with the head;
        # the Reads between started past what was applied: each event once.
        assert seen == list(range(1, 11))
        assert cursors == [0, 0, 0, 6, 6]
        assert cons.topic_info().consumers[0].acked == 10
        with pytest.raises(ValueError):
            cons.run_batches(apply, ack_every=0)


def test_system_topic_and_low_water(onced):
    with once.Client(onced.url) as c:
        cons = once.Consumer(c, once.SYSTEM_TOPIC, "billing", wait_ms=0)
        cons.subscribe()
        gen = c.set_placement("s1", "m1", "/srv/s1").generation
        g = c.request_grant("job-1", "s1", "m1", "/srv/s1", gen).grant
        c.finish(g.grant_id, "SUCCEEDED")
        finished = [e for e in cons.read() if
                    e.system().kind == "grant.finished"]
        assert len(finished) == 1
        s = finished[0].system()
        assert s.grant.grant_id == g.grant_id and \
            s.grant.outcome == once.messages.SUCCEEDED
        assert finished[0].method == "/once.v1.Grants/FinishGrant"
        # Everything acknowledged: the collector reclaims it and the
        # low-water mark passes it.
        last = cons.read().last
        cons.ack(last)

        def passed():
            cons.read()
            return cons.low_water > last
        wait_for(passed, 20 * SLOW, "the low-water mark to pass the acked "
                 "events", 0.1)
