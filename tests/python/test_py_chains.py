"""test_py_chains.py — once.Journal and once.Chain (docs/chains.md) against
a real onced: a chain's steps and commits, the reply handed back after a
restart, the pending step re-sent under its recorded id by a new process
after the first was SIGKILLed right after the send (a child Python on the
test library libonce_seams, ONCE_CHAIN_CRASH=after_send), another
principal refused, the journal's list and show, and examples/workflow.py
(its job table in KV, its jobs enqueued for an agent: a thread of the
test) killed mid-workflow and run again, and killed at random moments
(onced too, replies dropped by once_proxy) with every job finished and
started once — and the same run on a journal that writes after the send
caught."""
from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import once
from conftest import BUILD, WRAPPER

SEAMS = BUILD / "client" / "libonce_seams.so"
# Kills at random moments of 0.3-2 s do not fit an onced under valgrind.
timed = pytest.mark.skipif(bool(WRAPPER), reason="time bounds: not under "
                           "valgrind (make valgrind)")


def test_steps_commits_and_state(onced, tmp_path):
    with once.Client(onced.url) as c, once.Journal(str(tmp_path / "j")) as j:
        ch = j.chain(c, "py")
        s = ch.state
        assert (s.state, s.steps, s.context, s.payload) == (
            once.ChainState.IDLE, 0, b"", b"")
        assert ch.counter_incr("py.n", 2) == 2
        s = ch.state
        assert s.state == once.ChainState.REPLIED and s.reply().value == 2
        # REPLIED: a second step is refused, send() hands the reply back
        with pytest.raises(once.FailedPrecondition) as ei:
            ch.counter_incr("py.n", 2)
        assert ei.value.reason == once.reasons.CHAIN_BUSY
        assert ch.send().value == 2
        rid = ch.commit(b"ctx-1", next=once.counter_request("py.n", 3))
        s = ch.state
        assert (s.state, s.steps, s.context, s.rpc_id) == (
            once.ChainState.PENDING, 1, b"ctx-1", rid)
        assert ch.send().value == 5
        assert ch.commit(b"done") is None
        assert [(i.chain_id, i.state, i.steps) for i in j.list()] == [
            ("py", once.ChainState.IDLE, 2)]
        assert j.show("py").context == b"done"
        ch.forget()
        with pytest.raises(once.NotFound):
            j.show("py")
        assert c.counter_get("py.n") == 5


def test_reply_handed_back_after_restart(onced, tmp_path):
    d = str(tmp_path / "j")
    with once.Client(onced.url) as c, once.Journal(d) as j:
        assert j.chain(c, "r").counter_incr("r.n", 7) == 7
    with once.Client(onced.url) as c, once.Journal(d) as j:
        ch = j.chain(c, "r")
        s = ch.state
        assert s.state == once.ChainState.REPLIED and s.reply().value == 7
        ch.commit(b"1")
        assert c.counter_get("r.n") == 7


CHILD = textwrap.dedent("""
    import sys, once
    url, d = sys.argv[1], sys.argv[2]
    c = once.Client(url)
    j = once.Journal(d)
    j.chain(c, "k").counter_incr("k.n", 1)   # killed after the send
    print("not killed")
""")


@pytest.mark.skipif(not SEAMS.exists(), reason="no libonce_seams in build")
def test_pending_step_resent_after_kill(onced, tmp_path):
    d = str(tmp_path / "j")
    env = dict(os.environ, ONCE_LIBRARY=str(SEAMS),
               ONCE_CHAIN_CRASH="after_send@1",
               PYTHONPATH=str(BUILD / "python"))
    p = subprocess.run([sys.executable, "-c", CHILD, onced.url, d], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    with once.Client(onced.url) as c, once.Journal(d) as j:
        assert c.counter_get("k.n") == 1      # it ran before the kill
        ch = j.chain(c, "k")
        s = ch.state
        assert s.state == once.ChainState.PENDING
        assert s.rpc_id.client_id != c.client_id  # the dead process's id
        assert ch.send().value == 1           # replayed, not run again
        assert c.counter_get("k.n") == 1


class Agent(threading.Thread):
    """The agent of machine m1, a thread of the test on its own Client
    straight to onced: Claim, "run", FinishGrant, each answer lost or
    unanswered (onced SIGKILLed) retried under the same rpc id until it
    comes. started: surface -> the grant ids it started (a claim's answer
    is acted on once). limit: it claims nothing while it has started that
    many jobs (None: no limit)."""

    def __init__(self, url: str, key_file=None) -> None:
        super().__init__(daemon=True)
        self.c = once.Client(url, key_file=key_file, lease_ttl_ms=600_000)
        self.started = collections.defaultdict(list)
        self.halt = threading.Event()
        self.error = None
        self.limit = None

    def answered(self, fn, *args, **kw):
        err = None
        while not self.halt.is_set():
            try:
                return fn(*args, **kw) if err is None else self.c.retry(err)
            except once.OutcomeUnknown as e:
                err = err or e        # the first id, again and again
            except (once.Unavailable, once.DeadlineExceeded) as e:
                err = err or (e if e.rpc_id else None)
        raise AssertionError("agent halted")

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                if self.limit is not None and \
                        sum(map(len, self.started.values())) >= self.limit:
                    self.halt.wait(0.05)
                    continue
                got = self.answered(self.c.claim, "m1", max=4)
                for x in got.claimed:
                    self.started[x.grant.surface].append(x.grant.grant_id)
                    time.sleep(0.02)                  # "runs" the job
                    self.answered(self.c.finish, x.grant.grant_id,
                                  "SUCCEEDED")
                if not got.claimed:
                    self.halt.wait(0.05)
        except Exception as e:  # noqa: BLE001 (reported by stop())
            self.error = e

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=30)
        self.c.close()
        assert self.error is None or isinstance(self.error, AssertionError), \
            self.error


