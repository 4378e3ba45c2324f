"""diskfull.py — each onced replica's data folder on a small tmpfs of its
own, for the disk-full nemesis (as root): a follower's tmpfs is filled
with a file until the kernel says ENOSPC, the follower must fail clearly
(its log says so, or it exits), then the file is removed and the
follower, started again when it exited, must come back.

Mounts: `mount -t tmpfs -o size=SIZE once-campaign-<pid> DIR/data<i>`
(the source names the campaign's pid). At start every tmpfs whose source
is once-campaign-<pid> of a pid no longer running is unmounted (what a
SIGKILLed run left); umount_all() runs from the run's finally, atexit
and the SIGTERM/SIGHUP/alarm path through the campaign's handlers.

Owns: the mounts it made and the filler files in them.
Invariant: every mount carries this process's pid; umount_all() is
idempotent and unmounts all of them (lazily when busy: a replica still
holds files) whatever failed before.
Never: mounts outside the cluster's temp folder; unmounts a mount it did
not make (the sweep only dead pids' sources).
"""
from __future__ import annotations

import atexit
import errno
import os
import re
import subprocess
from typing import List

from netns import pid_alive

SIZE_MB = 128
FILLER = "campaign-filler"


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=20)


def sweep() -> List[str]:
    """Unmounts the tmpfs mounts that dead runs left; which."""
    gone = []
    with open("/proc/mounts") as f:
        for line in f:
            src, where = line.split()[:2]
            m = re.fullmatch(r"once-campaign-(\d+)", src)
            if m and not pid_alive(int(m.group(1))):
                run("umount", "-l", where)
                gone.append(where)
    return gone


class Disks:
    """A tmpfs of SIZE_MB under each replica's data folder."""

    def __init__(self, dirs: List[str]) -> None:
        self.dirs = dirs
        self.mounted: List[str] = []
        atexit.register(self.umount_all)

    def mount_all(self) -> None:
        sweep()
        try:
            for d in self.dirs:
                os.makedirs(d, exist_ok=True)
                r = run("mount", "-t", "tmpfs", "-o",
                        f"size={SIZE_MB}m,mode=0700",
                        f"once-campaign-{os.getpid()}", d)
                if r.returncode != 0:
                    raise OSError(f"mount tmpfs on {d}: {r.stderr.strip()}")
                self.mounted.append(d)
        except BaseException:
            self.umount_all()
            raise

    def umount_all(self) -> None:
        for d in self.mounted:
            if run("umount", d).returncode != 0:
                run("umount", "-l", d)
        self.mounted = []

    def free_bytes(self, d: str) -> int:
        st = os.statvfs(d)
        return st.f_bavail * st.f_frsize

    def fill(self, d: str) -> int:
        """Writes a filler file in d until ENOSPC; the bytes written."""
        n = 0
        chunk = b"\0" * (1 << 20)
        with open(os.path.join(d, FILLER), "wb", buffering=0) as f:
            while n < (SIZE_MB + 1) << 20:
                try:
                    n += f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    chunk = chunk[:len(chunk) // 2]
                    if len(chunk) < 4096:
                        break
        return n

    def free(self, d: str) -> None:
        try:
            os.unlink(os.path.join(d, FILLER))
        except FileNotFoundError:
            pass
