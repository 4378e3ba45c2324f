"""test_py_console.py — the operator console (onced --http-listen URL,
/console; docs/console.md) in a real browser: Debian's chromium, headless,
loading the pages from a real onced after a scripted scenario (a lease
with increments, a grant and a rejected request, an outbox consumer).

Each view's DOM, as chromium leaves it after the page's scripts ran
(--dump-dom), must show the numbers `oncectl --json stats`, `records
list`, `grants get-surface`, `grants list-queue`, `grants list-surfaces`
(the grants view with no surface named, page by page), `grants
list-machines` (its queues with no machine named, page by page, on
onced_test after its clock moved 13 hours on and back) and `outbox
topics` give, and no error (the page lists script errors and failed fetches in
#console-errors). A screenshot of each view is kept under
$ONCE_BUILD_DIR/console-screens/. Access: with principals, the console
shows nothing without an operator's token from `oncectl console-token`;
a bad, expired or non-operator token is refused with its reason, and a
token never authorises a mutating method.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlparse

import pytest

from conftest import BUILD, ONCECTL, PAST_PENDING_MAX_MS, SLOW, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CURL = "/usr/bin/curl"
SCREENS = Path(os.environ.get("ONCE_BUILD_DIR", BUILD)) / "console-screens"

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason="chromium is not installed (scripts/deps.sh installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(onced_factory, dev: bool):
    base = f"http://127.0.0.1:{free_port()}"
    o = onced_factory(args=["--http-listen", base], dev=dev)
    return o, base


def run_ctl(o, args, key: Optional[str] = None):
    """oncectl --json against o (the dev key when o has one)."""
    k = key or (o.dev_key if o.dev else None)
    return subprocess.run([ONCECTL, "--server", o.url, "--json"]
                          + (["--key-file", k] if k else []) + list(args),
                          capture_output=True, text=True, timeout=30 * SLOW)


def ctl(o, *args: str, key: Optional[str] = None) -> dict:
    """oncectl --json against o; the parsed object (exit 0 required)."""
    p = run_ctl(o, args, key)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return json.loads(p.stdout)


def ctl_refused(o, reason: str, *args: str) -> None:
    """oncectl --json against o must exit 1 with reason."""
    p = run_ctl(o, args)
    assert p.returncode == 1 and reason in p.stdout, (args, p.stdout)


def token(key_file: str, ttl: str = "10m") -> str:
    p = subprocess.run([ONCECTL, "--key-file", key_file, "console-token",
                        "--ttl", ttl], capture_output=True, text=True,
                       timeout=30, check=True)
    return p.stdout.strip()


def token_by_hand(key_file: str, expiry: int) -> str:
    """A token as docs/console.md defines it, made here (not by oncectl)."""
    line = [ln for ln in open(key_file).read().splitlines()
            if ln and not ln.startswith("#")][0]
    name, hexkey = line.split()[:2]
    msg = f"once-console-token\n{name}\n{expiry}".encode()
    tag = hmac.new(bytes.fromhex(hexkey), msg, hashlib.sha512).digest()[:32]
    return f"ct1.{name}.{expiry}.{tag.hex()}"


def chromium(url: str, *, screenshot: Optional[Path] = None,
             budget_ms: int = 3000) -> str:
    """chromium headless on url: the DOM after its scripts ran (virtual
    time: the page's timers run for budget_ms), or a screenshot."""
    prof = tempfile.mkdtemp(prefix="once-chromium-")
    try:
        args = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                f"--user-data-dir={prof}", "--no-first-run",
                f"--virtual-time-budget={budget_ms}"]
        if screenshot is not None:
            args += [f"--screenshot={screenshot}", "--window-size=1280,900",
                     "--hide-scrollbars"]
        else:
            args += ["--dump-dom"]
        p = subprocess.run(args + [url], capture_output=True, text=True,
                           timeout=60 * SLOW)
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout
    finally:
        shutil.rmtree(prof, ignore_errors=True)


