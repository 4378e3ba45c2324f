"""overlap.py — faults at once: several nemesis threads of one campaign
(campaign.py --overlap N) and the claims that keep them apart.

Each thread draws its own seeded schedule. Before it acts, a fault claims
the processes it hits (and, for a partition, those on the far side of the
cut link, whose reachability its probes test); a fault whose processes
are claimed by another thread is not made now. So a replica may be killed
while an etcd member is stopped or the leader is cut from its clients,
but two faults never hit one process, and a probe never tests a path
another fault broke. The cluster is healed (every stopped process
continued, every dead one started again) only while no fault holds a
claim, so a heal never ends another thread's fault early, and a process
found dead then died by itself.

Owns: the claims (a set of process names) and the count of faults under
way, behind one lock.
Invariant: a name is claimed by at most one fault at a time; every claim
is released when its fault ends (campaign.py releases in a finally).
Never: makes a fault itself.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Tuple


class Claims:
    def __init__(self) -> None:
        self._mtx = threading.Lock()
        self._held: Dict[str, int] = {}  # process name -> claiming thread
        self.refused = 0  # faults not made because a process was claimed

    def claim(self, who: int, names: List[str]) -> bool:
        """Claims every one of names for thread who, or none of them (and
        False) when another thread holds one."""
        with self._mtx:
            if any(self._held.get(n, who) != who for n in names):
                self.refused += 1
                return False
            for n in names:
                self._held[n] = who
            return True

    def release(self, who: int) -> None:
        with self._mtx:
            for n in [n for n, w in self._held.items() if w == who]:
                del self._held[n]

    def heal_if_idle(self, cluster) -> List[str]:
        """cluster.heal() when no fault holds a claim (else nothing):
        the processes that had died by themselves."""
        with self._mtx:
            if self._held:
                return []
            return cluster.heal()


def overlapping(faults: List[dict]) -> List[Tuple[dict, dict]]:
    """The pairs of faults whose windows intersect (one thread's faults
    never do: they come one after another)."""
    fs = sorted(faults, key=lambda f: f["start"])
    pairs = []
    for i, a in enumerate(fs):
        for b in fs[i + 1:]:
            if b["start"] >= a["end"]:
                break
            pairs.append((a, b))
    return pairs
