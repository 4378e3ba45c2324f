// console.js — the operator console (docs/console.md): reads onced's JSON
// API (POST /v1/<method>) and draws the view named by ?view=. Read only:
// every call it makes is one of the read methods a console token may
// carry. Errors (script errors, failed fetches) are listed in
// #console-errors so that a headless browser's DOM shows them.
"use strict";

const TOKEN_KEY = "once-console-token";
const params = new URLSearchParams(location.search);
const view = params.get("view") || "overview";
const every = Math.max(200, Number(params.get("every")) || 2000);
const samples = [];          // {t, requests, records} per Stats read
const SAMPLES_MAX = 300;     // the charts' window: 300 reads
let token = null;
let refused = false;

function $(id) { return document.getElementById(id); }

function noteError(what) {
  const ul = $("console-errors");
  const li = document.createElement("li");
  li.textContent = what;
  ul.appendChild(li);
  ul.dataset.count = String(ul.children.length);
}
window.onerror = (msg, src, line) => { noteError(`script: ${msg} (${src}:${line})`); };
window.onunhandledrejection = (e) => { noteError(`script: ${e.reason}`); };

// A token handed in the URL's fragment (#token=...) is kept for this tab
// and taken out of the address bar.
function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  token = sessionStorage.getItem(TOKEN_KEY);
}

// snake_case of a JSON name (the JSON mapping writes lowerCamelCase).
function snake(k) { return k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase()); }
function norm(o) {
  if (Array.isArray(o)) return o.map(norm);
  if (o === null || typeof o !== "object") return o;
  const r = {};
  for (const [k, v] of Object.entries(o)) r[snake(k)] = norm(v);
  return r;
}
// A number field: proto3 JSON leaves out zeros and writes 64-bit ones as
// strings.
function num(o, k) { return o && o[k] !== undefined ? Number(o[k]) : 0; }
function str(o, k) { return o && o[k] !== undefined ? String(o[k]) : ""; }

class Refused extends Error {}

async function api(method, body) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers["Once-Console-Token"] = token;
  let res;
  try {
    res = await fetch("/v1/" + method, { method: "POST", headers, body: JSON.stringify(body || {}) });
  } catch (e) {
    noteError(`fetch ${method}: ${e}`);
    throw e;
  }
  const j = norm(await res.json().catch(() => ({})));
  if (res.status === 401 || res.status === 403) {
    showLogin(`${res.status} ${j.code || ""} ${j.reason || ""}: ${j.message || ""}`);
    throw new Refused(j.reason);
  }
  if (!res.ok) {
    noteError(`${method}: HTTP ${res.status} ${j.code || ""} ${j.reason || ""} ${j.message || ""}`);
    throw new Error(j.reason || String(res.status));
  }
  return j;
}

function showLogin(why) {
  refused = true;
  $("login").hidden = false;
  $("login-reason").textContent = why;
  $("server-role").textContent = "refused";
  $("server-role").classList.add("bad");
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}
function rows(tbody, list, fill) {
  tbody.replaceChildren();
  for (const x of list) {
    const tr = document.createElement("tr");
    fill(tr, x);
    tbody.appendChild(tr);
  }
}

// ---- Overview: Stats, and the charts from successive reads ----------------
const STATS = [
  "requests", "replays", "conflicts", "rejected", "records_stored",
  "records_bytes", "oldest_record_age_ms", "leases_live", "leases_opened",
  "leases_ended", "lease_expired", "stale", "window_full", "commits",
  "fsyncs", "unauthenticated", "permission_denied", "batches",
  "batch_entries", "kv_keys", "kv_revision", "kv_txns", "conns_open",
  "conns_refused", "disk_bytes", "disk_free_bytes", "compactions",
  "gc_passes", "reclaimed_total", "log_index",
];

function drawChart(svg, values, label) {
  const w = 600, h = 160, pad = 4;
  const max = Math.max(1, ...values);
  const n = values.length;
  const pts = values.map((v, i) =>
    `${(n < 2 ? 0 : (i * (w - 2 * pad)) / (n - 1)) + pad},${h - pad - (v / max) * (h - 2 * pad)}`);
  svg.innerHTML = `<line x1="0" y1="${h - pad}" x2="${w}" y2="${h - pad}"></line>` +
    `<polyline points="${pts.join(" ")}"></polyline>`;
  svg.dataset.points = String(n);
  svg.dataset.max = String(max);
  label.textContent = n ? `now ${values[n - 1].toFixed(1)}, max ${max.toFixed(1)}` : "";
}

