"""test_py_node.py — examples/once_http_client.mjs, a once client in Node
with only its built-in fetch and crypto, run by Debian's nodejs
(/usr/bin/node, scripts/deps.sh; or ONCE_TEST_NODE) against a real onced's --http-listen: in
OPEN mode, signed with the dev key and with a scheduler's key file, refused
without a valid key or permission, its usage, and docs/http.md's Node
command run as written.

Every call of the client adds 1 to a counter and is sent twice under one
rpc id; the counter and Stats' replays, read back over nng, show whether
the second send ran again (a retry under a new rpc id would).
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import List, Optional

from conftest import ROOT, SLOW
from test_py_http import counter, nng, start

# ONCE_TEST_NODE: another node to run it with (say an older one); the docs'
# command finds it first on PATH too.
NODE = os.environ.get("ONCE_TEST_NODE", "/usr/bin/node")
CLIENT = ROOT / "examples" / "once_http_client.mjs"


def run(url: str, *args: str, key: Optional[str] = None,
        cmd: Optional[List[str]] = None) -> subprocess.CompletedProcess:
    argv = cmd or [NODE, str(CLIENT)] + (["--key-file", key] if key else []) \
        + list(args) + [url]
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=60 * SLOW)


def replays(o) -> int:
    with nng(o) as c:
        return c.stats().replays


def expected(cid: int, name: str, calls: int) -> List[str]:
    """What the client prints for calls increments of a fresh counter."""
    return ([f"lease: client id {cid}"]
            + [f"{cid}:{s}: value {s}, replayed false; again: value {s}, "
               f"replayed true" for s in range(1, calls + 1)]
            + [f"{name} = {calls}"])


def check_run(o, h, name: str, calls: int, key: Optional[str]) -> None:
    """Runs the client for calls increments of counter name; each must have
    run once: the counter over nng equals calls, and each second send was a
    replay."""
    before = replays(o)
    p = run(h.base, "--counter", name, "--calls", str(calls), key=key)
    assert p.returncode == 0, p.stderr
    assert counter(o, name) == calls, p.stdout
    assert replays(o) - before == calls, p.stdout
    lines = p.stdout.splitlines()
    cid = int(re.fullmatch(r"lease: client id (\d+)", lines[0]).group(1))
    assert lines == expected(cid, name, calls)


def test_node_is_18_or_later():
    p = subprocess.run([NODE, "--version"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert int(re.match(r"v(\d+)\.", p.stdout).group(1)) >= 18, p.stdout


def test_open_mode_unsigned(onced_factory):
    o, h = start(onced_factory, dev=False)
    check_run(o, h, "open", 3, None)


def test_signed_with_the_dev_key(onced_factory):
    o, h = start(onced_factory)
    check_run(o, h, "dev", 3, o.dev_key)


def test_signed_as_a_scheduler(onced_factory):
    o, h = start(onced_factory)
    check_run(o, h, "sched", 2, o.principal("node-sched", "scheduler"))


def test_refused_without_a_valid_key_or_permission(onced_factory, tmp_path):
    o, h = start(onced_factory)
    wrong = tmp_path / "wrong.key"
    wrong.write_text("# the dev principal, another key\ndev " + "ab" * 32
                     + "\n")
    agent = o.principal("agent-m1", "agent:m1")
    for key, want in [(None, "HTTP 401 UNAUTHENTICATED/MISSING_PRINCIPAL"),
                      (str(wrong), "HTTP 401 UNAUTHENTICATED/BAD_TAG"),
                      (agent, "HTTP 403 PERMISSION_DENIED/")]:
        p = run(h.base, "--counter", "no", key=key)
        assert p.returncode == 1 and want in p.stderr, (key, p.stderr)
        assert p.stdout.count("value") == 0, p.stdout
    assert counter(o, "no") == 0


def test_usage(tmp_path):
    p = run("", cmd=[NODE, str(CLIENT), "--help"])
    assert p.returncode == 0 and p.stdout.startswith("usage: "), p
    for args in [[], ["--calls", "x", "http://h"], ["--nope", "http://h"],
                 ["--key-file", str(tmp_path / "absent"), "http://h"]]:
        p = run("", cmd=[NODE, str(CLIENT)] + args)
        assert p.returncode == 2 and "usage: " in p.stderr, (args, p)
    for text in ["", "dev\n", "dev 00\n", "dev " + "ab" * 32 + " x\n",
                 "d:v " + "ab" * 32 + "\n"]:
        bad = tmp_path / "bad.key"
        bad.write_text(text)
        p = run("http://h", key=str(bad))
        assert p.returncode == 2 and 'want one line "NAME KEYHEX"' \
            in p.stderr, (text, p.stderr)


def test_docs_command_runs_as_written(onced_factory):
    o, h = start(onced_factory)
    doc = (ROOT / "docs" / "http.md").read_text()
    m = re.search(r"<!-- node-example[^\n]*\n```sh\n(.*?)\n```\n\nprints"
                  r"[^\n]*\n\n```\n(.*?)\n```", doc, re.S)
    assert m, "no node-example block in docs/http.md"
    env = dict(os.environ, ONCE=h.base, KEY_FILE=o.dev_key,
               PATH=os.path.dirname(NODE) + ":" + os.environ["PATH"])
    p = subprocess.run(["sh", "-e", "-c", m.group(1)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    # The doc shows a fresh onced's first lease, client id 1.
    cid = re.match(r"lease: client id (\d+)", p.stdout).group(1)
    want = re.sub(r"(?m)^1:", cid + ":", m.group(2)).replace(
        "client id 1", "client id " + cid)
    assert p.stdout.rstrip("\n") == want
    name = want.splitlines()[-1].split(" = ")[0]
    assert counter(o, name) == len(want.splitlines()) - 2
