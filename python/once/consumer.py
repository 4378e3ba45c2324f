"""once.consumer — Consumer: a durable named consumer of an outbox topic
(docs/outbox.md), over libonce's once_outbox_* calls (once/outbox.h).

Owns: one consumer's calls on a Client (Subscribe, Read, Ack,
Unsubscribe), the events of a Read as Python values, the receiver's
"applied up to" offset (``after``) at or below which events are never
handed out, and the receiver loops (run: one callback per event;
run_batches: one per batch).
Invariant: events are handed out in offset order, each at most once per
Consumer object; a loop acknowledges an offset only after the callback
returned for it (applied), so a crash anywhere delivers again only what was
not acknowledged — at least once, never a gap. ``after`` only grows.
Never: acknowledges an event the callback did not return from, moves a
cursor or ``after`` back, or retries a call under a new rpc id (a loop's
Ack whose outcome is unknown is released: the next Ack covers it, since an
Ack moves the cursor to an offset and never back).
A Consumer is used by one thread at a time; its Client may be shared.
"""
from __future__ import annotations

import logging
import time
from ctypes import byref, c_bool, c_uint64, c_void_p, string_at
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Iterator, NamedTuple,
                    Optional, Tuple, Union)

from . import _lib
from .client import c_str, c_uint, rpc_id_arg, status_error
from .errors import DeadlineExceeded, OutcomeUnknown, RpcId, Unavailable
from .proto import outbox_pb2

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Consumer", "Event", "EventId", "Batch", "SYSTEM_TOPIC"]

log = logging.getLogger("once")

#: onced's own lifecycle events (payload: once.messages.SystemEvent).
SYSTEM_TOPIC = "once.system"

RpcIdArg = Union[RpcId, tuple, str, None]


class EventId(NamedTuple):
    """An event's stable id: the producing call's rpc id and the event's
    place among that call's events (from 0). A replayed call makes no new
    event, so the id names one event forever (pattern 2 dedupes by it)."""

    client_id: int
    seq: int
    index: int


@dataclass(frozen=True)
class Event:
    """One event as a Read returned it."""

    offset: int  #: dense per topic: 1, 2, 3, ... in commit order
    id: EventId
    method: str  #: the producing call ("/once.v1.KV/Txn", ...)
    time_unix_ms: int  #: the producing call's commit time
    payload: bytes

    def system(self) -> outbox_pb2.SystemEvent:
        """The payload as a once.messages.SystemEvent (events of the
        once.system topic: ``kind``, ``grant``, ``work``, ``client_id``)."""
        return outbox_pb2.SystemEvent.FromString(self.payload)


@dataclass(frozen=True)
class Batch:
    """What one Read returned, less the events at or below the consumer's
    ``after`` (already applied)."""

    events: Tuple[Event, ...]
    #: the offset to acknowledge once this batch is applied: its last
    #: event's, skipped ones included (the cursor when the Read had none)
    last: int
    low_water: int  #: nothing below it is delivered again, to anyone
    head: int  #: the topic's highest offset when it was read
    acked: int  #: the consumer's cursor when it was read

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)


