"""test_py_grants.py — start grants through the Python API against a real
onced: one open grant per surface, the same grant on a retry, a conflict on
another input, a claim never takes another machine's row, credentials
checked offline; signed requests with key files (an agent may act for its
own machine only); and the kept-input store across a lost answer."""
from __future__ import annotations

import signal

import pytest

import once

from conftest import PAST_PENDING_MAX_MS, SLOW, wait_for


def test_grant_rules(onced):
    with once.Client(onced.url) as c:
        gen = c.set_placement("db-1", "m1", "/data/db-1").generation
        first = c.request_grant("job-1", "db-1", "m1", "/data/db-1", gen,
                                payload=b"input-1")
        g = first.grant
        assert not first.existing and g.state == once.messages.GRANT_OPEN
        assert (g.surface, g.machine, g.request_id) == ("db-1", "m1", "job-1")

        # One open grant per surface: another request is refused.
        with pytest.raises(once.AlreadyOwned) as ei:
            c.request_grant("job-2", "db-1", "m1", "/data/db-1", gen)
        assert (ei.value.code, ei.value.reason) == (
            once.Code.FAILED_PRECONDITION, "ALREADY_OWNED")
        assert ei.value.rpc_id is not None

        # The same request again (a new rpc id): the same grant.
        again = c.request_grant("job-1", "db-1", "m1", "/data/db-1", gen,
                                payload=b"input-1")
        assert again.existing and again.grant.grant_id == g.grant_id

        # The same (request_id, attempt) with another input: a conflict.
        with pytest.raises(once.GrantConflict) as ei:
            c.request_grant("job-1", "db-1", "m1", "/data/db-1", gen,
                            payload=b"other")
        assert (ei.value.code, ei.value.reason) == (once.Code.ALREADY_EXISTS,
                                                    "GRANT_CONFLICT")

        # Credentials check offline with the server's key.
        pk = c.public_key()
        info = once.verify_credential(pk, first.credential)
        assert (info.grant_id, info.surface, info.epoch) == (g.grant_id,
                                                            "db-1", g.epoch)
        with pytest.raises(once.BadCredential):
            once.verify_credential(pk, (first.credential.body + b"x",
                                        first.credential.signature))
        with pytest.raises(once.StaleEpoch):
            c.verify_credential(first.credential, min_epoch=g.epoch + 1)
        with pytest.raises(once.CredentialExpired) as ei:
            c.verify_credential(first.credential,
                                now_unix_ms=info.expires_unix_ms)
        assert ei.value.credential.grant_id == g.grant_id

        # Renew under the same grant, then finish: the surface is free.
        fresh = c.renew_credential(g.grant_id, "m1").credential
        assert c.verify_credential(fresh).grant_id == g.grant_id
        done = c.finish(g.grant_id, "SUCCEEDED").grant
        assert done.state == once.messages.GRANT_FINISHED
        assert done.outcome == once.messages.SUCCEEDED
        s = c.get_surface("db-1")
        assert not s.HasField("open_grant")
        assert [h.grant_id for h in s.history] == [g.grant_id]
        assert any(r.reason == "ALREADY_OWNED" for r in s.rejections)
        c.request_grant("job-2", "db-1", "m1", "/data/db-1", gen)


def test_claim_never_takes_another_machines_row(onced):
    with once.Client(onced.url) as c:
        c.set_placement("s-a", "m1", "/a")
        c.set_placement("s-b", "m2", "/b")
        row_a = c.enqueue("w-a", "s-a", payload=b"a").row
        row_b = c.enqueue("w-b", "s-b", payload=b"b").row
        assert (row_a.machine, row_b.machine) == ("m1", "m2")
        got = c.claim("m1")
        assert [x.row.work_id for x in got.claimed] == [row_a.work_id]
        assert all(x.row.machine == "m1" for x in got.claimed)
        assert [r.work_id for r in c.list_queue("m2").pending] == \
            [row_b.work_id]
        assert len(c.claim("m1").claimed) == 0  # nothing more for m1
        got_b = c.claim("m2")
        assert [x.row.work_id for x in got_b.claimed] == [row_b.work_id]



