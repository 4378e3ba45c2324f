"""test_py_http_limits.py — the HTTP listener's bounds (docs/http.md,
Bounds) against a real onced: a flood of stalled peers on an onced with a
low open-file limit, a slow request head, an oversized Content-Length,
chunked bodies (well-formed, broken, too large), one address's connection
cap, and every refusal counted in /metrics (read before and after).

Owns: raw-socket HTTP peers (a request line and no more, a byte a
second) beside real clients (oncectl over nng, curl over HTTP).
Invariant: every wait is bounded and waits on a condition; onced runs
under prlimit so its open-file limit is what the test says; its effects
are read back (the counter moved once per call).
Never: sleeps to decide an outcome.
"""
from __future__ import annotations

import json
import re
import resource
import select
import socket
import subprocess
import time
from typing import List, Optional, Tuple

import pytest

import conftest
from conftest import ONCECTL, SLOW, wait_for
from test_py_http import (GET, INCR, OPEN, counter, free_port, start,
                           start_holding)

NOFILE = 256
PEERS = 300
STALL = b"POST /v1/once.v1.Admin/Stats HTTP/1.1\r\nHost: x\r\n"


def limited(monkeypatch, nofile: int = NOFILE) -> None:
    """onced (and only onced) runs with an open-file limit of nofile."""
    monkeypatch.setattr(conftest, "WRAPPER",
                        ["prlimit", f"--nofile={nofile}:{nofile}", "--"]
                        + conftest.WRAPPER)


def port_of(h) -> int:
    return int(h.base.rsplit(":", 1)[1])


def read_all(socks: List[socket.socket], done: dict, bound: float) -> None:
    """Reads what each peer is sent, until it closes, for at most bound
    seconds; done[sock] = the bytes, once closed (or reset)."""
    end = time.monotonic() + bound
    got = {s: b"" for s in socks}
    while time.monotonic() < end:
        live = [s for s in socks if s not in done]
        if not live:
            return
        r, _, _ = select.select(live, [], [], 0.05)
        for s in r:
            try:
                b = s.recv(65536)
            except OSError:
                b = b""
            if b:
                got[s] += b
            else:
                done[s] = got[s]


def recv_all(s: socket.socket) -> bytes:
    """What s is sent until onced closes it (s has a timeout)."""
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return got
        got += chunk


