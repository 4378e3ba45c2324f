/*
 * options.c — onced's options table and what is derived from it
 * (options.h).
 *
 * Owns: OPTIONS[], in the order of `onced --help`, and the code that reads
 * it: defaults, getopt_long's table, parsing by kind, --help (a row's help
 * text with "%D" for its default), the dump.
 * Invariant: a value is checked against its row's bounds before it is
 * stored; a message names the option as `--name` and the exit status of a
 * bad option is 2, whether it came from the command line or the
 * configuration file.
 * Never: keeps state beyond the getopt table it builds once.
 */
#include "server/options.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>
#include <nng/nng.h>

#include "base/trust.h"
#include "base/duration.h"
#include "base/number.h"
#include "server/http_api.h"
#include "server/metrics.h"

#define DEFAULT_IPC "ipc:///tmp/once.ipc"
#define DEFAULT_TCP "tcp://127.0.0.1:7400"

typedef enum opt_kind {
    OPT_TEXT,     /* no option: a paragraph of --help */
    OPT_FLAG,     /* no argument: the bool at off becomes true */
    OPT_STRING,   /* the argument itself, a pointer into argv */
    OPT_COUNT,    /* a whole number in [lo, hi] */
    OPT_DURATION, /* milliseconds in [lo, hi], written like 2s */
    OPT_BYTES,    /* bytes, suffixes K, M, G; in [lo, hi] when hi != 0 */
    OPT_SETTER,   /* set() checks and stores */
    OPT_CONFIG,   /* --config: read by config_file.h before parsing */
    OPT_HELP,
    OPT_VERSION,
} opt_kind;

#define OPT_RELOAD   1u /* a SIGHUP puts a change in force */
#define OPT_ZERO_OFF 2u /* OPT_DURATION: "0" is accepted (off) */
#define OPT_NO_KEY   4u /* not a key of the configuration file */

typedef struct opt_def opt_def;

struct opt_def {
    const char *name;
    const char *arg; /* its name in --help; NULL: takes none */
    opt_kind kind;
    unsigned flags;
    uint64_t def, lo, hi;
    const char *def_str; /* OPT_STRING's default; or --help's for %D */
    size_t off, size;    /* where in onced_options */
    int (*set)(const opt_def *d, const char *arg, onced_options *o);
    const char *help; /* lines after the first indented; OPT_TEXT: as is */
};

/* The rows, by kind (the table is laid out by hand). */
/* clang-format off */
#define AT(m) offsetof(onced_options, m), sizeof(((onced_options *)0)->m)
#define FLAG(n, m, help)                                                       \
    {n, NULL, OPT_FLAG, 0, 0, 0, 0, NULL, AT(m), NULL, help}
#define STRING(n, arg, m, def, help)                                           \
    {n, arg, OPT_STRING, 0, 0, 0, 0, def, AT(m), NULL, help}
#define COUNT(n, arg, m, def, lo, hi, fl, help)                                \
    {n, arg, OPT_COUNT, fl, def, lo, hi, NULL, AT(m), NULL, help}
#define DURATION(n, m, def, lo, hi, fl, help)                                  \
    {n, "DUR", OPT_DURATION, fl, def, lo, hi, NULL, AT(m), NULL, help}
#define BYTES(n, m, def, lo, hi, help)                                         \
    {n, "BYTES", OPT_BYTES, 0, def, lo, hi, NULL, AT(m), NULL, help}
#define SETTER(n, arg, fn, def, fl, help)                                      \
    {n, arg, OPT_SETTER, fl, 0, 0, 0, def, 0, 0, fn, help}
#define ACTION(n, arg, kind, fl, help)                                         \
    {n, arg, kind, fl, 0, 0, 0, NULL, 0, 0, NULL, help}
#define TEXT(text) {NULL, NULL, OPT_TEXT, 0, 0, 0, 0, NULL, 0, 0, NULL, text}
/* clang-format on */

