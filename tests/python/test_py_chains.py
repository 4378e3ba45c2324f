"""test_py_chains.py — once.Journal and once.Chain (docs/chains.md) against
a real onced: a chain's steps and commits, the reply handed back after a
restart, the pending step re-sent under its recorded id by a new process
after the first was SIGKILLed right after the send (a child Python on the
test library libonce_seams, ONCE_CHAIN_CRASH=after_send), another
principal refused, the journal's list and show, and examples/workflow.py
killed mid-workflow and run again."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import once
from conftest import BUILD

SEAMS = BUILD / "client" / "libonce_seams.so"


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


def test_workflow_example_resumes(onced_factory, tmp_path):
    """examples/workflow.py killed after its 6th reply (job 1's grant,
    before it is consumed), started again: every job placed, granted,
    finished and counted once."""
    from conftest import ROOT
    o = onced_factory(dev=True)
    cmd = [sys.executable, str(ROOT / "examples" / "workflow.py"), "--server",
           o.url, "--key-file", o.dev_key, "--journal", str(tmp_path / "j"),
           "--chain", "wf", "--jobs", "3"]
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    p = subprocess.run(cmd + ["--die-after", "6"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "3 jobs done (done counter 3)" in p.stdout
    with once.Client(o.url, key_file=o.dev_key) as c:
        assert c.counter_get("wf.done") == 3
        for job in range(3):
            v = c.get_surface(f"wf-s{job}")
            assert v.epoch == 1            # one grant ever
            assert not v.HasField("open_grant")  # and it was finished


def test_other_principal_refused(onced, tmp_path):
    d = str(tmp_path / "j")
    with once.Client(onced.url) as c, once.Journal(d) as j:
        j.chain(c, "mine").close()
        with once.Client(onced.url, principal="bob", lease=False) as bob:
            with pytest.raises(once.PermissionDenied) as ei:
                j.chain(bob, "mine")
            assert ei.value.reason == once.reasons.OTHER_PRINCIPAL