def response(raw: bytes) -> Tuple[int, dict]:
    """The status and JSON body of one HTTP response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body.startswith(b"{") else {}


def ctl_incr(o, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ONCECTL, "--server", o.url, "--json"]
        + (["--key-file", o.dev_key] if o.dev else [])
        + ["counter", "incr", name],
        capture_output=True, text=True, timeout=30 * SLOW)


@pytest.mark.parametrize("dev", [True, False], ids=["signed", "open"])
def test_stalled_flood_leaves_nng_and_http_served(onced_factory, monkeypatch,
                                                  dev):
    # The lead's reproduction: more peers than onced has descriptors, each
    # sending half a request and then nothing. On nng's HTTP server they
    # took every descriptor, and onced's nng listener with them.
    if conftest.WRAPPER:  # as test_conns: not under make valgrind
        pytest.skip("valgrind takes descriptors of onced's own, and onced "
                    "below 256 files keeps no room apart")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4 * PEERS:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * PEERS),
                                                    hard))
    limited(monkeypatch)
    o, h = start(onced_factory, dev=dev,
                 args=["--http-header-timeout", "60s"])
    m = re.search(r"--http-conn-max 256 is above .* using (\d+)",
                  o.log.read_text())
    assert m, o.log.read_text()
    cap = int(m.group(1))
    assert 0 < cap < PEERS
    addr = ("127.0.0.1", port_of(h))
    peers: List[socket.socket] = []
    done: dict = {}
    try:
        for _ in range(PEERS):
            s = socket.create_connection(addr, timeout=10 * SLOW)
            s.sendall(STALL)
            peers.append(s)
        # Everyone beyond the cap is answered (503) and closed.
        wait_for(lambda: read_all(peers, done, 0.2) or
                 len(done) >= PEERS - cap, 20 * SLOW,
                 f"{PEERS - cap} peers beyond the cap of {cap} to be closed")
        busy = [response(b) for b in done.values() if b]
        assert busy, "no peer was answered 503"
        for st, r in busy:
            assert (st, r["code"], r["reason"]) == (
                503, "UNAVAILABLE", "HTTP_BUSY_CONNECTIONS"), r
        held = PEERS - len(done)
        assert held <= cap, (held, cap)

        # With all of them open: an nng call over the ipc listener...
        p = ctl_incr(o, "flood")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert json.loads(p.stdout)["value"] == 1
        # ... and a new HTTP client, which gets in as soon as the stalled
        # peers have waited a second for their request (they give way).
        wait_for(lambda: h.post(GET, {"name": "flood"})[0] == 200,
                 10 * SLOW, "a new HTTP client to be served")
        cid = h.lease()
        st, r = h.post(INCR, {"name": "flood", "by": 1}, rpc_id=f"{cid}:1")
        assert (st, r["value"]) == (200, "2"), r
        assert counter(o, "flood") == 2
        assert "Out of files" not in o.log.read_text()
    finally:
        for s in peers:
            s.close()


def test_slow_head_closed_after_header_timeout(onced_factory):
    # A byte a second: refused 408 once --http-header-timeout has passed
    # since its first byte, however steadily it trickles; a whole request
    # on another connection meanwhile is served at once.
    o, h = start(onced_factory, args=["--http-header-timeout", "1500ms"])
    s = socket.create_connection(("127.0.0.1", port_of(h)), timeout=10)
    got = b""
    t0 = time.monotonic()
    try:
        s.setblocking(False)
        for b in STALL:
            try:
                s.send(bytes([b]))
            except OSError:
                break  # closed by onced
            r, _, _ = select.select([s], [], [], 0.25)
            if r:
                chunk = s.recv(65536)
                got += chunk
                if not chunk or b"\r\n\r\n" in got:
                    break
            if time.monotonic() - t0 > 10 * SLOW:
                break
        s.setblocking(True)
        s.settimeout(10 * SLOW)
        while b"\r\n\r\n" not in got or not got.endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        took = time.monotonic() - t0
    finally:
        s.close()
    st, r = response(got)
    assert (st, r["code"], r["reason"]) == (
        408, "DEADLINE_EXCEEDED", "HTTP_SLOW_CLIENT"), r
    assert 1.4 <= took < 5 * SLOW, took
    assert h.post(GET, {"name": "x"})[0] == 200


def test_oversized_content_length_is_413_json(onced_factory):
    # A Content-Length above --recv-max: 413 with the JSON body, before a
    # byte of the body is sent; nothing ran.
    o, h = start(onced_factory, args=["--recv-max", "4096"])
    with socket.create_connection(("127.0.0.1", port_of(h)),
                                  timeout=10 * SLOW) as s:
        s.sendall(b"POST /v1" + INCR.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: 5000\r\n\r\n")
        got = recv_all(s)
    st, r = response(got)
    assert (st, r["code"], r["reason"]) == (
        413, "INVALID_ARGUMENT", "REQUEST_TOO_LARGE"), r
    assert b"Connection: close" in got
    assert counter(o, "m") == 0


def test_head_over_16k_is_431(onced_factory):
    o, h = start(onced_factory)
    with socket.create_connection(("127.0.0.1", port_of(h)),
                                  timeout=10 * SLOW) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 16384)
        got = recv_all(s)
    st, r = response(got)
    assert (st, r["reason"]) == (431, "HTTP_HEADERS_TOO_LARGE"), r


def test_expect_continue_is_answered(onced_factory):
    # curl asks "Expect: 100-continue" before a body above 1 KiB and waits
    # --expect100-timeout for the interim answer: it comes at once.
    o, h = start(onced_factory, dev=False)
    body = '{"name": "e"' + " " * 2000 + "}"  # JSON's blanks: 2 KiB
    t0 = time.monotonic()
    p = subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-v",
         "--expect100-timeout", "20", "-H", "Content-Type: application/json",
         "-H", "Expect: 100-continue", "--data-binary", body,
         h.base + "/v1" + GET], capture_output=True, text=True,
        timeout=60 * SLOW)
    took = time.monotonic() - t0
    assert p.stdout.endswith("\n200"), (p.stdout, p.stderr)
    assert "HTTP/1.1 100 Continue" in p.stderr, p.stderr
    assert took < 10 * SLOW, took


# ---- the front door's refusals in /metrics (docs/metrics.md) -------------

REFUSALS = "once_http_refusals_total"
EVICTED = "once_http_connections_evicted_total"
OPEN_NOW = "once_http_connections_open"


def refusal(reason: str, status: int) -> str:
    return f'{REFUSALS}{{reason="{reason}",status="{status}"}}'


def scrape(url: str) -> dict:
    """The samples of GET url/metrics, name{labels} -> value."""
    p = subprocess.run(["curl", "-sS", "--fail", url + "/metrics"],
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    out = {}
    for line in p.stdout.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def moved(before: dict, after: dict) -> dict:
    """The HTTP counters that moved between two scrapes, by how much."""
    return {k: after[k] - before.get(k, 0) for k in after
            if k.startswith((REFUSALS, EVICTED))
            and after[k] != before.get(k, 0)}


def read_responses(s: socket.socket, n: int = 1) -> List[bytes]:
    """n whole responses (head and Content-Length body) read from s, or
    those that came before onced closed it (the last one cut short)."""
    got, out = b"", []
    while len(out) < n:
        head, sep, rest = got.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head) if sep else None
        if m and len(rest) >= int(m.group(1)):
            end = len(head) + 4 + int(m.group(1))
            out.append(got[:end])
            got = got[end:]
            continue
        chunk = s.recv(65536)
        if not chunk:
            return out + ([got] if got else [])
        got += chunk
    return out


def read_response(s: socket.socket) -> bytes:
    return (read_responses(s, 1) or [b""])[0]


def exchange(port: int, data: bytes, bind: str = "") -> Tuple[int, dict]:
    """data sent on a new connection (from bind, when given); the status
    and JSON body of the one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW,
                                  source_address=(bind, 0) if bind else None
                                  ) as s:
        if data:
            s.sendall(data)
        return response(read_response(s))


