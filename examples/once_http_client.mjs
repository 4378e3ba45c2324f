// once_http_client.mjs — a once client in Node 18+ with only its built-in fetch
// and crypto, over onced's HTTP/JSON API (docs/http.md). Opens a lease, then
// makes CALLS increments of a counter, each under its own rpc id CLIENT:SEQ; it
// takes each first reply as lost and sends the call again under the same rpc
// id, which gets the stored reply (replayed: true), not a second increment.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const USAGE = `usage: node once_http_client.mjs [--key-file FILE] [--counter NAME] [--calls N] URL
  URL: onced's --http-listen. Adds 1 to counter NAME (jobs) N (2) times, each
  call sent twice under one rpc id; prints the replies and the counter.
  --key-file FILE: sign as FILE's principal (its line "NAME KEYHEX").
  Exit status: 0 done, 1 a call failed, 2 usage.`;
const usage = (why) => { console.error(`${why}\n${USAGE}`); process.exit(2); };
const opts = { help: { type: "boolean" }, "key-file": { type: "string" },
  counter: { type: "string", default: "jobs" }, calls: { type: "string", default: "2" } };
let a;
try { a = parseArgs({ options: opts, allowPositionals: true }); } catch (e) { usage(e.message); }
if (a.values.help) { console.log(USAGE); process.exit(0); }
const { counter: name, calls, "key-file": keyFile } = a.values, [url] = a.positionals;
if (a.positionals.length !== 1 || !/^\d+$/.test(calls)) usage("want one URL and a number of calls");
let signer = null; // from the key file's first line that is not a comment
if (keyFile !== undefined) {
  let line;
  try {
    line = readFileSync(keyFile, "utf8").split("\n").map((l) => l.replace(/#.*/, "").trim()).find(Boolean);
  } catch (e) { usage(e.message); }
  const [who, hex, ...more] = (line ?? "").split(/\s+/);
  if (more.length || !/^[\w.@-]{1,128}$/.test(who) || !/^[0-9a-fA-F]{64}$/.test(hex ?? ""))
    usage(`key file ${keyFile}: want one line "NAME KEYHEX"`);
  signer = { name: who, key: Buffer.from(hex, "hex") };
}

// One POST; the tag (HMAC-SHA-512 cut to 32 bytes) covers the method, the
// Once-Rpc-Id and Once-First-Incomplete values and the body, as sent.
async function call(method, msg, rpcId = "", first = "", attempt = 1) {
  const body = JSON.stringify(msg), h = { "Content-Type": "application/json", "Once-Attempt": `${attempt}` };
  if (rpcId) h["Once-Rpc-Id"] = rpcId;
  if (first) h["Once-First-Incomplete"] = first;
  if (signer) {
    h["Once-Principal"] = signer.name;
    h["Once-Tag"] = createHmac("sha512", signer.key).update(`${method}\n${rpcId}\n${first}\n${body}`)
      .digest("hex").slice(0, 64);
  }
  const res = await fetch(`${url}/v1${method}`, { method: "POST", headers: h, body,
                                                  signal: AbortSignal.timeout(10000) });
  const r = await res.json().catch(() => ({ code: "?", message: "no JSON reply" }));
  if (res.status !== 200)
    throw new Error(`${method} ${rpcId}`.trim() + `: HTTP ${res.status} ${r.code}/${r.reason}: ${r.message}`);
  return r;
}

try {
  const { clientId } = await call("/once.v1.Lease/OpenLease", { ttlMs: "60000" });
  console.log(`lease: client id ${clientId}`);
  for (let seq = 1; seq <= calls; seq++) {
    const rid = `${clientId}:${seq}`; // first incomplete = seq: all earlier replies came
    const send = (attempt) => call("/once.v1.Counter/Increment", { name, by: 1 }, rid, `${seq}`, attempt);
    const r1 = await send(1); // ... and say this reply is lost on the way back:
    const r2 = await send(2); // the same call again, under the same rpc id
    console.log(`${rid}: value ${r1.value}, replayed ${r1.replayed}; again: value ${r2.value}, ` +
                `replayed ${r2.replayed}`);
    if (!r2.replayed || r2.value !== r1.value) throw new Error(`${rid}: the retry did not get the stored reply`);
  }
  await call("/once.v1.Lease/CloseLease", { clientId });
  console.log(`${name} = ${(await call("/once.v1.Counter/Get", { name })).value ?? 0}`);
} catch (e) {
  console.error(`once_http_client: ${e.message}${e.cause ? `: ${e.cause.message}` : ""}`);
  process.exit(1);
}