def workflow_cmd(url: str, journal, jobs: int, key_file=None) -> list:
    from conftest import ROOT
    return [sys.executable, str(ROOT / "examples" / "workflow.py"),
            "--server", url, "--journal", str(journal), "--chain", "wf",
            "--jobs", str(jobs), "--poll-ms", "20"] + (
                ["--key-file", key_file] if key_file else [])


def workflow_problems(c: once.Client, agent: Agent, jobs: int) -> list:
    """What the server and the agent show that a workflow of jobs that ran
    each step once would not: every row finished once, each job's grant
    started once, each Txn's write once (the progress key is written by
    every Txn, so its version is their count: 1 seed + 3 per job)."""
    bad = []
    prog = c.kv_get("wf/wf/progress")
    if prog is None or json.loads(prog.value) != {"job": jobs, "done": jobs}:
        bad.append(f"progress {prog}")
    elif prog.version != 1 + 3 * jobs:
        bad.append(f"progress version {prog.version} != {1 + 3 * jobs}: "
                   "a Txn wrote twice")
    for job in range(jobs):
        row = c.kv_get(f"wf/wf/jobs/{job:04d}")
        r = json.loads(row.value) if row else {}
        s = c.get_surface(f"wf-s{job}")
        want = dict(job=job, state="finished", machine="m1", generation=1,
                    result="SUCCEEDED", grant=r.get("grant"),
                    work=r.get("work"))
        if r != want or row is None or row.create_revision != 1:
            bad.append(f"job {job}: row {r} (created at "
                       f"{row and row.create_revision}), want {want}")
        if (s.generation, s.epoch, len(s.history)) != (1, 1, 1) or \
                s.HasField("open_grant"):
            bad.append(f"job {job}: surface generation {s.generation}, epoch "
                       f"{s.epoch}, {len(s.history)} grants closed, open "
                       f"{s.HasField('open_grant')}")
        if agent.started[f"wf-s{job}"] != [r.get("grant")]:
            bad.append(f"job {job}: the agent started grants "
                       f"{agent.started[f'wf-s{job}']}, the row says "
                       f"{r.get('grant')}")
    return bad