def probe(port: int, data: bytes) -> Tuple[int, dict]:
    """exchange(), but a connection reset reads as (0, {}): a peer that
    sent its request to a connection refused at a cap (closed at once,
    the request unread) may see the reset before the refusal."""
    try:
        return exchange(port, data)
    except ConnectionResetError:
        return 0, {}


def post_head(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"POST {path} HTTP/1.1", "Host: x",
                         "Content-Type: application/json", *headers])
            + "\r\n\r\n").encode()


def two_listeners(onced_factory, args=(), dev=True):
    """onced with the JSON API and /metrics on two URLs (each listener has
    its connection caps: a scrape is never what a test fills)."""
    murl = f"http://127.0.0.1:{free_port()}"
    o, h = start(onced_factory, dev=dev,
                 args=["--metrics-listen", murl, *args])
    # onced answers Stats over nng before it opens its HTTP listeners; it
    # logs "ready" after them.
    wait_for(lambda: "ready (pid" in o.log.read_text(), 10 * SLOW,
             "onced's HTTP listeners to be open")
    return o, h, murl


def test_front_door_refusals_are_counted(onced_factory):
    # Each refusal the HTTP front door makes before a call moves its own
    # once_http_refusals_total{reason,status} by exactly one, and nothing
    # else; the connections open are a gauge.
    o, h, murl = two_listeners(onced_factory, args=[
        "--recv-max", "4096", "--http-header-timeout", "500ms",
        "--http-conn-max", "8"])  # 4 on each listener
    port = port_of(h)
    v1 = "/v1" + INCR
    raw_cases = [
        (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, "HTTP_NO_ROUTE"),
        (b"GET " + v1.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n",
         405, "HTTP_NO_ROUTE"),
        (b"GET /console HTTP/1.1\r\nX-Big: " + b"a" * 16384,
         431, "HTTP_HEADERS_TOO_LARGE"),
        (post_head(v1, "Content-Length: 5000"), 413, "REQUEST_TOO_LARGE"),
        (b"NONSENSE\r\n\r\n", 400, "HTTP_MALFORMED"),
        (post_head(v1, "Transfer-Encoding: gzip"), 411, "HTTP_MALFORMED"),
        (post_head(v1, "Transfer-Encoding: chunked", "Content-Length: 3")
         + b"abc", 400, "HTTP_MALFORMED"),
        (post_head(v1, "Transfer-Encoding: chunked") + b"zz\r\n",
         400, "HTTP_BAD_CHUNK"),
        (post_head(v1, "Transfer-Encoding: chunked") + b"2000\r\n",
         413, "REQUEST_TOO_LARGE"),
        (STALL, 408, "HTTP_SLOW_CLIENT"),  # half a head, then nothing
    ]
    before = scrape(murl)
    for data, status, reason in raw_cases:
        assert exchange(port, data)[0] == status, (data[:60], status)
        after = scrape(murl)
        assert moved(before, after) == {refusal(reason, status): 1}, (
            data[:60], moved(before, after))
        before = after
    # The JSON API's own refusals (curl), each counted the same way.
    cid = h.lease()
    api_cases = [
        (dict(sign=False), 401, "MISSING_PRINCIPAL"),
        (dict(content_type="text/plain"), 415, "HTTP_CONTENT_TYPE"),
        (dict(headers={"Once-Attempt": "-1"}), 400, "HTTP_BAD_HEADER"),
        (dict(body=b"[1]"), 400, "HTTP_BAD_JSON"),
        (dict(method="/once.v1.Counter/Nope"), 404, "UNKNOWN_METHOD"),
        (dict(body={"name": "m" * 4075, "by": 1}), 413,
         "REQUEST_TOO_LARGE"),
    ]
    for kw, status, reason in api_cases:
        st, r = h.post(kw.pop("method", INCR),
                       kw.pop("body", {"name": "m", "by": 1}),
                       rpc_id=f"{cid}:1", **kw)
        assert (st, r.get("reason")) == (status, reason), r
        after = scrape(murl)
        assert moved(before, after) == {refusal(reason, status): 1}, (
            reason, moved(before, after))
        before = after
    assert counter(o, "m") == 0  # nothing ran

    # The cap: 4 connections reading a body that does not come (not to be
    # displaced), a fifth answered 503; the gauge counts them (and the
    # scrape's own connection).
    held = [socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
            for _ in range(4)]
    try:
        for s in held:
            s.sendall(post_head(v1, "Content-Length: 10"))
        wait_for(lambda: scrape(murl)[OPEN_NOW] == 5, 10 * SLOW,
                 "4 held connections and the scrape's open")
        before = scrape(murl)
        st, r = exchange(port, b"")
        assert (st, r["reason"]) == (503, "HTTP_BUSY_CONNECTIONS"), r
        after = scrape(murl)
        assert moved(before, after) == {
            refusal("HTTP_BUSY_CONNECTIONS", 503): 1}, moved(before, after)
    finally:
        for s in held:
            s.close()
    wait_for(lambda: scrape(murl)[OPEN_NOW] == 1, 10 * SLOW,
             "the held connections closed")

    # 4 idle connections: once they have waited a second, a new one takes
    # the place of one (evicted, unanswered); 503s until then are counted.
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
            for _ in range(4)]
    try:
        before, busy = scrape(murl), 0

        def served() -> bool:
            nonlocal busy
            st, _ = probe(port, b"GET /console/console.css HTTP/1.1\r\n"
                          b"Host: x\r\nConnection: close\r\n\r\n")
            busy += st in (0, 503)
            return st == 200
        wait_for(served, 10 * SLOW, "a new connection to be served")
        after = scrape(murl)
        want = {EVICTED: 1}
        if busy:
            want[refusal("HTTP_BUSY_CONNECTIONS", 503)] = busy
        assert moved(before, after) == want, (busy, moved(before, after))
        gone: dict = {}
        wait_for(lambda: read_all(idle, gone, 0.1) or gone, 10 * SLOW,
                 "the evicted connection to be closed")
        assert list(gone.values()) == [b""], gone  # closed, unanswered
    finally:
        for s in idle:
            s.close()