def test_queue_keeps_the_grant_rules(onced):
    """A resent enqueue of an accepted request while its grant is open is
    answered with that grant, and no later claim hands it out again; other
    input under the same (request_id, attempt) raises GrantConflict at
    once, as request_grant does."""
    with once.Client(onced.url) as c:
        c.set_placement("q-s", "m1", "/q")
        c.enqueue("q-job", "q-s", payload=b"in")
        (got,) = c.claim("m1").claimed
        gid = got.grant.grant_id
        again = c.enqueue("q-job", "q-s", payload=b"in").row
        assert again.grant_id == gid
        assert again.state == once.messages.WorkRow.CLAIMED
        for _ in range(2):
            assert len(c.claim("m1").claimed) == 0
        assert c.get_surface("q-s").open_grant.grant_id == gid
        with pytest.raises(once.GrantConflict) as ei:
            c.enqueue("q-job", "q-s", payload=b"other")
        assert (ei.value.code, ei.value.reason) == (once.Code.ALREADY_EXISTS,
                                                    "GRANT_CONFLICT")
        assert any(r.reason == "GRANT_CONFLICT" and r.request_id == "q-job"
                   for r in c.get_surface("q-s").rejections)

        # A pending row replaced by a newer request is on the surface's log.
        c.set_placement("r-s", "m2", "/r")
        c.enqueue("r-old", "r-s", payload=b"a")
        assert c.enqueue("r-new", "r-s", payload=b"b").replaced
        (rej,) = c.get_surface("r-s").rejections
        assert (rej.request_id, rej.reason, rej.via) == ("r-old", "REPLACED",
                                                         "queue")
        assert "r-new" in rej.message

def test_signed_requests_with_key_files(onced_factory):
    o = onced_factory(dev=True)
    sched_key = o.principal("sched1", "scheduler")
    agent_key = o.principal("agent-m1", "agent:m1")
    with once.Client(o.url, key_file=o.dev_key) as op:
        op.set_placement("s1", "m1", "/x")
        op.set_placement("s2", "m2", "/y")
        assert op.stats().requests > 0
    with once.Client(o.url, key_file=sched_key) as sched:
        assert sched.lease_info().principal == "sched1"
        sched.enqueue("w1", "s1")
        sched.enqueue("w2", "s2")
        with pytest.raises(once.PermissionDenied) as ei:
            sched.stats()  # Admin is for operators
        assert ei.value.reason == "METHOD_DENIED"
        with pytest.raises(once.PermissionDenied):
            sched.claim("m1")  # agents claim
    with once.Client(o.url, key_file=agent_key) as agent:
        with pytest.raises(once.PermissionDenied) as ei:
            agent.claim("m2")  # not its machine
        assert ei.value.reason == "WRONG_MACHINE"
        got = agent.claim("m1")
        assert [x.row.request_id for x in got.claimed] == ["w1"]
        gid = got.claimed[0].grant.grant_id
        agent.renew_credential(gid, "m1")
        agent.finish(gid, "SUCCEEDED")
    # Unsigned: refused by authentication (the lease cannot even open).
    with pytest.raises(once.Unauthenticated):
        once.Client(o.url)
    # The key itself instead of the file.
    line = [x for x in open(sched_key) if not x.startswith("#")][0]
    name, hexkey = line.split()
    with once.Client(o.url, principal=name, key=bytes.fromhex(hexkey)) as k:
        assert k.lease_info().principal == "sched1"
    with pytest.raises(once.Unauthenticated):
        once.Client(o.url, principal=name, key=bytes(32))