static int set_listen(const opt_def *d, const char *arg, onced_options *o);
static int set_no_listen_check(const opt_def *d, const char *arg,
                               onced_options *o);
static int set_log_format(const opt_def *d, const char *arg, onced_options *o);
static int set_metrics(const opt_def *d, const char *arg, onced_options *o);
static int set_http(const opt_def *d, const char *arg, onced_options *o);

/* clang-format off */
static const opt_def OPTIONS[] = {
    TEXT("usage: onced [options]\n"
         "\n"
         "The once server: exactly-once RPCs over nng, with completion\n"
         "records committed to LevelDB in the same synced batch as the\n"
         "effect.\n"
         "\n"
         "options:\n"),
    STRING("data", "DIR", srv.data_dir, "./data",
           "LevelDB folder (default %D); a store is created\n"
           "only in a missing or empty folder, and a\n"
           "folder with onced data but no complete\n"
           "LevelDB is refused (docs/operations.md)"),
    SETTER("listen", "URL", set_listen, NULL, 0,
           "ipc://PATH, tcp://HOST:PORT; repeatable\n"
           "(default " DEFAULT_IPC " and " DEFAULT_TCP ")"),
    COUNT("contexts", "N", srv.contexts, 256, 1, 65536, 0,
          "requests in flight (default %D)"),
    COUNT("conn-inflight", "N", srv.conn_inflight, 64, 1, 65536, 0,
          "requests one connection may have in flight\n"
          "(default %D); beyond them its requests are\n"
          "dropped unread until it reads its replies"),
    DURATION("send-timeout", srv.send_timeout_ms, 10000, 100, 3600000, 0,
             "a reply its connection has not taken in\n"
             "this long closes that connection (default\n"
             "%D); the call stays executed and recorded"),
    COUNT("conn-max", "N", srv.conn_max, 1000, 1, 1000000, 0,
          "open connections in all (default %D, and\n"
          "at most the open-file limit less 128); a\n"
          "new one beyond it closes the longest-idle\n"
          "one (idle 1s at least), else is refused"),
    COUNT("conn-max-per-peer", "N", srv.conn_max_per_peer, 128, 1, 1000000,
          0,
          "open connections of one peer (an IP\n"
          "address; for ipc:// a uid), the same way\n"
          "(default %D)"),
    DURATION("conn-idle-timeout", srv.conn_idle_ms, 120000, 100, 86400000,
             OPT_ZERO_OFF,
             "a connection without a request in\n"
             "flight or received for this long is closed\n"
             "(default %D; 0: never)"),
    COUNT("recv-max", "BYTES", srv.recv_max, 1u << 20, 1024, 64u << 20, 0,
          "largest request accepted (default %D);\n"
          "larger ones are dropped unread"),
    DURATION("lease-ttl", srv.lease_ttl_ms, 30000, 100, 86400000, OPT_RELOAD,
             "TTL of a lease that asks for none (default %D;\n"
             "100ms to --lease-ttl-max)"),
    DURATION("lease-ttl-max", srv.lease_ttl_max_ms, 3600000, 100, 86400000,
             OPT_RELOAD,
             "largest TTL a client may ask for (default %D)"),
    COUNT("window", "N", srv.window, 512, 1, 1u << 20, OPT_RELOAD,
          "unacknowledged calls allowed per client (default %D)"),
    DURATION("gc-interval", srv.gc_interval_ms, 200, 1, 3600000, 0,
             "time between collector passes (default %D)"),
    COUNT("gc-budget", "N", srv.gc_budget, 20000, 1, 10000000, 0,
          "record deletions per pass (default %D)"),
    COUNT("compact-after", "N", srv.compact_after, 10000, 0, 1ull << 40, 0,
          "compact LevelDB when the collector, having\n"
          "deleted N keys since the last compaction, finds\n"
          "nothing to delete (default %D; 0: never)"),
    COUNT("lease-max", "N", srv.lease_max, 100000, 0, 1u << 30, 0,
          "live leases in all; OpenLease beyond it is\n"
          "refused RESOURCE_EXHAUSTED/LEASE_CAPACITY\n"
          "(default %D; 0: no cap)"),
    COUNT("lease-max-per-principal", "N", srv.lease_max_principal, 10000, 0,
          1u << 30, 0,
          "live leases of one principal\n"
          "(OPEN mode: of one OpenLease principal\n"
          "name); beyond it RESOURCE_EXHAUSTED/\n"
          "LEASE_QUOTA (default %D; 0: no cap)"),
    BYTES("disk-free-min", srv.disk_free_min, 64ull << 20, 0, 0,
          "below this many free bytes on the data\n"
          "folder's file system, new mutating calls and\n"
          "OpenLease are refused RESOURCE_EXHAUSTED/\n"
          "DISK_LOW; reads, renewals, acknowledgements\n"
          "and collection go on (default %D; 0: off;\n"
          "suffixes K, M, G)"),
    /* Keys and values are also bounded by --recv-max, the whole
     * request's size. */
    BYTES("kv-key-max", srv.kv.key_max, KV_KEY_MAX_DEFAULT, 1, 64u << 20,
          "largest key of once.v1.KV (default %D)"),
    BYTES("kv-value-max", srv.kv.value_max, KV_VALUE_MAX_DEFAULT, 1,
          64u << 20,
          "largest value (default %D)"),
    COUNT("kv-ops-max", "N", srv.kv.ops_max, KV_OPS_MAX_DEFAULT, 1, 100000,
          0,
          "compares and ops of one KV Txn (default\n"
          "%D); each bound refused INVALID_ARGUMENT"),
    BYTES("kv-quota", srv.kv.quota, KV_QUOTA_DEFAULT, 0, 0,
          "keys and values one principal may store\n"
          "(default %D; 0: no cap); past it a Txn is\n"
          "refused RESOURCE_EXHAUSTED/KV_QUOTA"),
    BYTES("outbox-max-bytes", srv.outbox.max_bytes, OUTBOX_MAX_BYTES_DEFAULT,
          0, 0,
          "events one outbox topic may retain\n"
          "(default %D; 0: no bound); past it an\n"
          "emit is refused RESOURCE_EXHAUSTED/\nOUTBOX_FULL"),
    BYTES("outbox-payload-max", srv.outbox.payload_max,
          OUTBOX_PAYLOAD_MAX_DEFAULT, 0, 0,
          "largest event payload (default\n"
          "%D)"),
    FLAG("dev", srv.dev,
         "development mode: on first start create\n"
         "DIR/principals with the operator \"dev\" and\n"
         "write its key to DIR/dev.key (make run)"),
    STRING("tls-cert", "FILE", srv.tls_cert, NULL,
           "PEM certificate (chain) for tls+tcp:// URLs"),
    STRING("tls-key", "FILE", srv.tls_key, NULL, "its PEM private key"),
    DURATION("listen-check", srv.listen_check_ms, 1000, 100, 3600000, 0,
             "how often each ipc:// listener is probed\n"
             "and, if it stopped accepting, started again\n"
             "(default %D; tls+tcp:// ones every 30 s at\n"
             "least; nng 1.5 ends such a listener when a\n"
             "peer hangs up during its handshake)"),
    SETTER("no-listen-check", NULL, set_no_listen_check, NULL, 0,
           "do not probe"),
    ACTION("config", "FILE", OPT_CONFIG, OPT_RELOAD | OPT_NO_KEY,
           "read options from FILE: one \"key = value\"\n"
           "a line, the keys being these long options\n"
           "without the dashes; flags given here win"),
    SETTER("log-format", "F", set_log_format, "text", OPT_RELOAD,
           "text (default) or json (one object a line)"),
    SETTER("metrics-listen", "URL", set_metrics, NULL, 0,
           "serve Prometheus metrics at URL/metrics\n"
           "(http://HOST:PORT, e.g. http://127.0.0.1:9464;\n"
           "default: none)"),
    SETTER("http-listen", "URL", set_http, NULL, 0,
           "serve the JSON API, POST URL/v1/METHOD\n"
           "(docs/http.md), and /metrics unless\n"
           "--metrics-listen names another URL\n"
           "(http://HOST:PORT, or https:// with\n"
           "--tls-cert and --tls-key; default: none)"),
    COUNT("http-conn-max", "N", srv.http_conn_max, 256, 1, 1000000, 0,
          "HTTP connections open in all (default %D,\n"
          "and at most half of what the open-file\n"
          "limit leaves); a new one beyond it closes\n"
          "the one longest waiting for a request (1s\n"
          "at least), else is answered 503 and closed"),
    COUNT("http-conn-max-per-peer", "N", srv.http_conn_max_per_peer, 64, 1,
          1000000, 0,
          "HTTP connections open from one IP address\n"
          "(default %D); a new one beyond them is\n"
          "answered 429 and closed (behind a proxy,\n"
          "raise it to --http-conn-max)"),
    DURATION("http-header-timeout", srv.http_header_ms, 10000, 100, 3600000, 0,
             "an HTTP request's line and headers must\n"
             "arrive within this long of its first byte\n"
             "(default %D), else 408 and the connection\n"
             "is closed"),
    TEXT("\n"
         "replication (docs/replication.md; off unless --replicate):\n"),
    STRING("replicate", "URLS", repl.endpoints, NULL,
           "etcd endpoints, http://HOST:PORT,...: this\n"
           "onced is one replica; the leader appends\n"
           "every commit to a log in etcd, followers\n"
           "apply it and answer UNAVAILABLE/NOT_LEADER"),
    STRING("cluster", "NAME", repl.cluster, "once",
           "the replicas' common name (default %D)"),
    STRING("advertise", "URL", repl.advertise, NULL,
           "the URL clients reach this replica on\n"
           "(default the first --listen)"),
    COUNT("replicate-ttl", "SECONDS", repl.ttl_s, 5, 1, 600, 0,
          "the leader's etcd lease (default %D;\n"
          "failover takes about this long)"),
    COUNT("replicate-retain", "N", repl.retain, 10000, 1, UINT64_MAX / 2, 0,
          "log entries the leader keeps in etcd\n"
          "for replicas that lag or are gone (default\n"
          "%D); entries every replica applied are\n"
          "deleted, a replica behind them reseeds from\n"
          "a snapshot"),
    STRING("replicate-key", "FILE", repl.key_file, NULL,
           "a key file (\"NAME KEYHEX\", oncectl\n"
           "principal add --key-out) whose principal\n"
           "signs this replica's Admin.Snapshot\n"
           "requests when it seeds: needed when the\n"
           "cluster has principals; the policy must\n"
           "allow it /once.v1.Admin/Snapshot. Read at\n"
           "the start (mode 0600, owned by this user)"),
    STRING("etcd-cacert", "FILE", repl.etcd_tls.cacert, NULL,
           "CA (PEM) of the etcd members'\n"
           "certificates (https://; default: the\n"
           "system's CAs)"),
    STRING("etcd-cert", "FILE", repl.etcd_tls.cert, NULL,
           "client certificate (PEM) for etcd's\n"
           "--client-cert-auth; with --etcd-key"),
    STRING("etcd-key", "FILE", repl.etcd_tls.key, NULL,
           "its private key (PEM)"),
    TEXT("\n"
         "Authentication is on when DIR/principals exists (oncectl\n"
         "principal add --data DIR); without it onced runs OPEN and says\n"
         "so. SIGHUP re-reads DIR/principals, DIR/policy and the --config\n"
         "file (window, lease-ttl, lease-ttl-max and log-format change at\n"
         "once; other keys at the next start).\n"
         "\n"
         "Durations are written 200ms, 2s, 5m, 1h.\n"),
    ACTION("version", NULL, OPT_VERSION, OPT_NO_KEY,
           "the versions of onced, nng and LevelDB"),
    ACTION("help", NULL, OPT_HELP, OPT_NO_KEY, "this text"),
    TEXT("\n"
         "Stop with SIGINT or SIGTERM: received calls finish and are "
         "synced.\n"),
};
/* clang-format on */

