"""test_check.py — the history checker (check.py) on hand-made histories:
valid ones accepted, and each kind of violation flagged (a lost write, a
duplicate apply, a stale read, two open grants, a lease that came back, a
CAS that saw an old value, a KV call applied twice, an outbox gap, a
repeat, an append read twice or never).

Owns: nothing beyond its asserts (histories are built in memory or in
pytest's tmp_path).
Invariant: no onced, no network; Debian's python3 and pytest only.
Never: changes a history to make the checker pass.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check  # noqa: E402
from history import Op  # noqa: E402


class H:
    """A history under construction; times in ms, stored in ns."""

    def __init__(self):
        self.ops = []

    def add(self, op, key, t0, t1, result="ok", val=None, process=0,
            cid=0, **args):
        o = Op(id=len(self.ops) + 1, process=process, op=op, key=key,
               invoke=int(t0 * 1e6),
               complete=None if t1 is None else int(t1 * 1e6),
               result=result, value=val, args=args, client=cid)
        self.ops.append(o)
        return o

    def incr(self, t0, t1, value, rpc, result="ok", key="c", delta=1, p=0):
        cid = int(rpc.split(":")[0])
        return self.add("incr", key, t0, t1, result, value, p, cid,
                        delta=delta, rpc=rpc)

    def read(self, t0, t1, value, key="c", final=False, p=9):
        args = {"final": True} if final else {}
        return self.add("read", key, t0, t1, "ok", value, p, **args)

    def verdict(self):
        return check.check(self.ops)


def checks_failed(res):
    return sorted({v.check for v in res["violations"]})


# ---- valid histories ------------------------------------------------------


def test_sequential_and_concurrent_increments_are_valid():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 30, 2, "1:2")
    # two concurrent calls may take effect in either order
    h.incr(40, 60, 4, "1:3", p=0)
    h.incr(45, 55, 3, "2:1", p=1)
    h.read(50, 70, 4)
    h.read(80, 90, 4, final=True)
    res = h.verdict()
    assert res["verdict"] == "valid", res["violations"]


def test_unknown_increments_may_or_may_not_apply():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 25, None, "1:2", result="unknown")  # applied (read says 3)
    h.incr(30, 40, 3, "1:3")
    h.incr(50, 55, None, "1:4", result="unknown")  # never applied
    h.read(100, 110, 3, final=True)
    res = h.verdict()
    assert res["verdict"] == "valid", res["violations"]


def test_retry_of_one_rpc_id_replaying_its_value_is_valid():
    h = H()
    h.incr(0, 10, None, "1:1", result="unknown")
    h.incr(12, 20, 1, "1:1")  # the retry gets the stored result
    h.incr(22, 25, 1, "1:1")  # and a resend too
    h.incr(30, 40, 2, "1:2")
    h.read(50, 60, 2, final=True)
    assert h.verdict()["verdict"] == "valid"


def test_failed_calls_are_left_out():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 30, None, "1:2", result="fail")  # NOT_LEADER: never ran
    h.read(40, 50, 1, final=True)
    assert h.verdict()["verdict"] == "valid"


def test_grants_one_after_another_are_valid():
    h = H()
    h.add("grant_request", "s", 0, 10, "ok", 7, request_id="a", rpc="1:1")
    h.add("grant_finish", "s", 20, 30, "ok", None, grant_id=7, rpc="1:2")
    h.add("grant_request", "s", 25, 40, "ok", 8, request_id="b", rpc="2:1")
    h.add("grant_request", "s", 27, 35, "fail", None, request_id="c",
          rpc="3:1")
    assert h.verdict()["verdict"] == "valid"


def test_cas_register_valid():
    h = H()
    h.add("put", "k", 0, 10, "ok", None, value="a")
    h.add("cas", "k", 20, 30, "ok", True, expect="a", value="b")
    h.add("cas", "k", 25, 35, "ok", False, expect="a", value="c")
    h.add("get", "k", 40, 50, "ok", "b")
    assert h.verdict()["verdict"] == "valid"


def test_many_unknowns_stay_fast():
    # 40 processes, 1200 increments, one in ten unknown: the symmetry of
    # unknown twins keeps the search polynomial.
    rng = random.Random(7)
    h = H()
    t, v = 0.0, 0
    for i in range(1200):
        t += rng.random()
        unknown = rng.random() < 0.1
        if not unknown or rng.random() < 0.5:
            v += 1
        h.incr(t, t + 0.5, None if unknown else v, f"{i % 40 + 1}:{i + 1}",
               result="unknown" if unknown else "ok", p=i % 40)
        if i % 10 == 0:
            h.read(t + 0.6, t + 0.7, v)
        t += 1
    h.read(t + 10, t + 11, v, final=True)
    res = h.verdict()
    assert res["verdict"] == "valid", res["violations"][:2]


# ---- violations -----------------------------------------------------------


def test_lost_write_is_flagged():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 30, 2, "1:2")  # acknowledged, then lost (failover)
    h.incr(40, 50, 2, "2:1")  # the next one gets the same value
    h.read(60, 70, 2, final=True)
    assert checks_failed(h.verdict()) == ["exactly-once", "linearizable"]
    # seen only by the final read
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 30, 2, "1:2")
    h.read(60, 70, 1, final=True)
    assert checks_failed(h.verdict()) == ["exactly-once", "linearizable"]


def test_duplicate_apply_is_flagged():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(12, 15, 2, "1:1")  # a resend executed again
    h.read(20, 30, 2, final=True)
    res = h.verdict()
    assert res["verdict"] == "invalid"
    v = [v for v in res["violations"] if v.check == "exactly-once"]
    assert v and "more than once" in v[0].what
    assert {o.id for o in v[0].ops} == {1, 2}


def test_unknown_applied_twice_is_flagged():
    h = H()
    h.incr(0, 10, None, "1:1", result="unknown")
    h.read(20, 30, 2, final=True)  # one unknown call, two effects
    assert checks_failed(h.verdict()) == ["exactly-once", "linearizable"]


def test_stale_read_is_flagged():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 30, 2, "1:2")
    h.read(40, 45, 1)  # begun after 2 was acknowledged: stale
    h.read(60, 70, 2, final=True)
    res = h.verdict()
    assert checks_failed(res) == ["linearizable"]
    v = res["violations"][0]
    # the window names the stale read and the write it missed
    ids = {o.id for o in v.ops}
    assert 3 in ids and 2 in ids
    assert len(v.ops) <= 4


def test_concurrent_read_may_see_either_value():
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.incr(20, 50, 2, "1:2")
    h.read(30, 40, 1)  # concurrent with the second increment: fine
    h.read(45, 48, 2)  # also fine (it took effect before 48)
    h.read(60, 70, 2, final=True)
    assert h.verdict()["verdict"] == "valid"


def test_two_open_grants_are_flagged():
    h = H()
    h.add("grant_request", "s", 0, 10, "ok", 7, request_id="a", rpc="1:1")
    h.add("grant_request", "s", 20, 30, "ok", 8, request_id="b", rpc="2:1")
    h.add("grant_finish", "s", 40, 50, "ok", None, grant_id=7, rpc="1:2")
    res = h.verdict()
    assert checks_failed(res) == ["one-grant"]
    assert {o.id for o in res["violations"][0].ops} >= {1, 2}


def test_lease_that_came_back_is_flagged():
    h = H()
    h.add("lease_close", "", 0, 10, "ok", 0, cid=5, client=5)
    h.incr(20, 30, 1, "5:3")
    res = h.verdict()
    assert checks_failed(res) == ["lease-ended"]


def test_cas_on_stale_value_is_flagged():
    h = H()
    h.add("put", "k", 0, 10, "ok", None, value="a")
    h.add("cas", "k", 20, 30, "ok", True, expect="a", value="b")
    h.add("cas", "k", 40, 50, "ok", True, expect="a", value="c")  # stale
    res = h.verdict()
    assert checks_failed(res) == ["linearizable"]


def test_cas_window_is_the_smallest_failing_one():
    """A long valid CAS chain, then a CAS that succeeds on a value already
    replaced: the window holds only the stale CAS and the write it
    missed, cut at the quiet moment before them."""
    h = H()
    h.add("put", "k", 0, 10, "ok", 1, value="v0", rpc="1:1")
    t = 20
    for n in range(1, 30):
        h.add("cas", "k", t, t + 5, "ok", True, expect=f"v{n - 1}",
              value=f"v{n}", rpc=f"1:{n + 1}")
        h.add("get", "k", t + 6, t + 8, "ok", f"v{n}", process=9)
        t += 10
    missed = h.add("cas", "k", t, t + 5, "ok", True, expect="v29",
                   value="x", rpc="2:1", process=1)
    stale = h.add("cas", "k", t + 10, t + 15, "ok", True, expect="v29",
                  value="y", rpc="3:1", process=2)
    res = h.verdict()
    assert checks_failed(res) == ["linearizable"]
    v = res["violations"][0]
    assert {o.id for o in v.ops} == {missed.id, stale.id}, \
        [o.describe() for o in v.ops]
    # and it fails on its own, from any starting value
    free = type("Free", (check.RegisterModel,), {"init": check.ANY})
    assert not check.linearizable(v.ops, free, shrinking=False)[0]


def test_kv_call_applied_twice_is_flagged():
    """A resent CAS or put executed again (a broken replay): the same rpc
    id answered with two values."""
    h = H()
    h.add("cas", "k", 0, 10, "ok", True, expect=None, value="a", rpc="1:1")
    h.add("cas", "k", 20, 30, "ok", False, expect=None, value="a",
          rpc="1:1")
    h.add("put", "j", 40, 50, "ok", 3, value="b", rpc="1:2")
    h.add("put", "j", 60, 70, "ok", 4, value="b", rpc="1:2")
    res = h.verdict()
    assert checks_failed(res) == ["exactly-once"]
    assert sorted(v.key for v in res["violations"]) == ["j", "k"]
    # answered from the record (the same values): valid
    h.ops[1].value, h.ops[3].value = True, 3
    assert h.verdict()["verdict"] == "valid", h.verdict()["violations"]


def read_q(h, t, acked, offsets, final=False):
    ev = [[off, f"{off}:1:0"] for off in offsets]
    args = {"final": True} if final else {}
    return h.add("outbox_read", "t/q", t, t + 5, "ok",
                 {"acked": acked, "head": max(offsets, default=acked),
                  "events": ev}, **args)


def test_outbox_in_order_with_redelivery_is_valid():
    h = H()
    for off in (1, 2, 3):
        h.add("outbox_append", "t", off * 10, off * 10 + 2, "ok", off,
              rpc=f"{off}:1", payload="p")
    read_q(h, 50, 0, [1, 2])
    h.add("outbox_ack", "t/q", 60, 62, "unknown", None, offset=2, rpc="9:1")
    read_q(h, 70, 0, [1, 2, 3])  # the Ack did not land: read again
    h.add("outbox_ack", "t/q", 80, 82, "ok", 3, offset=3, rpc="9:2")
    read_q(h, 90, 3, [], final=True)
    res = h.verdict()
    assert res["verdict"] == "valid", res["violations"]


def test_outbox_gap_and_repeat_are_flagged():
    # a gap inside one Read
    h = H()
    read_q(h, 0, 0, [1, 2, 4])
    res = h.verdict()
    assert checks_failed(res) == ["outbox-dense"]
    assert "a gap" in res["violations"][0].what
    # a repeat: the Ack up to 2 answered ok, then 2 delivered again
    h = H()
    read_q(h, 0, 0, [1, 2])
    h.add("outbox_ack", "t/q", 10, 12, "ok", 2, offset=2, rpc="9:1")
    read_q(h, 20, 1, [2, 3])
    res = h.verdict()
    assert checks_failed(res) == ["outbox-dense"]
    assert "a repeat" in res["violations"][0].what
    assert {o.id for o in res["violations"][0].ops} == {2, 3}
    # one append, two events (a Txn applied twice)
    h = H()
    h.add("outbox_append", "t", 0, 5, "ok", 1, rpc="1:1", payload="p")
    r = read_q(h, 10, 0, [1, 2])
    r.value["events"] = [[1, "1:1:0"], [2, "1:1:0"]]
    res = h.verdict()
    assert checks_failed(res) == ["outbox-dense"]
    assert "two events" in res["violations"][0].what
    # drained, but an acknowledged append never read; and a hole
    h = H()
    h.add("outbox_append", "t", 0, 5, "ok", 3, rpc="3:1", payload="p")
    read_q(h, 10, 0, [1, 2])
    h.add("outbox_ack", "t/q", 20, 22, "ok", 2, offset=2, rpc="9:1")
    read_q(h, 30, 4, [5])
    read_q(h, 40, 5, [], final=True)
    whats = [v.what for v in h.verdict()["violations"]]
    assert any("never read" in w for w in whats), whats
    assert any("offsets [3, 4] were never read" in w for w in whats), whats


# ---- the program ----------------------------------------------------------


def run_cli(tmp_path, h):
    path = tmp_path / "h.jsonl"
    with open(path, "w") as f:
        f.write(json.dumps({"type": "meta", "seed": 1}) + "\n")
        for o in h.ops:
            f.write(json.dumps(o.to_json()) + "\n")
        f.write(json.dumps({"type": "fault", "kind": "kill_onced_leader",
                            "target": "r0", "start": 1, "end": 2}) + "\n")
    return subprocess.run([sys.executable, os.path.join(HERE, "check.py"),
                           str(path), "--json", str(tmp_path / "v.json")],
                          capture_output=True, text=True, timeout=60)


def test_cli_exit_status_and_window(tmp_path):
    h = H()
    h.incr(0, 10, 1, "1:1")
    h.read(80, 90, 1, final=True)
    r = run_cli(tmp_path, h)
    assert r.returncode == 0 and "verdict: valid" in r.stdout, r.stdout
    h.read(40, 45, 0)  # stale
    r = run_cli(tmp_path, h)
    assert r.returncode == 1 and "verdict: invalid" in r.stdout
    assert "[linearizable] c" in r.stdout and "#3 " in r.stdout
    v = json.load(open(tmp_path / "v.json"))
    assert v["verdict"] == "invalid" and v["violations"][0]["ops"]


def simulated(seed, n=300, procs=6, stale_at=None):
    """A concurrent counter history made from a real order: each op takes
    effect at a random point inside its interval. stale_at: that read
    (by index) returns the value before the previous increment."""
    rng = random.Random(seed)
    h = H()
    free = [0.0] * procs
    events = []
    for i in range(n):
        p = rng.randrange(procs)
        t0 = free[p] + rng.random()
        t1 = t0 + rng.random() * 1.5
        free[p] = t1
        events.append((rng.uniform(t0, t1), i, p, t0, t1,
                       "incr" if rng.random() < 0.6 else "read"))
    v, stale = 0, stale_at is not None
    for at, i, p, t0, t1, kind in sorted(events):
        if kind == "incr":
            v += 1
            h.incr(t0, t1, v, f"{p + 1}:{i + 1}", p=p)
        else:
            late = stale and i >= stale_at and v >= 3
            stale = stale and not late
            h.read(t0, t1, v - 3 if late else v, p=p)
    return h


def test_random_real_orders_are_valid():
    for seed in range(20):
        assert simulated(seed).verdict()["verdict"] == "valid", seed


def test_random_stale_read_window_fails_on_its_own():
    found, sizes = 0, []
    for seed in range(20):
        h = simulated(seed, stale_at=150)
        res = h.verdict()
        if res["verdict"] == "valid":
            continue  # a read concurrent with those three increments
        found += 1
        v = res["violations"][0]
        assert v.check == "linearizable"
        sizes.append(len(v.ops))
        # the window fails on its own: from any value when cut at a quiet
        # moment, from 0 when it starts with the history
        free = type("Free", (check.CounterModel,), {"init": check.ANY})
        start = v.ops[0].invoke == min(o.invoke for o in h.ops)
        model = check.CounterModel if start else free
        assert not check.linearizable(v.ops, model, shrinking=False)[0]
    assert found >= 15
    assert min(sizes) <= 10, sizes