def test_kept_inputs_survive_a_lost_answer(onced, tmp_path):
    store_dir = str(tmp_path / "inputs")
    with once.Client(onced.url) as c:
        gen = c.set_placement("k1", "m1", "/k").generation
        c.set_placement("k2", "m1", "/k2")
    # First life: the answer never comes (onced stopped), so the input
    # stays PENDING with its rpc id; the process then goes away.
    first = once.Client(onced.url, lease_ttl_ms=60_000, max_attempts=2,
                        attempt_timeout_ms=200 * SLOW,
                        deadline_ms=600 * SLOW)
    with once.InputStore(store_dir) as store:
        onced.stop_signal(signal.SIGSTOP)
        try:
            with pytest.raises(once.OutcomeUnknown) as ei:
                store.submit_grant(first, "req-1", "k1", "m1", "/k", gen,
                                   payload=b"in")
            with pytest.raises(once.OnceError):
                store.submit_work(first, "wk-1", "k2", payload=b"w")
        finally:
            onced.stop_signal(signal.SIGCONT)
        rid = ei.value.rpc_id
        kept = {k.request_id: k for k in store.list()}
        assert set(kept) == {"req-1", "wk-1"}
        assert kept["req-1"].state == once.InputState.PENDING
        assert kept["req-1"].rpc_id == rid
        assert kept["req-1"].kind == once.InputKind.START
        assert kept["wk-1"].kind == once.InputKind.ENQUEUE
    first.close()  # an unknown seq: its lease is left to the TTL

    # Second life: a new client resumes with the recorded ids.
    with once.Client(onced.url) as c, once.InputStore(store_dir) as store:
        assert c.client_id != rid.client_id
        rep = store.resume(c)
        assert rep.accepted == 2 and rep.pending == 0
        by_id = {r.input.request_id: r for r in rep.resumed}
        g = by_id["req-1"].response
        assert isinstance(g, once.grants_pb2.RequestGrantResponse)
        assert by_id["req-1"].input.rpc_id == rid
        assert isinstance(by_id["wk-1"].response,
                          once.grants_pb2.EnqueueResponse)
        assert store.list() == []
        s = c.get_surface("k1")
        assert s.open_grant.grant_id == g.grant.grant_id
        assert len(s.history) == 0  # one grant, not two
        assert len(c.list_queue("m1").pending) == 1

        # A refused input is kept REJECTED and never re-sent by itself.
        with pytest.raises(once.AlreadyOwned):
            store.submit_grant(c, "req-2", "k1", "m1", "/k", gen)
        (k,) = store.list()
        assert (k.request_id, k.state, k.reason) == (
            "req-2", once.InputState.REJECTED, "ALREADY_OWNED")
        assert store.resume(c).resumed == []
        with pytest.raises(once.FailedPrecondition):
            store.resend(c, "req-2")
        store.forget("req-2")
        with pytest.raises(once.NotFound):
            store.forget("req-2")
        assert store.list() == []


# ---- ListSurfaces: the operator's list of surfaces ---------------------------

def _listed_by_get_surface(c, names):
    """The surfaces of names that ListSurfaces must list, read one by one
    with GetSurface: an open grant or holder, a pending row, rejections."""
    out = []
    for n in sorted(names):
        s = c.get_surface(n)
        pending = s.HasField("pending") and \
            s.pending.state == once.messages.WorkRow.PENDING
        if s.HasField("open_grant") or s.legacy_holder or pending \
                or len(s.rejections) > 0:
            out.append(n)
    return out


def _surface_scenario(c):
    """Surfaces in every state ListSurfaces tells apart; returns all names."""
    names = []
    for i in range(6):  # open grants on m1/m2
        n = f"open-{i}"
        gen = c.set_placement(n, f"m{1 + i % 2}", f"/o{i}").generation
        c.request_grant(f"r-{n}", n, f"m{1 + i % 2}", f"/o{i}", gen)
        names.append(n)
    # A rejection on open-0 (ALREADY_OWNED) and one on open-1, twice.
    with pytest.raises(once.AlreadyOwned):
        c.request_grant("late", "open-0", "m1", "/o0", 1)
    for _ in range(2):
        with pytest.raises(once.FailedPrecondition):
            c.request_grant("stale", "open-1", "m2", "/o1", 99)
    for i in range(7):  # closed grants only: not listed
        n = f"closed-{i}"
        gen = c.set_placement(n, "m1", "/c").generation
        g = c.request_grant(f"r-{n}", n, "m1", "/c", gen).grant
        c.finish(g.grant_id, "SUCCEEDED")
        names.append(n)
    c.set_placement("placed-only", "m3", "/p")  # not listed
    names.append("placed-only")
    c.set_placement("queued", "m3", "/q")
    c.enqueue("w-q", "queued")  # a pending row only
    names.append("queued")
    with pytest.raises(once.FailedPrecondition):  # NO_PLACEMENT, logged
        c.request_grant("r-nowhere", "rejected-only", "m1", "/n", 1)
    names.append("rejected-only")
    c.legacy_claim("legacy", "old-holder")
    names.append("legacy")
    return names