class Consumer:
    """A durable named consumer of one topic.

    ::

        c = once.Client(url, key_file=key, attempt_timeout_ms=5000)
        cons = once.Consumer(c, "jobs", "billing", after=stored_offset)
        cons.run(apply)        # apply(event) for each event, then Ack

    Delivery is at least once: an event comes again until an Ack covers
    its offset. For exactly once the receiver either stores the last
    offset it applied in the same transaction as its effect and gives it
    back as ``after`` when it starts again (pattern 1: events at or below
    it are skipped, and the cursor is moved there by :meth:`resume`), or
    dedupes by :attr:`Event.id`, forgetting ids of events below
    :attr:`low_water` (pattern 2). See docs/outbox.md.

    Args:
        client: a Client with a lease (Subscribe and Ack are mutating).
            Its attempt timeout must exceed ``wait_ms``.
        topic, name: the topic and this consumer's name on it.
        after: the highest offset this receiver has already applied
            (0: none); events at or below it are never handed out.
        max_events: per Read (0: the server's default, 100; at most 1000).
        wait_ms: how long a Read waits for an event when there is none
            (long-poll, at most 30 s; 0: answer at once).
    """

    NEXT = 0  #: a callback's answer: applied, go on (None means the same)
    STOP = 1  #: applied: acknowledge it and return

    def __init__(self, client: "Client", topic: str, name: str, *,
                 after: int = 0, max_events: int = 0,
                 wait_ms: int = 1000) -> None:
        self.client = client
        self.topic = topic
        self.name = name
        self._topic_b = c_str("topic", topic)
        self._name_b = c_str("name", name)
        self._after = c_uint("after", after, 64)
        self.max_events = c_uint("max_events", max_events, 32)
        self.wait_ms = c_uint("wait_ms", wait_ms, 64)
        self._low_water = 0
        self._subscribed = False

    @property
    def after(self) -> int:
        """The highest offset applied (as given, or handed out by a loop);
        events at or below it are skipped."""
        return self._after

    @property
    def low_water(self) -> int:
        """The topic's low-water mark as the last Read or Ack saw it (0
        before any): no event below it will be delivered again, so a
        receiver deduping by id may forget the ids of events below it."""
        return self._low_water

    # ---- the calls ---------------------------------------------------------

    def _mutate(self, fn: Any, rpc_id: RpcIdArg) -> Optional[RpcId]:
        """Calls fn(handle, topic, name, id, st), a mutating once_outbox_*
        call; raises its error with the rpc id it carried."""
        rid = rpc_id_arg(rpc_id)
        cid = _lib.once_rpc_id(*(rid or (0, 0)))
        st = _lib.once_status()
        h = self.client._enter()
        try:
            rv = fn(h, self._topic_b, self._name_b, byref(cid), byref(st))
        finally:
            self.client._leave()
        got = RpcId(cid.client_id, cid.seq) if cid.seq else None
        if rv != 0:
            raise status_error(st, got)
        return got

    def subscribe(self, *, rpc_id: RpcIdArg = None) -> bool:
        """Registers the consumer (again is fine); True when it was new. A
        new consumer's cursor starts below the topic's low-water mark: it
        reads every event still stored. Subscribe before producing: a
        topic without consumers keeps nothing."""
        created = c_bool()
        self._mutate(lambda h, t, n, cid, st: _lib.lib.once_outbox_subscribe(
            h, t, n, cid, byref(created), st), rpc_id)
        self._subscribed = True
        return bool(created.value)

    def unsubscribe(self, *, rpc_id: RpcIdArg = None) -> bool:
        """Removes the consumer (it holds no event any more); True when it
        existed."""
        existed = c_bool()
        self._mutate(lambda h, t, n, cid, st:
                     _lib.lib.once_outbox_unsubscribe(h, t, n, cid,
                                                      byref(existed), st),
                     rpc_id)
        self._subscribed = False
        return bool(existed.value)

    def ack(self, offset: int, *, rpc_id: RpcIdArg = None) -> int:
        """Moves the cursor to offset (exactly once; an offset at or below
        the cursor changes nothing); returns the cursor after. Raises
        OutboxBadOffset past the topic's head, OutboxNoConsumer when not
        subscribed."""
        off = c_uint("offset", offset, 64)
        acked = c_uint64()
        self._mutate(lambda h, t, n, cid, st: _lib.lib.once_outbox_ack(
            h, t, n, off, cid, byref(acked), st), rpc_id)
        return int(acked.value)

    def read(self, max_events: Optional[int] = None,
             wait_ms: Optional[int] = None) -> Batch:
        """Events after the cursor in offset order (reading does not move
        the cursor), less those at or below :attr:`after` (onced starts
        the Read past them; an onced older than Read's ``after`` sends
        them and they are dropped here); waits up to wait_ms (default:
        the Consumer's) when there is none."""
        mx = c_uint("max_events", self.max_events if max_events is None
                    else max_events, 32)
        wait = c_uint("wait_ms", self.wait_ms if wait_ms is None else wait_ms,
                      64)
        b = c_void_p()
        st = _lib.once_status()
        h = self.client._enter()
        try:
            rv = _lib.lib.once_outbox_read_after(h, self._topic_b,
                                                 self._name_b, self._after,
                                                 mx, wait, byref(b),
                                                 byref(st))
        finally:
            self.client._leave()
        if rv != 0:
            raise status_error(st, None)
        try:
            return self._batch(b)
        finally:
            _lib.lib.once_outbox_batch_free(b)

    def _batch(self, b: c_void_p) -> Batch:
        L = _lib.lib
        acked = int(L.once_outbox_batch_acked(b))
        last = acked
        events = []
        ev = _lib.once_outbox_event()
        for i in range(L.once_outbox_batch_count(b)):
            L.once_outbox_batch_at(b, i, byref(ev))
            last = int(ev.offset)
            if last <= self._after:
                continue
            events.append(Event(
                last, EventId(int(ev.client_id), int(ev.seq), int(ev.index)),
                _lib.text(ev.method or b""), int(ev.time_unix_ms),
                string_at(ev.payload, ev.payload_len) if ev.payload_len
                else b""))
        self._low_water = int(L.once_outbox_batch_low_water(b))
        return Batch(tuple(events), last, self._low_water,
                     int(L.once_outbox_batch_head(b)), acked)

    def topic_info(self) -> Optional[outbox_pb2.OutboxTopic]:
        """The topic as Outbox.Topics shows it (head, low_water, retained
        events and bytes, each consumer's cursor and lag), or None."""
        r = self.client.call("/once.v1.Outbox/Topics",
                             outbox_pb2.OutboxTopicsRequest())
        for t in r.topics:
            if t.name == self.topic:
                return t
        return None

    # ---- pattern 1's restart point -----------------------------------------

    def resume(self, offset: int) -> None:
        """Starts after offset, the last one the receiver stored with its
        effect: events at or below it are skipped from now on, and the
        cursor is moved there with an Ack (Read always starts at the
        cursor; the Ack only saves reading them again, so one that fails
        for want of onced is left to the loop's next Ack)."""
        self._after = max(self._after, c_uint("offset", offset, 64))
        if not self._subscribed:
            self.subscribe()
        if self._after > 0:
            self._ack_lazily(self._after)

    def _ack_lazily(self, offset: int) -> None:
        """An Ack whose failure for want of an answer only delays
        reclamation: the next Ack, to a higher offset, covers it."""
        try:
            self.ack(offset)
        except (OutcomeUnknown, Unavailable, DeadlineExceeded) as e:
            if isinstance(e, OutcomeUnknown) and e.rpc_id is not None:
                self.client.release(e.rpc_id.seq)  # never retried
            log.info("once: Ack %s/%s up to %d left to the next one: %s",
                     self.topic, self.name, offset, e)

    # ---- the loops ---------------------------------------------------------

    def batches(self, *, idle_exit: Optional[float] = None
                ) -> Iterator[Batch]:
        """Batches with at least one event, read one after another, for
        ever or until no event came for idle_exit seconds. Acknowledges
        nothing: the caller applies a batch, then :meth:`ack`s
        ``batch.last`` (or lets :meth:`run_batches` do both)."""
        if not self._subscribed:
            self.subscribe()
        quiet_since = time.monotonic()
        while True:
            b = self.read()
            if b.events:
                quiet_since = time.monotonic()
                yield b
            elif b.last > b.acked:  # only skipped ones (applied before):
                self._ack_lazily(b.last)  # so they are not sent again
            elif idle_exit is not None and \
                    time.monotonic() - quiet_since >= idle_exit:
                return

    def _acks(self, ack_every: int, ack_interval: Optional[float]
              ) -> "_DeferredAcks":
        if ack_every < 1:
            raise ValueError("ack_every must be at least 1")
        return _DeferredAcks(self, ack_every, ack_interval)

    def run_batches(self, fn: Callable[[Batch], Any], *,
                    idle_exit: Optional[float] = None, ack_every: int = 1,
                    ack_interval: Optional[float] = None) -> int:
        """For each batch: fn(batch) applies it all (one transaction of the
        receiver's, with batch.last as its stored offset), then the batch
        is acknowledged — every ack_every batches (1: each), or once
        ack_interval seconds passed since the oldest one not acknowledged,
        or when the loop caught up with the topic's head or ends. Above 1,
        what was applied and not acknowledged comes again after a crash
        (at most ack_every batches): only for a receiver that stores its
        offset with its effect and resumes after it (pattern 1; the Reads
        in between start past :attr:`after`, so nothing is read twice
        within one run). fn returning Consumer.STOP ends the loop after
        that. An exception from fn acknowledges nothing of that batch and
        goes up. Returns :attr:`after`."""
        acks = self._acks(ack_every, ack_interval)
        try:
            for b in self.batches(idle_exit=idle_exit):
                step = fn(b)
                self._after = b.last
                acks.applied(b)
                if step == self.STOP:
                    break
        finally:
            acks.flush()
        return self._after

    def run(self, fn: Callable[[Event], Any], *,
            idle_exit: Optional[float] = None, ack_every: int = 1,
            ack_interval: Optional[float] = None) -> int:
        """The receiver loop (once_consumer_run): subscribes, reads, hands
        each event to fn in offset order and acknowledges exactly the
        events fn returned from (when, as :meth:`run_batches` says for
        ack_every and ack_interval). fn answers None or Consumer.NEXT
        (applied, go on) or Consumer.STOP (applied: acknowledge and
        return); an exception means not applied: the events before it are
        acknowledged and the exception goes up (that event comes again).
        Returns when fn says STOP or no event came for idle_exit seconds;
        returns :attr:`after`."""
        acks = self._acks(ack_every, ack_interval)
        try:
            for b in self.batches(idle_exit=idle_exit):
                step = None
                try:
                    for ev in b:
                        step = fn(ev)
                        self._after = ev.offset
                        if step == self.STOP:
                            break
                    else:
                        self._after = b.last
                finally:
                    acks.applied(b)
                if step == self.STOP:
                    break
        finally:
            acks.flush()
        return self._after


class _DeferredAcks:
    """When a loop acknowledges what its receiver applied (up to the
    Consumer's ``after``): every ack_every batches, after ack_interval
    seconds, when caught up with the head, and at the end."""

    def __init__(self, cons: Consumer, every: int,
                 interval: Optional[float]) -> None:
        self.cons = cons
        self.every = every
        self.interval = interval
        self.acked = 0  # the highest offset this loop acknowledged
        self.batches = 0  # applied since then
        self.oldest = 0.0  # when the first of them was applied

    def applied(self, b: Batch) -> None:
        if self.cons.after <= max(self.acked, b.acked):
            return
        if self.batches == 0:
            self.oldest = time.monotonic()
        self.batches += 1
        if (self.batches >= self.every or self.cons.after >= b.head or
                (self.interval is not None and
                 time.monotonic() - self.oldest >= self.interval)):
            self.flush()

    def flush(self) -> None:
        if self.batches > 0 and self.cons.after > self.acked:
            self.cons._ack_lazily(self.cons.after)
            self.acked = self.cons.after
        self.batches = 0