async function overview(s) {
  const t = performance.now();
  samples.push({ t, requests: num(s, "requests"), records: num(s, "records_stored") });
  if (samples.length > SAMPLES_MAX) samples.shift();
  rows($("stats").tBodies[0], STATS, (tr, k) => {
    cell(tr, k);
    cell(tr, num(s, k)).id = "stat-" + k;
  });
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].t - samples[i - 1].t) / 1000;
    rates.push(dt > 0 ? (samples[i].requests - samples[i - 1].requests) / dt : 0);
  }
  drawChart($("chart-calls"), rates, $("chart-calls-now"));
  drawChart($("chart-records"), samples.map((x) => x.records), $("chart-records-now"));
}

// ---- Leases: ListRecords' one row per client, most records first ---------
async function leases(s) {
  const r = await api("once.v1.Admin/ListRecords", { limit: 1000 });
  $("leases-live").textContent = num(s, "leases_live");
  $("leases-records").textContent = num(s, "records_stored");
  $("leases-bytes").textContent = num(s, "records_bytes");
  const clients = (r.clients || []).slice().sort((a, b) => num(b, "records") - num(a, "records"));
  rows($("leases").tBodies[0], clients, (tr, c) => {
    tr.dataset.client = str(c, "client_id");
    cell(tr, str(c, "client_id"), "client_id");
    cell(tr, str(c, "state").replace(/^LEASE_STATE_/, ""), "state");
    for (const k of ["records", "bytes", "watermark", "watermark_lag", "max_seq"]) cell(tr, num(c, k), k);
    cell(tr, (num(c, "oldest_record_age_ms") / 1000).toFixed(1) + " s", "oldest_record_age_ms");
  });
}

// ---- Grants: the surfaces and machines named in the URL or the form ------
// (none named: the surfaces of ListSurfaces and the machines they show,
// and every machine of ListMachines at a glance)
function listParam(name) {
  return params.getAll(name).flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean);
}

function field(parent, label, value, key) {
  const span = document.createElement("span");
  span.className = "field";
  span.innerHTML = `${label} <b></b> `;
  span.querySelector("b").textContent = String(value);
  span.querySelector("b").dataset.field = key;
  parent.appendChild(span);
}

function grantsSurface(g) {
  const div = document.createElement("div");
  div.className = "surface";
  div.dataset.surface = str(g, "surface");
  const h = document.createElement("h3");
  h.textContent = str(g, "surface");
  div.appendChild(h);
  const og = g.open_grant;
  field(div, "placement", str(g, "machine") || "none", "machine");
  field(div, "generation", num(g, "generation"), "generation");
  field(div, "epoch", num(g, "epoch"), "epoch");
  field(div, "open grant", og ? num(og, "grant_id") : "none", "open_grant");
  field(div, "on", og ? str(og, "machine") : "-", "open_grant_machine");
  field(div, "grant epoch", og ? num(og, "epoch") : "-", "open_grant_epoch");
  field(div, "closed grants", (g.history || []).length, "history");
  const rej = (g.rejections || []).slice(-10).reverse();
  const t = document.createElement("table");
  t.className = "rejections";
  t.innerHTML = "<thead><tr><th>rejected at</th><th>request</th><th>attempt</th><th>machine</th><th>reason</th><th>message</th><th>repeats</th></tr></thead><tbody></tbody>";
  rows(t.tBodies[0], rej, (tr, x) => {
    cell(tr, new Date(num(x, "at_unix_ms")).toISOString(), "rej_at");
    cell(tr, str(x, "request_id"), "rej_request_id");
    cell(tr, num(x, "attempt"), "rej_attempt");
    cell(tr, str(x, "machine"), "rej_machine");
    cell(tr, str(x, "reason"), "rej_reason");
    cell(tr, str(x, "message"), "rej_message");
    cell(tr, num(x, "repeats"), "rej_repeats");
  });
  div.appendChild(t);
  return div;
}

// ---- Grants at a glance: ListSurfaces, a page at a time ------------------
// With no surface named: every surface with an open grant, a pending row
// or rejections (?page_size=N, default 20; ?page_token= from "next page").
function ageText(ms) {
  const s = Math.max(0, ms) / 1000;
  return s < 120 ? `${s.toFixed(0)} s` : s < 7200 ? `${(s / 60).toFixed(0)} min` : `${(s / 3600).toFixed(1)} h`;
}