def test_list_surfaces_pages_through_what_get_surface_shows(onced):
    with once.Client(onced.url) as c:
        empty = c.list_surfaces()
        assert list(empty.surfaces) == [] and empty.next_page_token == ""
        names = _surface_scenario(c)
        want = _listed_by_get_surface(c, names)
        assert "placed-only" not in want and "closed-0" not in want
        assert len(want) == 9, want
        # Small pages: each at most 2 surfaces (some fewer: a page looks at
        # 4 names per prefix and page size at most), every surface once,
        # in order, the walk ending with an empty token.
        got, token, pages = [], "", 0
        while True:
            page = c.list_surfaces(page_size=2, page_token=token)
            assert len(page.surfaces) <= 2
            got += [s.surface for s in page.surfaces]
            pages += 1
            token = page.next_page_token
            if not token:
                break
            assert pages < 50, "the walk does not end"
        assert got == want, (got, want)
        assert pages >= 5
        # One big page: the same, and each field as GetSurface has it.
        page = c.list_surfaces(page_size=100)
        assert [s.surface for s in page.surfaces] == want
        assert page.next_page_token == ""
        assert page.read_unix_ms > 0
        for x in page.surfaces:
            s = c.get_surface(x.surface)
            assert x.HasField("open_grant") == s.HasField("open_grant")
            if s.HasField("open_grant"):
                assert (x.open_grant.grant_id, x.open_grant.machine,
                        x.open_grant.epoch) == (s.open_grant.grant_id,
                                                s.open_grant.machine,
                                                s.open_grant.epoch)
            assert (x.epoch, x.machine, x.generation, x.legacy_holder) == \
                (s.epoch, s.machine, s.generation, s.legacy_holder)
            assert x.rejections_kept == len(s.rejections)
            assert [(r.reason, r.request_id, r.repeats)
                    for r in x.last_rejections] == \
                [(r.reason, r.request_id, r.repeats)
                 for r in reversed(s.rejections)][:5]
            pend = s.HasField("pending") and \
                s.pending.state == once.messages.WorkRow.PENDING
            assert x.pending_work_id == (s.pending.work_id if pend else 0)
        by = {x.surface: x for x in page.surfaces}
        assert [r.reason for r in by["open-0"].last_rejections] == \
            ["ALREADY_OWNED"]
        assert [(r.reason, r.repeats)
                for r in by["open-1"].last_rejections] == \
            [("PLACEMENT_CHANGED", 1)]
        assert (by["queued"].pending_machine, by["legacy"].legacy_holder) == \
            ("m3", "old-holder")
        assert [s.surface for s in c.each_surface(page_size=1)] == want


def _collector_quiet(c):
    """Waits for a collector pass that committed nothing: the records the
    scenario's calls acknowledged are reclaimed by then (each reclaim is a
    commit, and it would otherwise land in the middle of a check that
    nothing is written)."""
    def pass_without_commit():
        a = c.stats()
        wait_for(lambda: c.stats().gc_passes > a.gc_passes, 30 * SLOW,
                 "a collector pass")
        return c.stats().commits == a.commits
    wait_for(pass_without_commit, 60 * SLOW,
             "a collector pass that commits nothing", 0)


