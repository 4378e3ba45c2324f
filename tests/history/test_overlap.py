"""Unit cases of overlap.py: the claims that keep faults at once off each
other's processes, and the overlapping pairs a run reports."""
from overlap import Claims, overlapping


class FakeCluster:
    def __init__(self) -> None:
        self.heals = 0

    def heal(self):
        self.heals += 1
        return ["r1 exited by itself (status -9)"]


def test_a_claimed_process_is_refused_to_another_thread():
    c = Claims()
    assert c.claim(0, ["r0", "etcd1"])
    assert not c.claim(1, ["etcd1", "r2"])  # etcd1 is thread 0's
    assert c.refused == 1
    assert c.claim(1, ["r2"])  # r2 was not taken by the refused claim
    assert c.claim(0, ["r0", "etcd2"])  # a thread may add to its own
    c.release(0)
    assert c.claim(1, ["r0", "etcd1", "etcd2"])
    assert c.refused == 1


def test_heal_only_while_no_fault_holds_a_claim():
    c, cl = Claims(), FakeCluster()
    c.claim(0, ["r0"])
    assert c.heal_if_idle(cl) == [] and cl.heals == 0
    c.release(0)
    assert c.heal_if_idle(cl) == ["r1 exited by itself (status -9)"]
    assert cl.heals == 1


def f(start, end, kind="kill-replica"):
    return {"kind": kind, "target": "r0", "start": start, "end": end}


def test_overlapping_pairs():
    a, b, c, d = f(0, 10), f(5, 20), f(20, 30), f(25, 26)
    assert overlapping([c, a, d, b]) == [(a, b), (c, d)]
    assert overlapping([f(0, 1), f(1, 2)]) == []  # touching is not at once
