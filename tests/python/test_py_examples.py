"""test_py_examples.py — examples/scheduler.py and examples/agent.py run as
programs against a real onced in dev mode (what `make run` starts), signing
with its dev.key: the scheduler places and queues work and finishes a
grant of its own; each agent claims only its machine's jobs and finishes
them; a scheduler that died before seeing an answer is resumed by the next
start under the same rpc id, and the surface gets one grant."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import once

from conftest import BUILD, ROOT, SLOW

EXAMPLES = ROOT / "examples"


def run(script, *args, cwd):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(BUILD / "python"))
    p = subprocess.run([sys.executable, str(EXAMPLES / script), *args],
                       cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120 * SLOW)
    print(p.stdout, p.stderr)
    return p


def test_scheduler_and_agents(onced_factory, tmp_path):
    o = onced_factory(dev=True)
    common = ["--server", o.url, "--key-file", o.dev_key]
    s = run("scheduler.py", *common, "--store", str(tmp_path / "in"),
            "--run", "r1", "--machines", "m1,m2", "--jobs", "4",
            cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert s.stdout.count("scheduler: queued r1-job-") == 4
    assert "finished SUCCEEDED" in s.stdout
    assert "0 inputs kept" in s.stdout

    for m in ("m1", "m2"):
        a = run("agent.py", *common, "--machine", m, "--idle-exit", "0.5",
                cwd=tmp_path)
        assert a.returncode == 0, a.stderr
        assert f"agent {m}: 2 jobs done" in a.stdout
        assert a.stdout.count("finished grant") == 2
    with once.Client(o.url, key_file=o.dev_key) as c:
        for m in ("m1", "m2"):
            assert len(c.list_queue(m).pending) == 0
        for j in range(4):
            (h,) = c.get_surface(f"r1-s{j}").history
            assert h.machine == ("m1", "m2")[j % 2]
            assert h.request_id == f"r1-job-{j}"
            assert h.outcome == once.messages.SUCCEEDED


def test_scheduler_resumes_what_it_kept(onced_factory, tmp_path):
    o = onced_factory(dev=True)
    store_dir = str(tmp_path / "in")
    # A scheduler's first life: its RequestGrant is kept, sent, and the
    # answer never arrives (onced stopped); then it is gone.
    first = once.Client(o.url, key_file=o.dev_key, max_attempts=2,
                        attempt_timeout_ms=200 * SLOW, deadline_ms=600 * SLOW)
    gen = first.set_placement("crashed", "m1", "/srv/crashed").generation
    with once.InputStore(store_dir) as store:
        o.stop_signal(signal.SIGSTOP)
        try:
            with pytest.raises(once.OutcomeUnknown) as ei:
                store.submit_grant(first, "crashed-job", "crashed", "m1",
                                   "/srv/crashed", gen)
        finally:
            o.stop_signal(signal.SIGCONT)
    first.close()
    rid = ei.value.rpc_id

    s = run("scheduler.py", "--server", o.url, "--key-file", o.dev_key,
            "--store", store_dir, "--run", "r2", "--machines", "m1",
            "--jobs", "1", cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert f"resumed crashed-job (rpc id {rid}): grant" in s.stdout
    assert "resumed 1 accepted, 0 still pending" in s.stdout
    with once.Client(o.url, key_file=o.dev_key) as c:
        surf = c.get_surface("crashed")
        assert surf.open_grant.request_id == "crashed-job"
        assert len(surf.history) == 0  # one grant
