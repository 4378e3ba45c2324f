"""test_py_http.py — the JSON API (onced --http-listen, docs/http.md) with
the real curl against a real onced: calls, replays and conflicts over HTTP;
one call across HTTP and nng under one rpc id, both ways; authentication;
every malformed input refused with its status and nothing written; the
nng socket served throughout; and docs/http.md's curl examples run as
written.

Counters show duplicates: every write is an increment, and each test reads
the counter back over nng after what it tried.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
from typing import Dict, Optional, Sequence, Tuple

import pytest

import once

from conftest import ROOT, SLOW

CURL = "/usr/bin/curl"
INCR = "/once.v1.Counter/Increment"
GET = "/once.v1.Counter/Get"
OPEN = "/once.v1.Lease/OpenLease"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Http:
    """curl against one onced's --http-listen, signing with a key file."""

    def __init__(self, onced, base: str, key_file: Optional[str]) -> None:
        self.onced = onced
        self.base = base
        self.principal, self.key = None, None
        if key_file is not None:
            line = [ln for ln in open(key_file).read().splitlines()
                    if ln and not ln.startswith("#")][0]
            name, hexkey = line.split()[:2]
            self.principal, self.key = name, bytes.fromhex(hexkey)

    def tag(self, method: str, rpc_id: str, first: str, body: bytes,
            key: Optional[bytes] = None) -> str:
        msg = b"\n".join([method.encode(), rpc_id.encode(), first.encode(),
                          body])
        return hmac.new(key or self.key, msg, hashlib.sha512).digest()[:32] \
            .hex()

    def post(self, method: str, body, *, rpc_id: str = "", sign: bool = True,
             headers: Optional[Dict[str, str]] = None,
             content_type: str = "application/json",
             http_method: str = "POST", path: Optional[str] = None,
             curl_args: Sequence[str] = ()) -> Tuple[int, dict]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdr = {"Content-Type": content_type}
        if rpc_id:
            hdr["Once-Rpc-Id"] = rpc_id
        if sign and self.key is not None:
            hdr["Once-Principal"] = self.principal
            hdr["Once-Tag"] = self.tag(method, rpc_id, "", raw)
        hdr.update(headers or {})
        args = [CURL, "-sS", *curl_args, "-X", http_method, "-o", "-", "-w",
                "\n%{http_code}", "--data-binary", "@-",
                self.base + (path if path is not None else "/v1" + method)]
        for k, v in hdr.items():
            args += ["-H", f"{k}: {v}" if v != "" else f"{k};"]
        p = subprocess.run(args, input=raw, capture_output=True,
                           timeout=30 * SLOW)
        assert p.returncode == 0, p.stderr
        text, status = p.stdout.decode().rsplit("\n", 1)
        try:
            doc = json.loads(text) if text else {}
        except json.JSONDecodeError:
            doc = {"raw": text}
        return int(status), doc

    def lease(self) -> int:
        st, r = self.post(OPEN, {"ttlMs": "60000"})
        assert st == 200 and r["code"] == "OK", r
        return int(r["clientId"])


def start(onced_factory, dev: bool = True, args=()):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    o = onced_factory(args=["--http-listen", base, *args], dev=dev)
    return o, Http(o, base, o.dev_key if dev else None)


def nng(o) -> once.Client:
    return once.Client(o.url, key_file=o.dev_key if o.dev else None,
                       lease=False, deadline_ms=5000 * SLOW)


def counter(o, name: str) -> int:
    with nng(o) as c:
        return c.counter_get(name)