// The "first page" and "next page" links of a list (ids prefix-first,
// prefix-next) after its page r; the token travels in the URL as key.
function pageLinks(r, key, prefix) {
  const next = str(r, "next_page_token");
  const link = (token) => {
    const q = new URLSearchParams(location.search);
    if (token) q.set(key, token); else q.delete(key);
    return "?" + q.toString();
  };
  $(prefix + "-next").hidden = !next;
  $(prefix + "-next").href = link(next);
  $(prefix + "-next").dataset.token = next;
  $(prefix + "-first").hidden = !params.get(key);
  $(prefix + "-first").href = link("");
}

async function surfaceList() {
  const body = { page_size: Number(params.get("page_size")) || 0, page_token: params.get("page_token") || "" };
  const r = await api("once.v1.Grants/ListSurfaces", body);
  const list = r.surfaces || [];
  rows($("surface-list").tBodies[0], list, (tr, x) => {
    const og = x.open_grant;
    tr.dataset.surface = str(x, "surface");
    cell(tr, str(x, "surface"), "surface");
    cell(tr, og ? num(og, "grant_id") : "-", "open_grant");
    cell(tr, og ? str(og, "machine") : str(x, "legacy_holder") ? "legacy: " + str(x, "legacy_holder") : "-", "open_grant_machine");
    cell(tr, og ? num(og, "epoch") : "-", "open_grant_epoch");
    cell(tr, og ? ageText(num(r, "read_unix_ms") - num(og, "granted_unix_ms")) : "-", "open_grant_age");
    cell(tr, num(x, "epoch"), "epoch");
    cell(tr, str(x, "machine") || "none", "machine");
    cell(tr, num(x, "pending_work_id") ? `${num(x, "pending_work_id")} on ${str(x, "pending_machine")}` : "-", "pending");
    cell(tr, num(x, "rejections_kept"), "rejections_kept");
    const td = cell(tr, "", "last_rejections");
    for (const j of x.last_rejections || []) {
      const span = document.createElement("span");
      span.className = "rej";
      span.dataset.field = "last_rej_reason";
      span.textContent = str(j, "reason");
      span.title = `${str(j, "request_id")} attempt ${num(j, "attempt")} on ${str(j, "machine")}: ${str(j, "message")}`;
      td.appendChild(span);
      td.appendChild(document.createTextNode(" "));
    }
  });
  $("surface-list").dataset.count = String(list.length);
  pageLinks(r, "page_token", "surfaces");
  // The queues of the machines this page shows (open grants, pending rows).
  const ms = new Set();
  for (const x of list) {
    if (x.open_grant && str(x.open_grant, "machine")) ms.add(str(x.open_grant, "machine"));
    if (str(x, "pending_machine")) ms.add(str(x, "pending_machine"));
  }
  return [...ms].sort();
}

// ---- Queues at a glance: ListMachines, a page at a time -------------------
// With no machine named: every machine with pending or expired rows, or
// deleted (?machine_page_size=N, ?machine_page_token= from "next page");
// a machine's name links to its queue.
async function machineList() {
  const body = { page_size: Number(params.get("machine_page_size")) || 0,
    page_token: params.get("machine_page_token") || "" };
  const r = await api("once.v1.Grants/ListMachines", body);
  const list = r.machines || [];
  rows($("machine-list").tBodies[0], list, (tr, x) => {
    const m = str(x, "machine");
    tr.dataset.machine = m;
    const a = document.createElement("a");
    a.textContent = m;
    a.href = "?" + new URLSearchParams({ view: "grants", machine: m }).toString();
    cell(tr, "", "list_machine").appendChild(a);
    cell(tr, num(x, "pending"), "list_pending");
    cell(tr, num(x, "expired"), "list_expired");
    const t = num(x, "newest_expired_unix_ms");
    cell(tr, t ? new Date(t).toISOString() : "-", "list_newest_expired");
    cell(tr, x.deleted ? "yes" : "no", "list_deleted");
  });
  $("machine-list").dataset.count = String(list.length);
  pageLinks(r, "machine_page_token", "machines");
}