def _refuses_bad_pages(c, list_page, field, tpfx):
    """list_page refuses page tokens no page of its returned (malformed,
    or the other list's form around a name it returned) and a page_size
    above 100, writing nothing; returns its largest page afterwards."""
    _collector_quiet(c)
    before = (c.stats(), list_page(page_size=100))
    token = list_page(page_size=1).next_page_token
    assert token.startswith(tpfx), token
    other_form = "ls1." if tpfx == "lm1." else "lm1."
    for bad in ["nonsense", tpfx, tpfx + "zz", tpfx + "abc", tpfx + "00",
                tpfx + "6100", tpfx + "0a", tpfx + "61" * 257, token[:-1],
                token + "x", other_form + token[4:]]:
        with pytest.raises(once.InvalidArgument) as ei:
            list_page(page_token=bad)
        assert ei.value.reason == "BAD_PAGE_TOKEN", bad
    with pytest.raises(once.InvalidArgument) as ei:
        list_page(page_size=101)
    assert ei.value.reason == "BAD_LIMIT"
    after = (c.stats(), list_page(page_size=100))
    # Nothing written: no record kept, no commit, the same list.
    assert after[0].records_stored == before[0].records_stored
    assert after[0].commits == before[0].commits
    assert getattr(after[1], field) == getattr(before[1], field)
    return after[1]


def test_list_surfaces_refuses_bad_pages_and_writes_nothing(onced):
    with once.Client(onced.url) as c:
        _surface_scenario(c)
        after = _refuses_bad_pages(c, c.list_surfaces, "surfaces", "ls1.")
        assert len(after.surfaces) == 9  # the largest page is fine


def test_the_lists_are_for_operators(onced_factory):
    """ListSurfaces and ListMachines: operators only by default."""
    o = onced_factory(dev=True)
    sched_key = o.principal("sched-ls", "scheduler")
    agent_key = o.principal("agent-ls", "agent:m1")
    with once.Client(o.url, key_file=o.dev_key) as op:
        op.set_placement("s1", "m1", "/x")
        op.request_grant("r1", "s1", "m1", "/x", 1)
        op.set_placement("s2", "m2", "/x")
        op.enqueue("w2", "s2")
        assert [s.surface for s in op.list_surfaces().surfaces] == \
            ["s1", "s2"]
        assert [x.machine for x in op.list_machines().machines] == ["m2"]
    for key in (sched_key, agent_key):
        with once.Client(o.url, key_file=key) as other:
            for refused in (other.list_surfaces, other.list_machines):
                with pytest.raises(once.PermissionDenied) as ei:
                    refused()
                assert ei.value.reason == "METHOD_DENIED", refused
            if key == sched_key:
                other.get_surface("s1")  # its own reads stay allowed
                other.list_queue("m2")


# ---- ListMachines: the operator's list of machines ---------------------------

PENDING_MAX_MS = 12 * 3600 * 1000


def _listed_by_list_queue(c, machines):
    """What ListMachines must say of machines, read one by one with
    ListQueue: (machine, pending, expired, newest expiry, deleted) of those
    with pending or expired rows, or deleted."""
    out = []
    for m in sorted(machines):
        q = c.list_queue(m)
        if q.pending or q.expired or q.machine_deleted:
            newest = q.expired[-1].enqueued_unix_ms + PENDING_MAX_MS \
                if q.expired else 0
            out.append((m, len(q.pending), len(q.expired), newest,
                        q.machine_deleted))
    return out


def _summary(x):
    return (x.machine, x.pending, x.expired, x.newest_expired_unix_ms,
            x.deleted)


def _queue(c, surface, machine):
    c.set_placement(surface, machine, "/" + surface)
    return c.enqueue("w-" + surface, surface).row.enqueued_unix_ms