#define NROWS       (sizeof(OPTIONS) / sizeof(OPTIONS[0]))
#define VAL_FIRST   256 /* getopt_long's value of row i: VAL_FIRST + i */
#define HELP_COLUMN 20  /* where --help's explanations start */
#define SHORT_HELP  'h' /* -h: --help */

/* --- values as --help writes them -------------------------------------- */

/* bytes: the largest of G, M, K that divides it, else the number. */
static void
fmt_bytes(uint64_t v, char *buf, size_t len)
{
    static const char units[] = "GMK";

    for (unsigned i = 0; i < 3 && v != 0; i++) {
        unsigned shift = 30 - 10 * i;
        if (v % (1ull << shift) == 0) {
            snprintf(buf, len, "%llu%c", (unsigned long long)(v >> shift),
                     units[i]);
            return;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* A row's default as --help writes it, or "" when it has none. */
static const char *
fmt_default(const opt_def *d, char *buf, size_t len)
{
    switch (d->kind) {
    case OPT_COUNT:
        snprintf(buf, len, "%llu", (unsigned long long)d->def);
        return buf;
    case OPT_DURATION:
        return duration_format(d->def, buf, len);
    case OPT_BYTES:
        fmt_bytes(d->def, buf, len);
        return buf;
    default:
        return d->def_str != NULL ? d->def_str : "";
    }
}

/* A help text: "\n" indents the next line by indent, "%D" is d's
 * default. */
static void
put_help(FILE *f, const opt_def *d, int indent)
{
    char buf[64];

    for (const char *s = d->help; *s != '\0'; s++) {
        if (s[0] == '%' && s[1] == 'D') {
            fputs(fmt_default(d, buf, sizeof(buf)), f);
            s++;
        } else if (*s == '\n' && s[1] != '\0') {
            fprintf(f, "\n%*s", indent, "");
        } else {
            fputc(*s, f);
        }
    }
}

void
options_usage(FILE *f)
{
    for (size_t i = 0; i < NROWS; i++) {
        const opt_def *d = &OPTIONS[i];
        int n;

        if (d->kind == OPT_TEXT) {
            put_help(f, d, 0);
            continue;
        }
        n = fprintf(f, "  %s--%s%s%s", d->kind == OPT_HELP ? "-h, " : "",
                    d->name, d->arg != NULL ? " " : "",
                    d->arg != NULL ? d->arg : "");
        fprintf(f, "%*s", n < HELP_COLUMN ? HELP_COLUMN - n : 2, "");
        put_help(f, d, HELP_COLUMN);
        fputc('\n', f);
    }
}

void
options_dump(FILE *f)
{
    static const char *const kinds[] = {
        "text",  "flag",   "string", "count", "duration",
        "bytes", "setter", "config", "help",  "version",
    };
    char buf[64];

    for (size_t i = 0; i < NROWS; i++) {
        const opt_def *d = &OPTIONS[i];
        const char *def = fmt_default(d, buf, sizeof(buf));

        if (d->kind != OPT_TEXT) {
            fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\n", d->name,
                    d->arg != NULL ? d->arg : "-", kinds[d->kind],
                    *def != '\0' ? def : "-",
                    (d->flags & OPT_RELOAD) ? "reload" : "restart",
                    (d->flags & OPT_NO_KEY) ? "flag-only" : "key");
        }
    }
}

/* --- the table as getopt_long's ---------------------------------------- */

const struct option *
options_getopt(void)
{
    static struct option table[NROWS + 1];
    size_t n = 0;

    if (table[0].name != NULL) {
        return table;
    }
    for (size_t i = 0; i < NROWS; i++) {
        const opt_def *d = &OPTIONS[i];

        if (d->kind != OPT_TEXT) {
            table[n].name = d->name;
            table[n].has_arg = d->arg != NULL ? required_argument : no_argument;
            table[n].val =
                d->kind == OPT_HELP ? SHORT_HELP : VAL_FIRST + (int)i;
            n++;
        }
    }
    return table;
}

/* The row of the long option name, or NULL. */
static const opt_def *
row_named(const char *name)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (OPTIONS[i].kind != OPT_TEXT && strcmp(OPTIONS[i].name, name) == 0) {
            return &OPTIONS[i];
        }
    }
    return NULL;
}