def held_call(h: Http, rid: str, raw: bytes) -> subprocess.Popen:
    """An increment with a deadline (onced_test holds those, see
    ONCED_EXEC_HOLD_MS), sent by curl in the background."""
    p = subprocess.Popen(
        [CURL, "-sS", "-o", "-", "-w", "\n%{http_code}", "--data-binary",
         "@-", h.base + "/v1" + INCR, "-H", "Content-Type: application/json",
         "-H", f"Once-Rpc-Id: {rid}", "-H", "Once-Deadline-Ms: 60000",
         "-H", f"Once-Principal: {h.principal}",
         "-H", f"Once-Tag: {h.tag(INCR, rid, '', raw)}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(raw)
    p.stdin.close()
    return p


def hold_one(h: Http, cid: int, raw: bytes):
    """With --contexts 1: a held call in flight, seen by a probe refused
    429 meanwhile. A probe that reaches the front door first takes the slot
    itself (the held call is refused): then again with the next seq.
    Returns (the curl process, its rpc id, the probe's refusal)."""
    for seq in range(1, 6):
        rid = f"{cid}:{seq}"
        held = held_call(h, rid, raw)
        while held.poll() is None:
            st, r = h.post(GET, {"name": "probe"})
            if st == 429:
                return held, rid, r
        held.wait(timeout=30 * SLOW)
    raise AssertionError("no 429 while a call was in flight")


def start_holding(onced_factory, monkeypatch, name: str):
    """onced_test with --contexts 1, holding every call that carries a
    deadline 800 ms before it runs (ONCED_EXEC_HOLD_MS), and an increment
    of counter name held in flight (hold_one). Returns (onced, Http, the
    curl process, its rpc id, the probe's 429 body)."""
    import conftest
    monkeypatch.setattr(conftest, "ONCED",
                        str(conftest.BUILD / "tests" / "onced_test"))
    monkeypatch.setenv("ONCED_EXEC_HOLD_MS", "800")
    o, h = start(onced_factory, args=["--contexts", "1"])
    raw = json.dumps({"name": name, "by": 1}).encode()
    return (o, h, *hold_one(h, h.lease(), raw))


def test_increment_and_replay_over_http(onced_factory):
    o, h = start(onced_factory)
    cid = h.lease()
    st, r = h.post(INCR, {"name": "a", "by": 3}, rpc_id=f"{cid}:1")
    assert (st, r["code"], r["value"], r["replayed"]) == (200, "OK", "3",
                                                          False), r
    # The same rpc id again: the stored result, not a second increment.
    st, r = h.post(INCR, {"name": "a", "by": 3}, rpc_id=f"{cid}:1")
    assert (st, r["value"], r["replayed"]) == (200, "3", True), r
    # Fields in another order pack to the same message: still a replay.
    st, r = h.post(INCR, b'{"by":3,"name":"a"}', rpc_id=f"{cid}:1")
    assert (st, r["value"], r["replayed"]) == (200, "3", True), r
    assert counter(o, "a") == 3
    st, r = h.post(GET, {"name": "a"})
    assert (st, r["value"], r["replayed"]) == (200, "3", False), r


def test_http_then_nng_is_one_call(onced_factory):
    o, h = start(onced_factory)
    cid = h.lease()
    st, r = h.post(INCR, {"name": "x", "by": 1}, rpc_id=f"{cid}:1")
    assert (st, r["value"], r["replayed"]) == (200, "1", False), r
    with nng(o) as c:
        rep = c.counter_incr_reply("x", 1, rpc_id=(cid, 1))
    assert (rep.value, rep.replayed) == (1, True)
    assert counter(o, "x") == 1


def test_nng_then_http_is_one_call(onced_factory):
    o, h = start(onced_factory)
    with once.Client(o.url, key_file=o.dev_key,
                     deadline_ms=5000 * SLOW) as c:
        rep = c.counter_incr_reply("y", 2)
        cid, seq = rep.rpc_id
        assert (rep.value, rep.replayed) == (2, False)
        st, r = h.post(INCR, {"name": "y", "by": 2}, rpc_id=f"{cid}:{seq}")
        assert (st, r["value"], r["replayed"]) == (200, "2", True), r
        # Another request under that id, over HTTP: a conflict.
        st, r = h.post(INCR, {"name": "y", "by": 9}, rpc_id=f"{cid}:{seq}")
        assert (st, r["code"], r["reason"]) == (409, "ALREADY_EXISTS",
                                                "RPC_ID_CONFLICT"), r
    assert counter(o, "y") == 2


def test_conflict_writes_nothing(onced_factory):
    o, h = start(onced_factory)
    cid = h.lease()
    assert h.post(INCR, {"name": "c", "by": 1}, rpc_id=f"{cid}:1")[0] == 200
    st, r = h.post(INCR, {"name": "c", "by": 7}, rpc_id=f"{cid}:1")
    assert (st, r["code"], r["reason"], r["replayed"]) == (
        409, "ALREADY_EXISTS", "RPC_ID_CONFLICT", False), r
    st, r = h.post(INCR, {"name": "other", "by": 1}, rpc_id=f"{cid}:1")
    assert st == 409, r
    assert counter(o, "c") == 1 and counter(o, "other") == 0


def test_authentication(onced_factory):
    o, h = start(onced_factory)
    cid = h.lease()
    body = json.dumps({"name": "s", "by": 1}).encode()
    good = h.tag(INCR, f"{cid}:1", "", body)
    cases = {
        "no principal, no tag": ({}, False, "MISSING_PRINCIPAL"),
        "no tag": ({"Once-Principal": h.principal}, False, "MISSING_TAG"),
        "wrong key": ({"Once-Principal": h.principal,
                       "Once-Tag": h.tag(INCR, f"{cid}:1", "", body,
                                         key=bytes(32))}, False, "BAD_TAG"),
        "unknown principal": ({"Once-Principal": "mallory",
                               "Once-Tag": good}, False, "BAD_TAG"),
        # Signed for another rpc id, another method, another body.
        "other rpc id": ({"Once-Principal": h.principal,
                          "Once-Tag": h.tag(INCR, f"{cid}:2", "", body)},
                         False, "BAD_TAG"),
        "other method": ({"Once-Principal": h.principal,
                          "Once-Tag": h.tag(GET, f"{cid}:1", "", body)},
                         False, "BAD_TAG"),
        "other first_incomplete": ({"Once-Principal": h.principal,
                                    "Once-Tag": good,
                                    "Once-First-Incomplete": "1"},
                                   False, "BAD_TAG"),
    }
    for what, (hdr, sign, reason) in cases.items():
        st, r = h.post(INCR, body, rpc_id=f"{cid}:1", sign=sign, headers=hdr)
        assert (st, r.get("code"), r.get("reason")) == (
            401, "UNAUTHENTICATED", reason), (what, r)
    assert counter(o, "s") == 0
    # A 401 costs the peer its connection (as repeated failures do on nng).
    p = subprocess.run([CURL, "-sS", "-o", "/dev/null", "-D", "-", "-H",
                        "Content-Type: application/json", "-d", "{}",
                        h.base + "/v1" + GET], capture_output=True,
                       timeout=30 * SLOW)
    assert b" 401 " in p.stdout and b"connection: close" in p.stdout.lower(), \
        p.stdout
    # The same request signed: it runs, once, under that rpc id.
    st, r = h.post(INCR, body, rpc_id=f"{cid}:1",
                   headers={"Once-Tag": good.upper()})
    assert (st, r["value"]) == (200, "1"), r
    st, r = h.post(INCR, body, rpc_id=f"{cid}:1",
                   headers={"Once-Tag": base64.b64encode(
                       bytes.fromhex(good)).decode()})
    assert (st, r["value"], r["replayed"]) == (200, "1", True), r
    assert counter(o, "s") == 1


def test_open_mode_needs_no_tag(onced_factory):
    o, h = start(onced_factory, dev=False)
    st, r = h.post(OPEN, {"ttlMs": "60000"})
    assert st == 200, r
    cid = int(r["clientId"])
    st, r = h.post(INCR, {"name": "o", "by": 1}, rpc_id=f"{cid}:1",
                   headers={"Once-Principal": "a-label"})
    assert (st, r["value"]) == (200, "1"), r
    assert counter(o, "o") == 1


def test_malformed_refused_nothing_written(onced_factory):
    o, h = start(onced_factory, args=["--recv-max", "4096"])
    cid = h.lease()
    rid = f"{cid}:1"
    ok = {"name": "m", "by": 1}
    cases = [
        ("no rpc id on a mutating call", dict(method=INCR, body=ok),
         400, "MISSING_RPC_ID"),
        ("text/plain", dict(method=INCR, body=ok, rpc_id=rid,
                            content_type="text/plain"),
         415, "HTTP_CONTENT_TYPE"),
        ("form (curl -d's default)", dict(
            method=INCR, body=ok, rpc_id=rid,
            content_type="application/x-www-form-urlencoded"),
         415, "HTTP_CONTENT_TYPE"),
        ("not JSON", dict(method=INCR, body=b'{"name": "m", "by":',
                          rpc_id=rid), 400, "HTTP_BAD_JSON"),
        ("unknown field", dict(method=INCR, body={"name": "m", "bye": 1},
                               rpc_id=rid), 400, "HTTP_BAD_JSON"),
        ("wrong type", dict(method=INCR, body={"name": 5, "by": 1},
                            rpc_id=rid), 400, "HTTP_BAD_JSON"),
        ("not an object", dict(method=INCR, body=b'[1]', rpc_id=rid),
         400, "HTTP_BAD_JSON"),
        ("empty body", dict(method=INCR, body=b'', rpc_id=rid),
         400, "HTTP_BAD_JSON"),
        ("unknown method", dict(method="/once.v1.Counter/Nope", body=ok,
                                rpc_id=rid), 404, "UNKNOWN_METHOD"),
        ("the batch envelope", dict(method="/once.v1.Batch/Call", body={},
                                    rpc_id=rid), 404, "UNKNOWN_METHOD"),
        ("rpc id not C:S", dict(method=INCR, body=ok, rpc_id="7"),
         400, "HTTP_BAD_HEADER"),
        ("rpc id 0:1", dict(method=INCR, body=ok, rpc_id="0:1"),
         400, "HTTP_BAD_HEADER"),
        ("attempt not a number", dict(method=INCR, body=ok, rpc_id=rid,
                                      headers={"Once-Attempt": "-1"}),
         400, "HTTP_BAD_HEADER"),
        ("tag neither hex nor base64", dict(
            method=INCR, body=ok, rpc_id=rid,
            headers={"Once-Tag": "zz"}), 400, "HTTP_BAD_HEADER"),
        # A body of exactly --recv-max bytes: nng reads it, the envelope
        # around its message is larger.
        ("envelope over --recv-max", dict(
            method=INCR, body={"name": "m" * 4075, "by": 1}, rpc_id=rid),
         413, "REQUEST_TOO_LARGE"),
    ]
    for what, kw, status, reason in cases:
        st, r = h.post(kw.pop("method"), kw.pop("body"), **kw)
        assert (st, r.get("reason")) == (status, reason), (what, r)
        assert r["replayed"] is False and r["message"], (what, r)
        # The nng socket is served between any two of them.
        assert counter(o, "m") == 0, what
    # A Content-Length above --recv-max: refused before the body is read.
    st, r = h.post(INCR, b'{"name":"' + b"m" * 5000 + b'"}', rpc_id=rid)
    assert (st, r["reason"]) == (413, "REQUEST_TOO_LARGE"), r
    # GET on /v1/...: 405.
    st, r = h.post(GET, {"name": "m"}, http_method="GET")
    assert (st, r["reason"]) == (405, "HTTP_NO_ROUTE"), r
    # Nothing of it used the rpc id: it still runs, once.
    st, r = h.post(INCR, ok, rpc_id=rid)
    assert (st, r["value"], r["replayed"]) == (200, "1", False), r
    assert counter(o, "m") == 1


def test_metrics_on_the_same_url(onced_factory):
    o, h = start(onced_factory)
    p = subprocess.run([CURL, "-sS", "-w", "\n%{http_code}",
                        h.base + "/metrics"], capture_output=True,
                       timeout=30 * SLOW)
    text, status = p.stdout.decode().rsplit("\n", 1)
    assert status == "200" and "once_" in text


def test_docs_examples_run_as_written(onced_factory, tmp_path):
    o, h = start(onced_factory)
    doc = (ROOT / "docs" / "http.md").read_text()
    m = re.search(r"<!-- http-examples[^\n]*\n```sh\n(.*?)\n```", doc,
                  re.S)
    assert m, "no http-examples block in docs/http.md"
    script = tmp_path / "examples.sh"
    script.write_text(m.group(1) + "\n")
    env = dict(os.environ, ONCE=h.base, KEY_FILE=o.dev_key)
    p = subprocess.run(["sh", "-e", str(script)], env=env,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    # Each call's output against the comment the doc shows under it.
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    shown = [ln[2:] for ln in m.group(1).splitlines()
             if ln.startswith("# {")][1:]  # the first is OpenLease's, eaten
    assert len(lines) == len(shown), (lines, shown)
    for got, want in zip(lines, shown):
        body, status = got.rsplit(" ", 1)
        wbody, wstatus = want.rsplit(" ", 1)
        assert status == wstatus, (got, want)
        r = json.loads(body)
        for k, v in re.findall(r'"(\w+)":("[^"]*"|true|false)', wbody):
            assert json.dumps(r[k]) == v, (k, got, want)
    assert counter(o, "jobs") == 1


def test_calls_in_flight_are_bounded(onced_factory, monkeypatch):
    # With --contexts 1 one held JSON call fills the front door, and the
    # next is refused 429 while it is held.
    o, h, held, rid, busy = start_holding(onced_factory, monkeypatch, "b")
    assert (busy["code"], busy["reason"]) == ("RESOURCE_EXHAUSTED",
                                              "HTTP_BUSY"), busy
    out = held.stdout.read().decode()
    held.wait(timeout=30 * SLOW)
    assert out.endswith("\n200"), out
    st, r = h.post(GET, {"name": "b"})
    assert (st, r["value"]) == (200, "1"), r


def test_slow_and_idle_peers_hold_nothing(onced_factory):
    # A peer trickling its request a byte at a time and 200 connections
    # that send nothing (from 4 other addresses, 50 each: one address holds
    # 64 at most): calls over HTTP and nng go on meanwhile; a request
    # head over 16 KiB is refused (431, or a reset if curl is still sending
    # when the connection closes) and closes its connection.
    o, h = start(onced_factory)
    port = int(h.base.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port),
                                     source_address=(f"127.0.0.{2 + i % 4}",
                                                     0))
            for i in range(200)]
    slow = socket.create_connection(("127.0.0.1", port))
    head = (b"POST /v1/once.v1.Counter/Get HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n")
    try:
        cid = h.lease()
        for i in range(1, 6):
            slow.send(head[i - 1:i])
            st, r = h.post(INCR, {"name": "p", "by": 1}, rpc_id=f"{cid}:{i}")
            assert (st, r["value"]) == (200, str(i)), r
            assert counter(o, "p") == i
        big = subprocess.run(
            [CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
             "-H", "X-Big: " + "a" * 17000, "-d", "{}", h.base + "/v1" + GET],
            capture_output=True, timeout=30 * SLOW)
        assert big.stdout in (b"431", b"000"), big
        assert h.post(GET, {"name": "p"})[0] == 200
    finally:
        for s in idle + [slow]:
            s.close()


def test_https_with_the_listeners_certificate(onced_factory, tmp_path):
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    o = onced_factory(args=["--http-listen", base, "--tls-cert", str(cert),
                            "--tls-key", str(key)], dev=True)
    h = Http(o, base, o.dev_key)
    body = b'{"name":"t"}'
    p = subprocess.run([CURL, "-sS", "--cacert", str(cert), "-w",
                        "\n%{http_code}", "-H",
                        "Content-Type: application/json", "-H",
                        f"Once-Principal: {h.principal}", "-H",
                        "Once-Tag: " + h.tag(GET, "", "", body),
                        "-d", body.decode(),
                        base + "/v1" + GET], capture_output=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    text, status = p.stdout.decode().rsplit("\n", 1)
    assert status == "200" and json.loads(text)["code"] == "OK", text
    # Plain HTTP on that port is not served.
    p = subprocess.run([CURL, "-sS", "-d", "{}", f"http://127.0.0.1:{port}"
                        "/v1" + GET], capture_output=True, timeout=30 * SLOW)
    assert p.returncode != 0


def test_sigterm_with_a_call_in_flight(onced_factory, monkeypatch):
    # SIGTERM while a JSON call is held before it runs: onced answers or
    # drops that connection, but the call runs and is recorded before it
    # exits 0; after a restart its retry is a replay, the counter moved once.
    o, h, held, rid, _ = start_holding(onced_factory, monkeypatch, "t")
    assert o.stop() == 0, o.log.read_text()
    held.wait(timeout=30 * SLOW)
    # nng 1.5.2 closes the connection at once (curl: empty reply, 52).
    assert held.returncode in (0, 52), held.stderr.read()
    o.start()
    st, r = h.post(INCR, {"name": "t", "by": 1}, rpc_id=rid)
    assert (st, r["value"], r["replayed"]) == (200, "1", True), r
    assert counter(o, "t") == 1


def test_chunked_body_is_the_same_call(onced_factory, tmp_path):
    # curl sends the body in chunks when told to (Transfer-Encoding:
    # chunked, --data-binary @file): onced decodes them into the same
    # bytes, so the same rpc id is the same call whichever way the body
    # was framed — a replay, not a second increment.
    o, h = start(onced_factory)
    cid = h.lease()
    raw = json.dumps({"name": "k", "by": 2}).encode()
    body = tmp_path / "body.json"
    body.write_bytes(raw)

    def chunked(rid: str) -> Tuple[int, dict, str]:
        p = subprocess.run(
            [CURL, "-sS", "-v", "-o", "-", "-w", "\n%{http_code}",
             "-H", "Transfer-Encoding: chunked",
             "-H", "Content-Type: application/json",
             "-H", f"Once-Rpc-Id: {rid}",
             "-H", f"Once-Principal: {h.principal}",
             "-H", f"Once-Tag: {h.tag(INCR, rid, '', raw)}",
             "--data-binary", f"@{body}", h.base + "/v1" + INCR],
            capture_output=True, timeout=30 * SLOW)
        assert p.returncode == 0, p.stderr
        text, status = p.stdout.decode().rsplit("\n", 1)
        return int(status), json.loads(text), p.stderr.decode()

    st, r = h.post(INCR, raw, rpc_id=f"{cid}:1")  # Content-Length
    assert (st, r["value"], r["replayed"]) == (200, "2", False), r
    st, r, trace = chunked(f"{cid}:1")
    assert "> Transfer-Encoding: chunked" in trace, trace
    assert "> Content-Length" not in trace, trace
    assert (st, r["value"], r["replayed"]) == (200, "2", True), r
    # Chunked first, then Content-Length: the other way round.
    st, r, _ = chunked(f"{cid}:2")
    assert (st, r["value"], r["replayed"]) == (200, "4", False), r
    st, r = h.post(INCR, raw, rpc_id=f"{cid}:2")
    assert (st, r["value"], r["replayed"]) == (200, "4", True), r
    # And through h.post's stdin: curl chunks what it cannot size.
    st, r = h.post(INCR, raw, rpc_id=f"{cid}:3",
                   headers={"Transfer-Encoding": "chunked"})
    assert (st, r["value"], r["replayed"]) == (200, "6", False), r
    assert counter(o, "k") == 6