def _queue_machines(c):
    """Machines with pending rows, all claimed, deleted; returns the
    enqueue times of the two rows on m-exp."""
    for i in range(4):  # pending rows only
        _queue(c, f"q{i}", f"m-q{i}")
    _queue(c, "q4", "m-q0")  # two on m-q0
    exp = [_queue(c, "e0", "m-exp"), _queue(c, "e1", "m-exp")]
    _queue(c, "b0", "m-both")
    for m in ["m-done"] + [f"m-c{i}" for i in range(5)]:
        _queue(c, "s-" + m, m)
        assert len(c.claim(m).claimed) == 1  # all claimed: not listed
    _queue(c, "x0", "m-del")
    c.delete_machine("m-del")  # deleted, no rows left
    c.delete_machine("m-never")  # deleted, never had a row
    return exp


MACHINES = [f"m-q{i}" for i in range(4)] + [f"m-c{i}" for i in range(5)] + \
    ["m-exp", "m-both", "m-done", "m-del", "m-never"]


def _machine_scenario(url, clock):
    """Machines in every state ListMachines tells apart (_queue_machines,
    then m-exp's rows expired, m-both's one expired and one pending);
    returns the enqueue times of m-exp's rows."""
    with once.Client(url) as c:
        exp = _queue_machines(c)
    clock.set(PAST_PENDING_MAX_MS)  # the rows above wait 13 hours...
    with once.Client(url) as c:  # ...and expire when their machine claims
        for m in ("m-exp", "m-both"):
            assert len(c.claim(m).expired) == (2 if m == "m-exp" else 1)
    clock.set(0)
    with once.Client(url) as c:
        _queue(c, "b1", "m-both")  # pending again next to its expired row
    return exp


def test_list_machines_pages_through_what_list_queue_shows(clocked):
    o, clock = clocked()
    with once.Client(o.url) as c:
        empty = c.list_machines()
        assert list(empty.machines) == [] and empty.next_page_token == ""
        assert list(c.each_machine(page_size=1)) == []
    exp = _machine_scenario(o.url, clock)
    with once.Client(o.url) as c:
        want = _listed_by_list_queue(c, MACHINES)
        by = {w[0]: w for w in want}
        assert "m-done" not in by and len(want) == 8, want
        assert by["m-exp"] == ("m-exp", 0, 2, max(exp) + PENDING_MAX_MS,
                               False)
        assert by["m-both"][1:3] == (1, 1) and by["m-q0"][1] == 2
        assert by["m-del"][1:] == (0, 0, 0, True) == by["m-never"][1:]
        # Small pages: each at most 2 machines, every machine once, in
        # order, the walk ending with an empty token.
        got, token, pages = [], "", 0
        while True:
            page = c.list_machines(page_size=2, page_token=token)
            assert len(page.machines) <= 2
            got += [_summary(x) for x in page.machines]
            pages += 1
            token = page.next_page_token
            if not token:
                break
            assert token.startswith("lm1.") and pages < 50, token
        assert got == want, (got, want)
        assert pages >= 4
        page = c.list_machines(page_size=100)
        assert [_summary(x) for x in page.machines] == want
        assert page.next_page_token == "" and page.read_unix_ms > 0
        assert [_summary(x) for x in c.each_machine(page_size=1)] == want
        # Bounded work: pages of 1 look at 4 names per prefix, so the five
        # claimed machines m-c0..m-c4 in a row make a page with none and a
        # token.
        sizes, token = [], ""
        while True:
            page = c.list_machines(page_size=1, page_token=token)
            sizes.append(len(page.machines))
            token = page.next_page_token
            if not token:
                break
            assert len(sizes) < 50, "the walk does not end"
        assert 0 in sizes[:-1] and sum(sizes) == len(want), sizes
        # A placement undoes a deletion: m-never leaves the list.
        c.set_placement("n0", "m-never", "/n0")
        assert "m-never" not in [x.machine for x in c.each_machine()]


def test_list_machines_refuses_bad_pages_and_writes_nothing(onced):
    # One client throughout: no lease closed whose records the collector
    # would drop (a commit) while the check runs.
    with once.Client(onced.url) as c:
        _queue_machines(c)
        after = _refuses_bad_pages(c, c.list_machines, "machines", "lm1.")
        assert len(after.machines) == 8