def test_http_busy_is_counted(onced_factory, monkeypatch):
    # --contexts 1 with a call held in flight: each probe answered 429
    # HTTP_BUSY moves its counter by one.
    o, h, held, rid, busy = start_holding(onced_factory, monkeypatch, "b")
    before = scrape(h.base)
    n = 0
    while n == 0 or held.poll() is None:
        st, r = h.post(GET, {"name": "probe"})
        if st != 429:
            break
        n += 1
        assert r["reason"] == "HTTP_BUSY", r
    after = scrape(h.base)
    assert n >= 1
    assert moved(before, after) == {refusal("HTTP_BUSY", 429): n}
    held.wait(timeout=30 * SLOW)


# ---- one peer's connections (--http-conn-max-per-peer) --------------------

def test_per_peer_connection_cap(onced_factory):
    # One address holds at most 4 connections: a fifth from it is answered
    # 429 at once and closed; another address (127.0.0.2: loopback is
    # 127/8) is served meanwhile; once one of the four closes, a fifth gets
    # in. Counted in /metrics.
    o, h, murl = two_listeners(onced_factory,
                               args=["--http-conn-max-per-peer", "4"])
    port = port_of(h)
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
             for _ in range(4)]
    try:
        wait_for(lambda: scrape(murl)[OPEN_NOW] == 5, 10 * SLOW,
                 "4 connections and the scrape's open")
        before = scrape(murl)
        st, r = exchange(port, b"")
        assert (st, r["code"], r["reason"]) == (
            429, "RESOURCE_EXHAUSTED", "HTTP_PEER_CONNECTIONS"), r
        assert "--http-conn-max-per-peer" in r["message"], r
        assert moved(before, scrape(murl)) == {
            refusal("HTTP_PEER_CONNECTIONS", 429): 1}
        # Another address is not this one's cap.
        st, r = h.post(OPEN, {"ttlMs": "60000"},
                       curl_args=["--interface", "127.0.0.2"])
        assert (st, r["code"]) == (200, "OK"), r
        st, r = h.post(INCR, {"name": "p", "by": 1},
                       rpc_id=f"{r['clientId']}:1",
                       curl_args=["--interface", "127.0.0.2"])
        assert (st, r["value"]) == (200, "1"), r
        # The four are still open (none was displaced for the fifth).
        for s in conns:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
            s.setblocking(True)
        conns.pop().close()
        # A call on a new connection from 127.0.0.1 (refused 429 until
        # onced has seen the close).
        body = json.dumps({"name": "p"}).encode()
        call = post_head("/v1" + GET, f"Content-Length: {len(body)}",
                         f"Once-Principal: {h.principal}",
                         f"Once-Tag: {h.tag(GET, '', '', body)}") + body
        st, r = wait_for(lambda: (lambda x: x[0] not in (0, 429) and x)(
            probe(port, call)), 10 * SLOW,
            "a fifth connection from 127.0.0.1 once one closed")
        assert (st, r["value"]) == (200, "1"), r
    finally:
        for s in conns:
            s.close()
    assert counter(o, "p") == 1