bool
options_file_key(const char *name)
{
    const opt_def *d = row_named(name);

    return d != NULL && !(d->flags & OPT_NO_KEY);
}

bool
options_reloadable(const char *name)
{
    const opt_def *d = row_named(name);

    return d != NULL && (d->flags & OPT_RELOAD) != 0;
}

/* --- parsing ------------------------------------------------------------ */

static void
put_u64(onced_options *o, const opt_def *d, uint64_t v)
{
    char *p = (char *)o + d->off;

    if (d->size == sizeof(uint32_t)) {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, sizeof(x));
    } else {
        memcpy(p, &v, sizeof(v));
    }
}

static void
defaults(onced_options *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < NROWS; i++) {
        const opt_def *d = &OPTIONS[i];

        if (d->kind == OPT_COUNT || d->kind == OPT_DURATION ||
            d->kind == OPT_BYTES) {
            put_u64(o, d, d->def);
        } else if (d->kind == OPT_STRING) {
            memcpy((char *)o + d->off, &d->def_str, sizeof(d->def_str));
        }
    }
}

/* A whole number (strict decimal, number.h) or a duration (duration.h),
 * by the row's kind, in [lo, hi]. */
static int
parse_ranged(const opt_def *d, const char *s, uint64_t *out)
{
    bool dur = d->kind == OPT_DURATION;
    uint64_t v;

    if (dur && (d->flags & OPT_ZERO_OFF) && strcmp(s, "0") == 0) {
        *out = 0;
        return 0;
    }
    if ((dur ? duration_parse(s, &v) : number_parse_u64_all(s, &v)) != 0 ||
        v < d->lo || v > d->hi) {
        fprintf(stderr,
                dur ? "onced: --%s wants a duration from %llums to %llums "
                      "written like 200ms, 2s, 5m or 1h, got \"%s\"\n"
                    : "onced: --%s wants a whole number from %llu to %llu, "
                      "got \"%s\"\n",
                d->name, (unsigned long long)d->lo, (unsigned long long)d->hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

/* A byte count with an optional K, M or G suffix (powers of 1024), in
 * [lo, hi] when the row has bounds. */
static int
parse_bytes(const opt_def *d, const char *s, uint64_t *out)
{
    const char *end = s;
    uint64_t v = 0;
    unsigned shift = 0;
    int rv = number_parse_u64(s, &end, &v);
    char hi[32];

    if (rv == 0 && (*end == 'K' || *end == 'M' || *end == 'G')) {
        shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
        end++;
    }
    if (rv != 0 || *end != '\0' || v > (UINT64_MAX >> 1) >> shift) {
        fprintf(stderr,
                "onced: --%s wants a number of bytes, optionally with K, M or "
                "G, got \"%s\"\n",
                d->name, s);
        return -1;
    }
    v <<= shift;
    if (d->hi != 0 && (v < d->lo || v > d->hi)) {
        fmt_bytes(d->hi, hi, sizeof(hi));
        fprintf(stderr, "onced: --%s is %llu byte%s to %s, got \"%s\"\n",
                d->name, (unsigned long long)d->lo, d->lo == 1 ? "" : "s", hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int
set_listen(const opt_def *d, const char *arg, onced_options *o)
{
    (void)d;
    if (o->srv.nlisten == SERVER_LISTEN_MAX) {
        fprintf(stderr, "onced: at most %d --listen addresses\n",
                SERVER_LISTEN_MAX);
        return -1;
    }
    o->srv.listen[o->srv.nlisten++] = arg;
    return 0;
}

static int
set_no_listen_check(const opt_def *d, const char *arg, onced_options *o)
{
    (void)d;
    (void)arg;
    o->srv.listen_check_ms = 0; /* listener_open: no watch */
    return 0;
}

static int
set_log_format(const opt_def *d, const char *arg, onced_options *o)
{
    if (strcmp(arg, "json") != 0 && strcmp(arg, "text") != 0) {
        fprintf(stderr, "onced: --%s is text or json, got \"%s\"\n", d->name,
                arg);
        return -1;
    }
    o->json = strcmp(arg, "json") == 0;
    return 0;
}

/* A URL option: *dst = arg unless why (its problem) says otherwise. */
static int
set_url(const opt_def *d, const char *arg, const char *why, const char **dst)
{
    if (why != NULL) {
        fprintf(stderr, "onced: --%s \"%s\": %s\n", d->name, arg, why);
        return -1;
    }
    *dst = arg;
    return 0;
}

static int
set_metrics(const opt_def *d, const char *arg, onced_options *o)
{
    return set_url(d, arg, metrics_url_problem(arg), &o->metrics_url);
}

static int
set_http(const opt_def *d, const char *arg, onced_options *o)
{
    return set_url(d, arg, http_api_url_problem(arg), &o->http_url);
}

/* Row d given with arg (NULL for none) into *o: OPTIONS_GO_ON, or the
 * exit status (0 after --help/--version, 2 for a bad value). */
static int
apply(const opt_def *d, char *arg, onced_options *o)
{
    uint64_t v = 0;
    int rv = 0;

    switch (d->kind) {
    case OPT_FLAG:
        *(bool *)((char *)o + d->off) = true;
        break;
    case OPT_STRING:
        memcpy((char *)o + d->off, &arg, sizeof(arg));
        break;
    case OPT_COUNT:
    case OPT_DURATION:
    case OPT_BYTES:
        rv = d->kind == OPT_BYTES ? parse_bytes(d, arg, &v)
                                  : parse_ranged(d, arg, &v);
        if (rv == 0) {
            put_u64(o, d, v);
        }
        break;
    case OPT_SETTER:
        rv = d->set(d, arg, o);
        break;
    case OPT_HELP:
        options_usage(stdout);
        return 0;
    case OPT_VERSION:
        printf("onced %s (nng %s, LevelDB %d.%d)\n", ONCE_VERSION,
               nng_version(), leveldb_major_version(), leveldb_minor_version());
        return 0;
    case OPT_CONFIG: /* read by config_args_build */
    case OPT_TEXT:
        break;
    }
    return rv == 0 ? OPTIONS_GO_ON : 2;
}

/* --- options that go together ------------------------------------------ */

/* --replicate's endpoints and the --etcd-* files: checked before onced
 * starts, so a typo is an exit status 2 and a message, not a replica that
 * retries etcd for ever. 0 or -1 (said on stderr). */
static int
check_etcd_options(const repl_config *rc)
{
    const char *files[] = {rc->etcd_tls.cacert, rc->etcd_tls.cert,
                           rc->etcd_tls.key};
    const char *names[] = {"--etcd-cacert", "--etcd-cert", "--etcd-key"};
    bool tls = false, any = false;
    unsigned mode;

    if (!etcd_endpoints_valid(rc->endpoints, &tls)) {
        fprintf(stderr,
                "onced: --replicate wants etcd's client URLs, http://HOST:PORT "
                "or https://HOST:PORT, comma-separated (at most %d), got "
                "\"%s\"\n",
                ETCD_ENDPOINTS_MAX, rc->endpoints);
        return -1;
    }
    for (size_t i = 0; i < 3; i++) {
        FILE *f;

        if (files[i] == NULL) {
            continue;
        }
        any = true;
        if ((f = fopen(files[i], "r")) == NULL) {
            fprintf(stderr, "onced: %s %s: %s\n", names[i], files[i],
                    strerror(errno));
            return -1;
        }
        fclose(f);
    }
    if ((rc->etcd_tls.cert == NULL) != (rc->etcd_tls.key == NULL)) {
        fprintf(stderr, "onced: --etcd-cert and --etcd-key go together\n");
        return -1;
    }
    if (rc->etcd_tls.key != NULL &&
        trust_readable_by_others(rc->etcd_tls.key, &mode)) {
        fprintf(stderr,
                "onced: warning: --etcd-key %s is readable by others (mode "
                "%03o): whoever reads it can write this cluster's log in "
                "etcd. Fix: chmod 600 %s\n",
                rc->etcd_tls.key, mode, rc->etcd_tls.key);
    }
    if (any && !tls) {
        fprintf(stderr, "onced: --etcd-cacert, --etcd-cert and --etcd-key are "
                        "for https:// etcd endpoints; --replicate has none\n");
        return -1;
    }
    return 0;
}

/* The options that go together, checked once all are read; the default
 * listeners when none was given. 0 or -1 (said on stderr). */
static int
options_together(server_config *cfg, const repl_config *rc)
{
    if (cfg->lease_ttl_ms > cfg->lease_ttl_max_ms) {
        fprintf(stderr, "onced: --lease-ttl is above --lease-ttl-max\n");
        return -1;
    }
    if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
        fprintf(stderr, "onced: --tls-cert and --tls-key go together\n");
        return -1;
    }
    if (cfg->nlisten == 0) {
        cfg->listen[cfg->nlisten++] = DEFAULT_IPC;
        cfg->listen[cfg->nlisten++] = DEFAULT_TCP;
    }
    if (rc->endpoints == NULL &&
        (strcmp(rc->cluster, "once") != 0 || rc->advertise != NULL ||
         rc->key_file != NULL || rc->etcd_tls.cacert != NULL ||
         rc->etcd_tls.cert != NULL || rc->etcd_tls.key != NULL)) {
        fprintf(stderr, "onced: --cluster, --advertise, --replicate-key and "
                        "--etcd-* need --replicate\n");
        return -1;
    }
    return rc->endpoints != NULL ? check_etcd_options(rc) : 0;
}

int
options_parse(int argc, char **argv, onced_options *out)
{
    const struct option *table = options_getopt();
    onced_options o;
    int ch, rv;

    defaults(&o);
    optind = 0; /* glibc: start over (SIGHUP parses again) */
    while ((ch = getopt_long(argc, argv, "h", table, NULL)) != -1) {
        const opt_def *d = NULL;

        if (ch == SHORT_HELP) {
            for (d = OPTIONS; d->kind != OPT_HELP; d++) {
            }
        } else if (ch >= VAL_FIRST && (size_t)(ch - VAL_FIRST) < NROWS) {
            d = &OPTIONS[ch - VAL_FIRST];
        }
        if (d == NULL) {
            options_usage(stderr);
            return 2;
        }
        if ((rv = apply(d, optarg, &o)) != OPTIONS_GO_ON) {
            return rv;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "onced: unexpected argument \"%s\" (see --help)\n",
                argv[optind]);
        return 2;
    }
    if (options_together(&o.srv, &o.repl) != 0) {
        return 2;
    }
    *out = o;
    return OPTIONS_GO_ON;
}
