#!/usr/bin/python3
"""bench_python.py — what the Python layer costs over the C call under it.

Owns: one onced of its own (temp dir, ipc socket; or --server URL), and,
at each concurrency level, measurements against it in the same run:
bench_calls (the C client, libonce, one shared once_client) and this
script's Python callers (threads sharing one once.Client), each doing
distinct Counter/Increment calls for --seconds; then, to isolate the layer
from the disk (an increment waits for an fsync, whose time varies far more
than the layer costs), Counter/Get reads through once.Client and through
the bare ctypes call of once_counter_get on the same handle. Prints
calls/s and p50/p99 per level and kind and the ratios; --csv writes the
rows.
Invariant: every loop is bounded in time; a Python call is counted only
when it returned OK, and at the end of each level the counters are read
back and must sum to those calls (exactly once, checked); C and Python
alternate order from round to round, so drift of the machine does not
favour one of them.
Never: leaves its onced running.

    /usr/bin/python3 bench/bench_python.py --seconds 5 --rounds 2
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"),
                   help="the build tree (default %(default)s)")
    p.add_argument("--callers", default="1,16")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--server", help="a running onced instead of our own")
    p.add_argument("--csv", help="write the rows here")
    return p.parse_args()


def pct(sorted_ns: List[int], q: float) -> float:
    if not sorted_ns:
        return 0.0
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e3


def run_python(once, url: str, callers: int, seconds: float,
               tag: str, mode: str = "python") -> Dict:
    """Distinct increments through once.Client (mode "python"); reads
    (Counter/Get) through once.Client ("python-read") or through the bare
    ctypes function of libonce on the same handle ("ctypes-read": the C
    call with no once layer above it)."""
    lat: List[List[int]] = [[] for _ in range(callers)]
    ok = [0] * callers
    errors = [0] * callers
    with once.Client(url) as c:
        for i in range(callers):  # warm-up, not timed
            c.counter_get(f"{tag}-{i}")
        start = threading.Barrier(callers + 1)
        stop_at = [0.0]

        def caller(i: int) -> None:
            name = f"{tag}-{i}"
            if mode == "python":
                incr = c.counter_incr
            elif mode == "python-read":
                incr = c.counter_get
            else:
                raw, h = once._lib.lib.once_counter_get, c._h
                cname = name.encode()
                v, st = ctypes.c_int64(), once._lib.once_status()
                pv, pst = ctypes.byref(v), ctypes.byref(st)

                def incr(_n: str) -> None:
                    if raw(h, cname, pv, pst) != 0:
                        raise once.OnceError("", "read failed")
            clock = time.perf_counter_ns
            mine = lat[i]
            start.wait()
            end = stop_at[0]
            n = 0
            while True:
                t0 = clock()
                if t0 >= end:
                    break
                try:
                    incr(name)
                    mine.append(clock() - t0)
                    n += 1
                except once.OnceError:
                    errors[i] += 1
            ok[i] = n

        ts = [threading.Thread(target=caller, args=(i,))
              for i in range(callers)]
        for t in ts:
            t.start()
        t_begin = time.perf_counter_ns()
        stop_at[0] = t_begin + int(seconds * 1e9)
        start.wait()
        for t in ts:
            t.join(timeout=seconds + 60)
        elapsed = (time.perf_counter_ns() - t_begin) / 1e9
        total = sum(c.counter_get(f"{tag}-{i}") for i in range(callers))
    calls = sum(ok)
    all_ns = sorted(x for l in lat for x in l)
    if mode != "python":
        total = calls  # reads change nothing
    return dict(kind=mode, callers=callers, calls=calls,
                errors=sum(errors), seconds=elapsed,
                calls_per_s=calls / elapsed, p50_us=pct(all_ns, 0.5),
                p99_us=pct(all_ns, 0.99), exactly_once=int(total == calls))


def run_c(bench_calls: str, url: str, callers: int, seconds: float,
          tmp: Path) -> Dict:
    out = tmp / f"c-{callers}.csv"
    subprocess.run([bench_calls, "--server", url, "--callers", str(callers),
                    "--seconds", str(max(1, round(seconds))), "--clients",
                    "shared", "--no-baselines", "--no-floor", "--csv",
                    str(out)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=seconds * 4 + 120)
    with open(out) as f:
        row = next(r for r in csv.DictReader(f) if r["kind"] == "once")
    return dict(kind="c", callers=callers, calls=int(row["calls"]),
                errors=int(row["errors"]), seconds=float(row["seconds"]),
                calls_per_s=float(row["calls_per_s"]),
                p50_us=float(row["p50_us"]), p99_us=float(row["p99_us"]),
                exactly_once=int(row["exactly_once_verified"]))


def main() -> int:
    a = parse_args()
    build = Path(a.build)
    sys.path.insert(0, str(build / "python"))
    import once  # noqa: E402  (the build tree's package)

    levels = [int(x) for x in a.callers.split(",") if x]
    tmp = Path(tempfile.mkdtemp(prefix="once-pybench-", dir="/tmp"))
    onced = None
    url = a.server
    try:
        if url is None:
            url = f"ipc://{tmp}/onced.ipc"
            onced = subprocess.Popen(
                [str(build / "server" / "onced"), "--data", str(tmp / "data"),
                 "--listen", url], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while True:
                try:
                    with once.Client(url, lease=False, deadline_ms=500) as c:
                        c.stats()
                    break
                except once.OnceError:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.05)
        rows = []
        load0 = os.getloadavg()
        for r in range(a.rounds):
            for n in levels:
                pair = []
                order = ("c", "python") if r % 2 == 0 else ("python", "c")
                for kind in order:
                    print(f"bench_python: round {r + 1}, {n} callers, "
                          f"{kind}...", file=sys.stderr)
                    if kind == "c":
                        pair.append(run_c(str(build / "bench" / "bench_calls"),
                                          url, n, a.seconds, tmp))
                    else:
                        pair.append(run_python(once, url, n, a.seconds,
                                               f"py-r{r}-n{n}"))
                # The layer alone: the same read through once.Client and
                # through the bare ctypes call (no fsync in either).
                reads = ("ctypes-read", "python-read") if r % 2 == 0 else \
                    ("python-read", "ctypes-read")
                for kind in reads:
                    print(f"bench_python: round {r + 1}, {n} callers, "
                          f"{kind}...", file=sys.stderr)
                    pair.append(run_python(once, url, n, a.seconds,
                                           f"py-r{r}-n{n}", kind))
                for row in pair:
                    row["round"] = r + 1
                rows += pair
        print(f"load average before/after: {load0[0]:.1f}/"
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
        print(f"{'kind':<12}{'callers':>8}{'calls/s':>10}{'p50_us':>9}"
              f"{'p99_us':>10}{'errors':>7}  exactly-once")
        for row in rows:
            print(f"{row['kind']:<12}{row['callers']:>8}"
                  f"{row['calls_per_s']:>10.0f}{row['p50_us']:>9.1f}"
                  f"{row['p99_us']:>10.1f}{row['errors']:>7}  "
                  f"{'yes' if row['exactly_once'] else 'NO'}")
        def med(kind, n, key):
            return statistics.median(x[key] for x in rows
                                     if x["kind"] == kind and
                                     x["callers"] == n)

        for a_kind, b_kind, title in (
                ("python", "c", "increments, python/C (bench_calls)"),
                ("python-read", "ctypes-read",
                 "reads, once.Client/bare ctypes call")):
            print(f"\n{title}, median over rounds:")
            for n in levels:
                print(f"  {n:>3} callers: calls/s "
                      f"{med(a_kind, n, 'calls_per_s') / med(b_kind, n, 'calls_per_s'):.2f}, "
                      f"p50 {med(a_kind, n, 'p50_us') / med(b_kind, n, 'p50_us'):.2f} "
                      f"({med(a_kind, n, 'p50_us') - med(b_kind, n, 'p50_us'):+.1f} us)")
        if a.csv:
            with open(a.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        return 0 if all(r["exactly_once"] for r in rows) else 1
    finally:
        if onced is not None:
            onced.send_signal(signal.SIGTERM)
            try:
                onced.wait(timeout=30)
            except subprocess.TimeoutExpired:
                onced.kill()
                onced.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