async function grants() {
  const surfaces = listParam("surface");
  let machines = listParam("machine");
  $("grants-surfaces").value = surfaces.join(",");
  $("grants-machines").value = machines.join(",");
  $("surface-glance").hidden = surfaces.length > 0;
  $("machine-glance").hidden = machines.length > 0;
  if (machines.length === 0) await machineList();
  if (surfaces.length === 0) {
    const seen = await surfaceList();
    if (machines.length === 0) machines = seen;
  }
  const got = await Promise.all(surfaces.map((s) => api("once.v1.Grants/GetSurface", { surface: s })));
  $("surfaces").replaceChildren(...got.map(grantsSurface));
  const queues = await Promise.all(machines.map((m) => api("once.v1.Grants/ListQueue", { machine: m })));
  $("queues").replaceChildren(...queues.map((q, i) => {
    const div = document.createElement("div");
    div.className = "surface";
    div.dataset.machine = machines[i];
    div.innerHTML = "<h3></h3>";
    div.querySelector("h3").textContent = machines[i];
    field(div, "pending", (q.pending || []).length, "pending");
    field(div, "expired", (q.expired || []).length, "expired");
    field(div, "machine deleted", q.machine_deleted ? "yes" : "no", "machine_deleted");
    const t = document.createElement("table");
    t.className = "queue";
    t.innerHTML = "<thead><tr><th>work id</th><th>row</th><th>request</th><th>attempt</th><th>surface</th><th>enqueued</th></tr></thead><tbody></tbody>";
    const all = (q.pending || []).map((w) => ["pending", w])
      .concat((q.expired || []).slice(-20).reverse().map((w) => ["expired", w]));
    rows(t.tBodies[0], all, (tr, [kind, w]) => {
      cell(tr, str(w, "work_id"), "work_id");
      cell(tr, kind, "work_kind");
      cell(tr, str(w, "request_id"), "work_request_id");
      cell(tr, num(w, "attempt"), "work_attempt");
      cell(tr, str(w, "surface"), "work_surface");
      cell(tr, new Date(num(w, "enqueued_unix_ms")).toISOString(), "work_enqueued");
    });
    div.appendChild(t);
    return div;
  }));
}

// ---- Outbox: topics and each consumer's lag -------------------------------
async function outbox() {
  const r = await api("once.v1.Outbox/Topics");
  const lines = [];
  for (const t of r.topics || []) {
    const cs = t.consumers && t.consumers.length ? t.consumers : [null];
    for (const c of cs) lines.push({ t, c });
  }
  rows($("topics").tBodies[0], lines, (tr, { t, c }) => {
    tr.dataset.topic = str(t, "name");
    tr.dataset.consumer = c ? str(c, "name") : "";
    cell(tr, str(t, "name"), "name");
    for (const k of ["head", "low_water", "retained_events", "retained_bytes"]) cell(tr, num(t, k), k);
    cell(tr, c ? str(c, "name") : "-", "consumer");
    cell(tr, c ? num(c, "acked") : "-", "acked");
    cell(tr, c ? num(c, "lag") : "-", "lag");
  });
}

const VIEWS = { overview, leases, grants, outbox };

async function tick() {
  if (refused) return;
  try {
    // Every view shows the role from Stats: a replica serves the JSON
    // API only while it leads (a follower closes --http-listen).
    const s = await api("once.v1.Admin/Stats");
    await VIEWS[view](s);
    $("server-role").textContent = s.replicated
      ? `leader · log index ${num(s, "log_index")}` : "single (not replicated)";
    $("server-role").dataset.replicated = s.replicated ? "1" : "0";
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  } catch (e) {
    if (!(e instanceof Refused)) noteError(`${view}: ${e}`);
  }
  if (!refused) setTimeout(tick, every);
}

function start() {
  takeToken();
  if (!VIEWS[view]) { noteError(`no view "${view}"`); return; }
  for (const a of document.querySelectorAll("nav a")) {
    const q = new URLSearchParams(location.search);
    q.set("view", a.dataset.view);
    a.href = "?" + q.toString();
    if (a.dataset.view === view) a.classList.add("current");
  }
  $("view-" + view).hidden = false;
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("login-token").value.trim());
    location.reload();
  });
  $("grants-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams({ view: "grants" });
    if ($("grants-surfaces").value) q.set("surface", $("grants-surfaces").value);
    if ($("grants-machines").value) q.set("machine", $("grants-machines").value);
    location.search = q.toString();
  });
  tick();
}

start();