def test_workflow_example_resumes(onced_factory, tmp_path):
    """examples/workflow.py killed after its 6th reply (job 0's finished
    Txn, before it is consumed), started again: every job placed, granted,
    finished and recorded once."""
    o = onced_factory(dev=True)
    cmd = workflow_cmd(o.url, tmp_path / "j", 3, o.dev_key)
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    agent = Agent(o.url, o.dev_key)
    agent.start()
    try:
        p = subprocess.run(cmd + ["--die-after", "6"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == -signal.SIGKILL, p.stderr
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert "3 jobs done" in p.stdout
    finally:
        agent.stop()
    with once.Client(o.url, key_file=o.dev_key) as c:
        assert workflow_problems(c, agent, 3) == []


JOBS = 10


def kill_randomly(o, p, agent: Agent, journal, jobs: int, seed: int,
                  env: dict, first_env: dict = None) -> int:
    """Runs examples/workflow.py through proxy p until it ends, each run
    SIGKILLed at a random moment after its start (0.05-0.6 s until 10
    kills, then 0.3-2 s), and onced SIGKILLed at a random moment of every
    third run and started again. The agent starts the last job only after
    the 10th kill, so there are at least 10 whatever the machine's speed.
    first_env: added to the first run's environment, which is left to end
    by itself (a crash point of the test library). Returns the number of
    kills; fails when the workflow exits otherwise than done or
    SIGKILLed."""
    rng = random.Random(seed)
    cmd = workflow_cmd(p.url, journal, jobs) + ["--attempt-timeout-ms",
                                                "200"]
    log = journal.parent / "workflow.log"
    kills = runs = onced_kills = 0
    end = time.monotonic() + 300
    agent.limit = jobs - 1
    while True:
        if kills >= 10:
            agent.limit = None
        assert time.monotonic() < end, f"not done in 300 s ({kills} kills)"
        runs += 1
        first = runs == 1 and first_env is not None
        with open(log, "a") as out:
            w = subprocess.Popen(cmd, env=dict(env, **(first_env or {}))
                                 if first else env, stdout=out,
                                 stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        kill_at = t0 + (60 if first else rng.uniform(0.05, 0.6)
                        if kills < 10 else rng.uniform(0.3, 2.0))
        if runs % 3 == 0:
            try:
                w.wait(timeout=rng.uniform(0, kill_at - t0))
            except subprocess.TimeoutExpired:
                o.kill()
                onced_kills += 1
                o.start()
        try:
            rc = w.wait(timeout=max(0, kill_at - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.kill()
            rc = w.wait()
        if rc == -signal.SIGKILL:
            kills += 1
            continue
        assert rc == 0, f"workflow exited {rc} after {kills} kills:\n" + \
            log.read_text()[-3000:]
        print(f"{kills} kills in {runs} runs, onced SIGKILLed {onced_kills} "
              "times")
        return kills


def lossy_world(onced_factory, proxy_factory):
    """(seed, onced, once_proxy dropping 15% of replies, a started Agent);
    ONCE_TEST_SEED repeats a run."""
    seed = int(os.environ.get("ONCE_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    o = onced_factory()
    p = proxy_factory(o, ["--drop-rep", "0.15", "--seed", str(seed)])
    agent = Agent(o.url)
    agent.start()
    return seed, o, p, agent


@timed
def test_workflow_random_kills(onced_factory, proxy_factory, tmp_path):
    """Issue 25's random kills: examples/workflow.py SIGKILLed at random
    moments (at least 10 times), onced SIGKILLed too, replies dropped by
    once_proxy: every row finished once, each job's grant started once,
    each Txn written once."""
    seed, o, p, agent = lossy_world(onced_factory, proxy_factory)
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    try:
        kills = kill_randomly(o, p, agent, tmp_path / "j", JOBS, seed, env)
    finally:
        agent.stop()
    with once.Client(o.url) as c:
        assert workflow_problems(c, agent, JOBS) == []
    assert kills >= 10, f"only {kills} kills"


@timed
@pytest.mark.skipif(not SEAMS.exists(), reason="no libonce_seams in build")
def test_workflow_random_kills_catch_a_resend_under_a_new_id(
        onced_factory, proxy_factory, tmp_path):
    """The same run on the broken journal of the test library (a request
    written only with its reply, ONCE_CHAIN_WRITE_AFTER_SEND=1), its first
    run killed by itself right after its third send (the seed Txn, the
    placement or job 0's "placed" Txn, by how many replies were lost):
    the resumed process does not know that step was sent and sends it
    again under a new id, and the checks catch it — a Txn's compare fails
    (the workflow exits 4, "moved by someone else") or the surface's
    generation is 2."""
    seed, o, p, agent = lossy_world(onced_factory, proxy_factory)
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"),
               ONCE_LIBRARY=str(SEAMS), ONCE_CHAIN_WRITE_AFTER_SEND="1")
    try:
        kill_randomly(o, p, agent, tmp_path / "j", JOBS, seed, env,
                      {"ONCE_CHAIN_CRASH": "after_send@3"})
    except AssertionError as e:
        caught = [str(e)]
    else:
        with once.Client(o.url) as c:
            caught = workflow_problems(c, agent, JOBS)
    finally:
        agent.stop()
    print("\n".join(caught))
    assert any(re.search(r"exited 4|generation 2", x) for x in caught), \
        "a step sent twice under two ids went unnoticed"


def test_other_principal_refused(onced, tmp_path):
    d = str(tmp_path / "j")
    with once.Client(onced.url) as c, once.Journal(d) as j:
        j.chain(c, "mine").close()
        with once.Client(onced.url, principal="bob", lease=False) as bob:
            with pytest.raises(once.PermissionDenied) as ei:
                j.chain(bob, "mine")
            assert ei.value.reason == once.reasons.OTHER_PRINCIPAL