class Dom(HTMLParser):
    """What the console shows: text by id, and the text of each element
    with a data-field or a class, keyed by its enclosing data-* context
    (data-surface, data-machine, data-client, data-topic/-consumer)."""

    CTX = ("data-surface", "data-machine", "data-client", "data-topic",
           "data-consumer")
    VOID = {"meta", "link", "input", "br", "img", "line", "polyline"}

    def __init__(self, html: str) -> None:
        super().__init__()
        self.by_id: Dict[str, str] = {}
        self.attrs_by_id: Dict[str, Dict[str, str]] = {}
        self.fields: List[Tuple[Dict[str, str], str, str]] = []
        self.stack: List[Tuple[str, Dict[str, str], List[str]]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.attrs_by_id[a["id"]] = a
        if tag not in self.VOID:
            self.stack.append((tag, a, []))

    def handle_data(self, data):
        for _, _, text in self.stack:
            text.append(data)

    def handle_endtag(self, tag):
        if not self.stack or tag in self.VOID:
            return
        t, a, text = self.stack.pop()
        s = "".join(text).strip()
        if "id" in a:
            self.by_id[a["id"]] = s
        key = a.get("data-field") or (a.get("class") if t == "td" else None)
        if key:
            ctx = {}
            for _, pa, _ in self.stack:
                ctx.update({k: v for k, v in pa.items() if k in self.CTX})
            self.fields.append((ctx, key, s))

    def field(self, key: str, **ctx: str) -> List[str]:
        want = {f"data-{k}": v for k, v in ctx.items()}
        return [s for c, k, s in self.fields
                if k == key and all(c.get(x) == v for x, v in want.items())]

    def one(self, key: str, **ctx: str) -> str:
        got = self.field(key, **ctx)
        assert len(got) == 1, (key, ctx, got)
        return got[0]


def shows(what: str, shown, expected) -> None:
    """The console's text equals oncectl's value."""
    assert str(shown) == str(expected), \
        f"the console shows {what} = {shown!r}, oncectl says {expected!r}"


def view(base: str, name: str, tok: Optional[str], extra: str = "",
         shot: Optional[str] = None) -> Dom:
    url = f"{base}/console?view={name}&every=250{extra}"
    if tok:
        url += f"#token={tok}"
    if shot is not None:
        SCREENS.mkdir(parents=True, exist_ok=True)
        chromium(url, screenshot=SCREENS / f"{shot}.png")
        assert (SCREENS / f"{shot}.png").stat().st_size > 1000
    dom = Dom(chromium(url))
    errs = dom.attrs_by_id.get("console-errors", {}).get("data-count")
    assert errs == "0", \
        f"the page noted errors: {dom.by_id.get('console-errors')}"
    return dom


def scenario(o) -> dict:
    """A lease with increments under it, a grant and a rejected request, a
    queued row, an outbox consumer two events behind."""
    cid = ctl(o, "lease", "open", "--ttl", "10m")["client_id"]
    for seq in range(1, 4):
        ctl(o, "counter", "incr", "jobs", "--rpc-id", f"{cid}:{seq}")
    ctl(o, "grants", "set-placement", "s1", "m1", "/srv/a")
    ctl(o, "grants", "request", "r1", "s1", "m1", "/srv/a", "1")
    ctl_refused(o, "PLACEMENT_CHANGED", "grants", "request", "r2", "s1", "m2",
                "/srv/b", "1")
    ctl(o, "grants", "enqueue", "w1", "s1")
    ctl(o, "outbox", "subscribe", "once.system", "--consumer", "audit")
    return {"cid": cid}


def test_console_shows_what_oncectl_says(onced_factory):
    o, base = start(onced_factory, dev=True)
    sc = scenario(o)
    tok = token(o.dev_key)

    dom = view(base, "overview", tok, shot="overview")
    stats = ctl(o, "stats")
    for k in ("replays", "conflicts", "rejected", "records_stored",
              "records_bytes", "leases_live", "leases_opened", "leases_ended",
              "unauthenticated", "permission_denied", "kv_keys"):
        shows(k, dom.by_id[f"stat-{k}"], stats[k])
    # The console's own reads count as requests: it shows at most the
    # number oncectl reads afterwards, and more than the scenario made.
    assert 10 <= int(dom.by_id["stat-requests"]) <= stats["requests"]
    shows("role", dom.by_id["server-role"],
          f"leader · log index {stats['log_index']}" if stats["replicated"]
          else "single (not replicated)")
    shows("log_index", dom.by_id["stat-log_index"], stats["log_index"])
    # calls/s: one point per pair of Stats reads, 250 ms apart.
    assert int(dom.attrs_by_id["chart-calls"]["data-points"]) >= 2
    assert float(dom.attrs_by_id["chart-calls"]["data-max"]) > 0

    dom = view(base, "leases", tok, shot="leases")
    stats = ctl(o, "stats")
    shows("leases live", dom.by_id["leases-live"], stats["leases_live"])
    shows("retained records", dom.by_id["leases-records"],
          stats["records_stored"])
    shows("retained bytes", dom.by_id["leases-bytes"], stats["records_bytes"])
    rec = {c["client_id"]: c for c in ctl(o, "records", "list")["clients"]}
    row = rec[sc["cid"]]
    assert row["records"] == 3, row
    for k in ("records", "bytes", "watermark", "watermark_lag", "max_seq"):
        shows(f"lease {sc['cid']} {k}",
              dom.one(k, client=str(sc["cid"])), row[k])

    dom = view(base, "grants", tok, "&surface=s1&machine=m1", shot="grants")
    s = ctl(o, "grants", "get-surface", "s1")
    shows("s1 placement", dom.one("machine", surface="s1"), s["machine"])
    shows("s1 generation", dom.one("generation", surface="s1"),
          s["generation"])
    shows("s1 epoch", dom.one("epoch", surface="s1"), s["epoch"])
    shows("s1 open grant", dom.one("open_grant", surface="s1"),
          s["open_grant"]["grant_id"])
    shows("s1 open grant's machine",
          dom.one("open_grant_machine", surface="s1"),
          s["open_grant"]["machine"])
    shows("s1 rejections' reasons", dom.field("rej_reason", surface="s1"),
          [r["reason"] for r in reversed(s["rejections"])])
    shows("s1 rejected request", dom.field("rej_request_id", surface="s1"),
          [r["request_id"] for r in reversed(s["rejections"])])
    q = ctl(o, "grants", "list-queue", "m1")
    shows("m1 pending", dom.one("pending", machine="m1"),
          len(q.get("pending", [])))
    shows("m1 expired", dom.one("expired", machine="m1"),
          len(q.get("expired", [])))
    shows("m1's pending rows", dom.field("work_request_id", machine="m1"),
          [w["request_id"] for w in q.get("pending", [])])
    shows("m1's pending work ids", dom.field("work_id", machine="m1"),
          [str(w["work_id"]) for w in q.get("pending", [])])

    dom = view(base, "outbox", tok, shot="outbox")
    for t in ctl(o, "outbox", "topics")["topics"]:
        for c in t["consumers"] or [{"name": ""}]:
            ctx = {"topic": t["name"], "consumer": c["name"]}
            for k in ("head", "low_water", "retained_events",
                      "retained_bytes"):
                shows(f"{t['name']} {k}", dom.one(k, **ctx), t[k])
            if c["name"]:
                shows(f"{c['name']} lag", dom.one("lag", **ctx), c["lag"])
    assert dom.field("lag", topic="once.system", consumer="audit") != ["0"]


def glance_rows(dom: Dom) -> List[str]:
    """The surfaces the grants view's at-a-glance table lists, in order."""
    return dom.field("surface")


def glance_matches(dom: Dom, page: dict) -> None:
    """Each row of the at-a-glance table shows what one page of `oncectl
    --json grants list-surfaces` says."""
    surfaces = page.get("surfaces", [])
    shows("listed surfaces", glance_rows(dom),
          [x["surface"] for x in surfaces])
    for x in surfaces:
        n, og = x["surface"], x.get("open_grant")
        shows(f"{n} open grant", dom.one("open_grant", surface=n),
              og["grant_id"] if og else "-")
        holder = x.get("legacy_holder", "")
        shows(f"{n} open grant's machine",
              dom.one("open_grant_machine", surface=n),
              og["machine"] if og else
              f"legacy: {holder}" if holder else "-")
        shows(f"{n} open grant's epoch",
              dom.one("open_grant_epoch", surface=n),
              og["epoch"] if og else "-")
        shows(f"{n} epoch", dom.one("epoch", surface=n), x.get("epoch", 0))
        shows(f"{n} rejections", dom.one("rejections_kept", surface=n),
              x.get("rejections_kept", 0))
        shows(f"{n} last rejections", dom.field("last_rej_reason", surface=n),
              [r["reason"] for r in x.get("last_rejections", [])])
    shows("next page", dom.attrs_by_id["surfaces-next"].get("data-token", ""),
          page.get("next_page_token", ""))


def test_grants_at_a_glance_shows_what_list_surfaces_says(onced_factory):
    o, base = start(onced_factory, dev=True)
    scenario(o)  # s1: open grant on m1, PLACEMENT_CHANGED, a queued row
    ctl(o, "grants", "set-placement", "s2", "m2", "/srv/c")
    ctl(o, "grants", "request", "r3", "s2", "m2", "/srv/c", "1")
    ctl(o, "grants", "set-placement", "s0", "m1", "/srv/d")  # placed only
    # s3: a NO_PLACEMENT rejection only
    ctl_refused(o, "NO_PLACEMENT", "grants", "request", "r5", "s3", "m1",
                "/srv/e", "1")
    tok = token(o.dev_key)

    # Page 1 of 2 (page_size 2 from the URL), then the "next page" link's.
    dom = view(base, "grants", tok, "&page_size=2", shot="grants-glance")
    page = ctl(o, "grants", "list-surfaces", "--page-size", "2")
    assert [x["surface"] for x in page["surfaces"]] == ["s1", "s2"], page
    glance_matches(dom, page)
    # The machines of the listed grants and rows, with their queues.
    shows("m1 pending", dom.one("pending", machine="m1"),
          len(ctl(o, "grants", "list-queue", "m1").get("pending", [])))
    assert dom.field("pending", machine="m2") == ["0"]
    # Page 2: where the page's "next page" link leads.
    href = dom.attrs_by_id["surfaces-next"].get("href", "")
    nxt = parse_qs(urlparse(href).query).get("page_token", [""])[0]
    shows("the next page link's token", nxt, page["next_page_token"])
    dom = view(base, "grants", tok, f"&page_size=2&page_token={nxt}")
    page = ctl(o, "grants", "list-surfaces", "--page-size", "2",
               "--page-token", nxt)
    glance_matches(dom, page)
    assert [x["surface"] for x in page["surfaces"]] == ["s3"], page
    assert page.get("next_page_token", "") == "", page

    # Two rejections more show on the next read of the default page,
    # newest first.
    ctl_refused(o, "ALREADY_OWNED", "grants", "request", "r4", "s2", "m2",
                "/srv/c", "1")
    ctl_refused(o, "PLACEMENT_CHANGED", "grants", "request", "r6", "s2", "m2",
                "/srv/c", "9")
    dom = view(base, "grants", tok)
    glance_matches(dom, ctl(o, "grants", "list-surfaces"))
    assert dom.field("last_rej_reason", surface="s2") == \
        ["PLACEMENT_CHANGED", "ALREADY_OWNED"]


def iso_ms(ms: int) -> str:
    """ms as the console writes a time (JavaScript's toISOString)."""
    t = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def machine_glance_matches(dom: Dom, page: dict) -> None:
    """Each row of the queue view's at-a-glance table shows what one page
    of `oncectl --json grants list-machines` says."""
    machines = page.get("machines", [])
    shows("listed machines", dom.field("list_machine"),
          [x["machine"] for x in machines])
    for x in machines:
        m = x["machine"]
        shows(f"{m} pending rows", dom.one("list_pending", machine=m),
              x.get("pending", 0))
        shows(f"{m} expired rows", dom.one("list_expired", machine=m),
              x.get("expired", 0))
        t = x.get("newest_expired_unix_ms", 0)
        shows(f"{m} newest expiry", dom.one("list_newest_expired", machine=m),
              iso_ms(t) if t else "-")
        shows(f"{m} deleted", dom.one("list_deleted", machine=m),
              "yes" if x.get("deleted") else "no")
    shows("next machines page",
          dom.attrs_by_id["machines-next"].get("data-token", ""),
          page.get("next_page_token", ""))


def test_queues_at_a_glance_show_what_list_machines_says(clocked):
    base = f"http://127.0.0.1:{free_port()}"
    o, clock = clocked(args=["--http-listen", base], dev=True)

    def queue(surface, machine):
        ctl(o, "grants", "set-placement", surface, machine, "/" + surface)
        ctl(o, "grants", "enqueue", "w-" + surface, surface)

    queue("a0", "m-a")
    queue("a1", "m-a")
    queue("e0", "m-exp")
    queue("b0", "m-both")
    queue("d0", "m-done")
    ctl(o, "grants", "claim", "m-done")  # all claimed: not listed
    ctl(o, "grants", "delete-machine", "m-del")
    clock.set(PAST_PENDING_MAX_MS)  # 13 hours on: e0 and b0 expire
    for m in ("m-exp", "m-both"):
        assert len(ctl(o, "grants", "claim", m)["expired"]) == 1
    clock.set(0)
    queue("b1", "m-both")
    tok = token(o.dev_key)

    # Pages of 2 (machine_page_size from the URL), following "next page".
    nxt, seen = "", []
    for n in range(1, 4):
        extra = "&machine_page_size=2" + \
            (f"&machine_page_token={nxt}" if nxt else "")
        dom = view(base, "grants", tok, extra,
                   shot="queues-glance" if n == 1 else None)
        args = ["grants", "list-machines", "--page-size", "2"]
        if nxt:
            args += ["--page-token", nxt]
        page = ctl(o, *args)
        machine_glance_matches(dom, page)
        seen += [x["machine"] for x in page.get("machines", [])]
        href = dom.attrs_by_id["machines-next"].get("href", "")
        nxt = parse_qs(urlparse(href).query).get("machine_page_token",
                                                 [""])[0]
        shows("the next machines page link's token", nxt,
              page.get("next_page_token", ""))
        if not nxt:
            break
    assert (n, seen) == (2, ["m-a", "m-both", "m-del", "m-exp"]), seen
    # The default page; m-exp has only expired rows, and is listed.
    dom = view(base, "grants", tok)
    page = ctl(o, "grants", "list-machines")
    machine_glance_matches(dom, page)
    assert {x["machine"]: (x.get("pending", 0), x.get("expired", 0))
            for x in page["machines"]}["m-exp"] == (0, 1)
    assert dom.one("list_expired", machine="m-exp") == "1"
    # A machine named: its queue, and no list.
    dom = view(base, "grants", tok, "&machine=m-exp")
    assert "hidden" in dom.attrs_by_id["machine-glance"]
    shows("m-exp expired", dom.one("expired", machine="m-exp"), 1)


def test_a_wrong_number_fails_the_check():
    """The comparison the test above rests on fails on an off-by-one."""
    with pytest.raises(AssertionError, match="oncectl says 4"):
        shows("records_stored", "5", 4)


def test_open_onced_needs_no_token(onced_factory):
    o, base = start(onced_factory, dev=False)
    ctl(o, "counter", "incr", "jobs")
    dom = view(base, "overview", None)
    shows("records_stored", dom.by_id["stat-records_stored"],
          ctl(o, "stats")["records_stored"])
    assert dom.attrs_by_id["login"].get("hidden") is not None


def refused(base: str, tok: Optional[str]) -> str:
    """The console's refusal line; the stats table stays empty."""
    url = f"{base}/console?view=overview" + (f"#token={tok}" if tok else "")
    dom = Dom(chromium(url))
    assert dom.attrs_by_id["login"].get("hidden") is None, "no login shown"
    assert "stat-records_stored" not in dom.by_id, "stats shown"
    assert dom.by_id["server-role"] == "refused"
    return dom.by_id["login-reason"]


def post(base: str, method: str, body: dict, tok: str,
         rpc_id: str = "") -> Tuple[int, dict]:
    p = subprocess.run(
        [CURL, "-sS", "-o", "-", "-w", "\n%{http_code}", "-H",
         "Content-Type: application/json", "-H", f"Once-Console-Token: {tok}",
         "-H", f"Once-Rpc-Id: {rpc_id}" if rpc_id else "Once-Rpc-Id;",
         "--data-binary", json.dumps(body), f"{base}/v1{method}"],
        capture_output=True, text=True, timeout=30)
    out, _, status = p.stdout.rpartition("\n")
    return int(status), json.loads(out)


def test_console_refuses_without_an_operator_token(onced_factory):
    o, base = start(onced_factory, dev=True)
    ctl(o, "counter", "incr", "jobs")
    sched = o.principal("sched", "scheduler")
    good = token(o.dev_key)

    assert "MISSING_PRINCIPAL" in refused(base, None)
    name, exp, tag = good[len("ct1."):].split(".")
    bad = f"ct1.{name}.{int(exp) + 1}.{tag}"  # a later expiry, same tag
    assert "CONSOLE_TOKEN_BAD" in refused(base, bad)
    assert "CONSOLE_TOKEN_BAD" in refused(base, "ct1.dev.nonsense")
    expired = token_by_hand(o.dev_key, int(time.time()) - 1)
    assert "CONSOLE_TOKEN_EXPIRED" in refused(base, expired)
    eternal = token_by_hand(o.dev_key, int(time.time()) + 13 * 3600)
    assert "CONSOLE_TOKEN_BAD" in refused(base, eternal)  # over 12 h
    assert "CONSOLE_NOT_OPERATOR" in refused(base, token(sched))
    # A token made by hand as docs/console.md says is one oncectl's would be.
    dom = view(base, "overview", token_by_hand(o.dev_key,
                                               int(time.time()) + 600))
    assert dom.by_id["server-role"] == "single (not replicated)"

    # Reads only: a valid operator token never runs a mutating method, even
    # one that carries a good rpc id (it would run as dev otherwise).
    cid = ctl(o, "lease", "open", "--ttl", "1m")["client_id"]
    before = ctl(o, "counter", "get", "jobs")["value"]
    st, r = post(base, "/once.v1.Counter/Increment",
                 {"name": "jobs", "by": 1}, good, rpc_id=f"{cid}:1")
    assert (st, r["reason"]) == (403, "CONSOLE_READ_ONLY"), r
    st, r = post(base, "/once.v1.Admin/Compact", {}, good)
    assert (st, r["reason"]) == (403, "CONSOLE_READ_ONLY"), r
    st, r = post(base, "/once.v1.Lease/CloseLease", {"clientId": str(cid)},
                 good)
    assert (st, r["reason"]) == (403, "CONSOLE_READ_ONLY"), r
    assert ctl(o, "counter", "get", "jobs")["value"] == before
    assert ctl(o, "lease", "info", str(cid))["state"] == "LEASE_LIVE"
    st, r = post(base, "/once.v1.Admin/Stats", {}, good)
    assert st == 200 and r["code"] == "OK", r

    # Revoking the operator takes the token's authority away (the envelope
    # is signed as that principal: the executor checks revocation).
    subprocess.run([ONCECTL, "principal", "revoke", "dev", "--data",
                    str(o.data)], check=True, capture_output=True, timeout=30)
    wait_for(lambda: post(base, "/once.v1.Admin/Stats", {}, good)[0] == 403,
             10 * SLOW, "onced to load the revocation", 0.1)


def test_docs_examples_run_as_written(onced_factory, tmp_path):
    o, base = start(onced_factory, dev=True)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "console.md") \
        .read_text()
    m = re.search(r"<!-- console-examples[^\n]*\n```sh\n(.*?)\n```", doc,
                  re.S)
    assert m, "no console-examples block in docs/console.md"
    script = tmp_path / "examples.sh"
    script.write_text(m.group(1) + "\n")
    env = dict(os.environ, ONCE=base, KEY_FILE=o.dev_key,
               PATH=f"{Path(ONCECTL).parent}:{os.environ['PATH']}")
    p = subprocess.run(["sh", "-e", str(script)], env=env,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    shown = [ln[2:] for ln in m.group(1).splitlines()
             if re.fullmatch(r"# \d+", ln)]
    assert p.stdout.split() == shown, (p.stdout, shown)
    assert "/console#token=ct1.dev." in p.stderr


def test_the_page_reports_its_errors(onced_factory):
    """The no-error check above is not vacuous: a failed read and a script
    error land in #console-errors."""
    o, base = start(onced_factory, dev=False)
    # A surface name that is not valid UTF-8 once decoded: GetSurface is
    # refused 400, which the page notes as a failed fetch.
    dom = Dom(chromium(f"{base}/console?view=grants&surface=%00"))
    assert int(dom.attrs_by_id["console-errors"]["data-count"]) >= 1
    assert "once.v1.Grants/GetSurface: HTTP 400" in dom.by_id["console-errors"]
    dom = Dom(chromium(f"{base}/console?view=nonesuch"))
    assert dom.by_id["console-errors"] == 'no view "nonesuch"'