# ---- chunked bodies over raw sockets ------------------------------------

def chunks(*parts: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + \
        b"0\r\n" + trailer + b"\r\n"


def test_chunked_bodies_raw(onced_factory):
    # Chunks of any size, with extensions and a trailer, decode into the
    # body; a request pipelined after them is answered next on the same
    # connection. Broken framing is 400 HTTP_BAD_CHUNK; a body growing
    # past --recv-max is 413 as soon as a chunk's size says so, with no
    # byte of that chunk sent.
    o, h = start(onced_factory, dev=False, args=["--recv-max", "4096"])
    port = port_of(h)
    cid = h.lease()

    def head(rid: str) -> bytes:
        return post_head("/v1" + INCR, "Transfer-Encoding: chunked",
                         f"Once-Rpc-Id: {rid}")

    with socket.create_connection(("127.0.0.1", port),
                                  timeout=10 * SLOW) as s:
        s.sendall(head(f"{cid}:1")
                  + b"7;ext=1\r\n{\"name\"\r\n"
                  + chunks(b': "c",', b' "by": 5}', trailer=b"X-T: 1\r\n")
                  + head(f"{cid}:1") + chunks(b'{"name": "c", "by": 5}'))
        got = read_responses(s, 2)
        assert len(got) == 2, got
        st, r = response(got[0])
        assert (st, r["value"], r["replayed"]) == (200, "5", False), r
        st, r = response(got[1])  # the pipelined one: the same call
        assert (st, r["value"], r["replayed"]) == (200, "5", True), r
    bad = [
        (b"zz\r\n", "not a hexadecimal"),
        (b"3\r\nabcX\r\n", "not followed by CRLF"),
        (b"3\nabc\r\n", "not a hexadecimal"),
        (b"3;" + b"e" * 5000 + b"\r\n", "over 4 KiB"),
        (b"0\r\nX: " + b"t" * 17000 + b"\r\n\r\n", "over 16 KiB"),
    ]
    for framing, why in bad:
        st, r = exchange(port, head(f"{cid}:2") + framing)
        assert (st, r["code"], r["reason"]) == (
            400, "INVALID_ARGUMENT", "HTTP_BAD_CHUNK"), (framing[:20], r)
        assert why in r["message"], (why, r)
    # Too large: one huge chunk (refused on its size line), or small
    # chunks adding up past 4096 (refused at the chunk that would).
    for data in (b"FFFFFFFFFFFFFFFFFFFFFFFF\r\n",
                 b"800\r\n" + b" " * 2048 + b"\r\n"
                 + b"800\r\n" + b" " * 2048 + b"\r\n" + b"1\r\n"):
        st, r = exchange(port, head(f"{cid}:2") + data)
        assert (st, r["reason"]) == (413, "REQUEST_TOO_LARGE"), r
        assert "--recv-max" in r["message"], r
    # Exactly 4096 bytes decoded is taken (the envelope around it is not:
    # that refusal is the JSON API's, with its own message).
    big = b'{"name": "' + b"m" * 4084 + b'"}'
    assert len(big) == 4096
    st, r = exchange(port, head(f"{cid}:2") + chunks(big[:1000], big[1000:]))
    assert (st, r["reason"]) == (413, "REQUEST_TOO_LARGE"), r
    assert "packs to" in r["message"], r
    assert counter(o, "c") == 5
