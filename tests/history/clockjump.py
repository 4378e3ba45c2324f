"""clockjump.py — the wall clock of one onced replica jumped forward or
backward while it runs, for the clock-jump nemesis: Debian's libfaketime
preloaded into every replica, each reading its own offset file
(FAKETIME_TIMESTAMP_FILE, "+0" until a jump), re-read at
every reading (FAKETIME_NO_CACHE=1: with a cache of 1 s a step was
seen up to 2 s late, and so was the step back).

Only CLOCK_REALTIME is faked (FAKETIME_DONT_FAKE_MONOTONIC=1): onced
measures every deadline and elapsed time on CLOCK_MONOTONIC
(base/clock.h), which the kernel never steps, while an NTP step or an
operator's `date -s` steps the wall clock; libfaketime by default shifts
CLOCK_MONOTONIC as well, which no real clock does (what that does to
onced is in tests/README.md, "Clock jumps").

Owns: the offset files (in the cluster's folder) and the environment that
points a replica at its file.
Invariant: reset() puts every file back to "+0".
Never: preloads anything into etcd or into the campaign's own process.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional

LIBS = ["/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"]


def library() -> Optional[str]:
    """libfaketime's path, or None when the faketime package is missing."""
    return next((p for p in LIBS if os.path.exists(p)), None)


class Clocks:
    """An offset file per replica; env(i) is replica i's environment."""

    def __init__(self, folder: str, n: int) -> None:
        self.lib = library()
        self.files: List[str] = [f"{folder}/clock{i}" for i in range(n)]
        self.reset()

    def env(self, i: int) -> Dict[str, str]:
        """Replica i's variables; with CAMPAIGN_FAKE_MONOTONIC=1 in the
        campaign's environment CLOCK_MONOTONIC jumps too (libfaketime's
        default; the experiment in tests/README.md, not a real clock)."""
        env = {"LD_PRELOAD": self.lib or "",
               "FAKETIME_TIMESTAMP_FILE": self.files[i],
               "FAKETIME_NO_CACHE": "1",
               "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        if os.environ.get("CAMPAIGN_FAKE_MONOTONIC") == "1":
            del env["FAKETIME_DONT_FAKE_MONOTONIC"]
        return env

    def jump(self, i: int, seconds: int) -> None:
        """Replica i's wall clock offset by seconds (from its next
        reading on)."""
        tmp = self.files[i] + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{seconds:+d}s\n")
        os.replace(tmp, self.files[i])

    def reset(self) -> None:
        for i in range(len(self.files)):
            self.jump(i, 0)
