/*
 * main.c — onced: options, signals, start-up and clean shutdown.
 *
 * SIGINT/SIGTERM: stop receiving, execute what was received, wait for every
 * commit to be synced and for a running compaction (Admin.Compact) to end,
 * close LevelDB, exit 0. Nothing is half-written: a call's effect and
 * record are one LevelDB batch. SIGHUP: re-read
 * <data>/principals and <data>/policy (auth.h; onced also notices changes
 * by itself within AUTH_RECHECK_MS) and the --config file, applying what
 * can change while running (RELOADABLE below) and logging the rest as
 * waiting for a restart.
 *
 * Options come from one getopt table (onced_opts); the configuration file
 * (config_file.h) accepts every long option of it as a key, so a new option
 * needs no work there. Under systemd (Type=notify) notify.h says READY once
 * the store is open and the listeners are up, and STOPPING on shutdown.
 * --metrics-listen: the Prometheus endpoint (metrics.h), started after the
 * server and stopped before it.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>
#include <nng/nng.h>

#include "server/config_file.h"
#include "proto/duration.h"
#include "proto/log.h"
#include "server/metrics.h"
#include "server/notify.h"
#include "proto/number.h"
#include "repl/replica.h"
#include "server/server.h"
#include "server/test_seams.h" /* no-op macros but in onced_test */

#define DEFAULT_DATA "./data"
#define DEFAULT_IPC  "ipc:///tmp/once.ipc"
#define DEFAULT_TCP  "tcp://127.0.0.1:7400"

#define DEFAULT_LEASE_MAX           100000
#define DEFAULT_LEASE_MAX_PRINCIPAL 10000
#define DEFAULT_DISK_FREE_MIN       (64ULL << 20)

/* usage's part on replication. */
static void
usage_replication(FILE *f)
{
    fputs("replication (docs/replication.md; off unless --replicate):\n"
          "  --replicate URLS  etcd endpoints, http://HOST:PORT,...: this\n"
          "                    onced is one replica; the leader appends\n"
          "                    every commit to a log in etcd, followers\n"
          "                    apply it and answer UNAVAILABLE/NOT_LEADER\n"
          "  --cluster NAME    the replicas' common name (default once)\n"
          "  --advertise URL   the URL clients reach this replica on\n"
          "                    (default the first --listen)\n"
          "  --replicate-ttl SECONDS  the leader's etcd lease (default 5;\n"
          "                    failover takes about this long)\n"
          "  --replicate-retain N  log entries the leader keeps in etcd\n"
          "                    for replicas that lag or are gone (default\n"
          "                    10000); entries every replica applied are\n"
          "                    deleted, a replica behind them reseeds from\n"
          "                    a snapshot\n"
          "  --replicate-key FILE  a key file (\"NAME KEYHEX\", oncectl\n"
          "                    principal add --key-out) whose principal\n"
          "                    signs this replica's Admin.Snapshot\n"
          "                    requests when it seeds: needed when the\n"
          "                    cluster has principals; the policy must\n"
          "                    allow it /once.v1.Admin/Snapshot. Read at\n"
          "                    the start (mode 0600, owned by this user)\n"
          "  --etcd-cacert FILE  CA (PEM) of the etcd members'\n"
          "                    certificates (https://; default: the\n"
          "                    system's CAs)\n"
          "  --etcd-cert FILE  client certificate (PEM) for etcd's\n"
          "                    --client-cert-auth; with --etcd-key\n"
          "  --etcd-key FILE   its private key (PEM)\n",
          f);
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: onced [options]\n"
            "\n"
            "The once server: exactly-once RPCs over nng, with completion\n"
            "records committed to LevelDB in the same synced batch as the\n"
            "effect.\n"
            "\n"
            "options:\n"
            "  --data DIR        LevelDB folder (default %s); a store is "
            "created\n"
            "                    only in a missing or empty folder, and a\n"
            "                    folder with onced data but no complete\n"
            "                    LevelDB is refused (docs/operations.md)\n"
            "  --listen URL      ipc://PATH, tcp://HOST:PORT; repeatable\n"
            "                    (default %s and %s)\n"
            "  --contexts N      requests in flight (default 256)\n"
            "  --conn-inflight N requests one connection may have in flight\n"
            "                    (default 64); beyond them its requests are\n"
            "                    dropped unread until it reads its replies\n"
            "  --send-timeout DUR  a reply its connection has not taken in\n"
            "                    this long closes that connection (default\n"
            "                    10s); the call stays executed and recorded\n"
            "  --conn-max N      open connections in all (default 1000, and\n"
            "                    at most the open-file limit less 128); a\n"
            "                    new one beyond it closes the longest-idle\n"
            "                    one (idle 1s at least), else is refused\n"
            "  --conn-max-per-peer N  open connections of one peer (an IP\n"
            "                    address; for ipc:// a uid), the same way\n"
            "                    (default 128)\n"
            "  --conn-idle-timeout DUR  a connection without a request in\n"
            "                    flight or received for this long is closed\n"
            "                    (default 2m; 0: never)\n"
            "  --recv-max BYTES  largest request accepted (default 1048576);\n"
            "                    larger ones are dropped unread\n"
            "  --lease-ttl DUR   TTL of a lease that asks for none (default "
            "30s;\n"
            "                    100ms to --lease-ttl-max)\n"
            "  --lease-ttl-max DUR  largest TTL a client may ask for "
            "(default 1h)\n"
            "  --window N        unacknowledged calls allowed per client "
            "(default 512)\n"
            "  --gc-interval DUR time between collector passes (default "
            "200ms)\n"
            "  --gc-budget N     record deletions per pass (default 20000)\n"
            "  --lease-max N     live leases in all; OpenLease beyond it is\n"
            "                    refused RESOURCE_EXHAUSTED/LEASE_CAPACITY\n"
            "                    (default %d; 0: no cap)\n"
            "  --lease-max-per-principal N  live leases of one principal\n"
            "                    (OPEN mode: of one OpenLease principal\n"
            "                    name); beyond it RESOURCE_EXHAUSTED/\n"
            "                    LEASE_QUOTA (default %d; 0: no cap)\n"
            "  --disk-free-min BYTES  below this many free bytes on the data\n"
            "                    folder's file system, new mutating calls and\n"
            "                    OpenLease are refused RESOURCE_EXHAUSTED/\n"
            "                    DISK_LOW; reads, renewals, acknowledgements\n"
            "                    and collection go on (default %llu; 0: off;\n"
            "                    suffixes K, M, G)\n"
            "  --kv-key-max BYTES  largest key of once.v1.KV (default 1K)\n"
            "  --kv-value-max BYTES  largest value (default 64K)\n"
            "  --kv-ops-max N    compares and ops of one KV Txn (default\n"
            "                    128); each bound refused INVALID_ARGUMENT\n"
            "  --kv-quota BYTES  keys and values one principal may store\n"
            "                    (default 256M; 0: no cap); past it a Txn is\n"
            "                    refused RESOURCE_EXHAUSTED/KV_QUOTA\n"
            "  --outbox-max-bytes BYTES  events one outbox topic may retain\n"
            "                    (default 64M; 0: no bound); past it an\n"
            "                    emit is refused RESOURCE_EXHAUSTED/\n"
            "                    OUTBOX_FULL\n"
            "  --outbox-payload-max BYTES  largest event payload (default\n"
            "                    64K)\n"
            "  --dev             development mode: on first start create\n"
            "                    DIR/principals with the operator \"dev\" and\n"
            "                    write its key to DIR/dev.key (make run)\n"
            "  --tls-cert FILE   PEM certificate (chain) for tls+tcp:// URLs\n"
            "  --tls-key FILE    its PEM private key\n"
            "  --listen-check DUR  how often each ipc:// listener is probed\n"
            "                    and, if it stopped accepting, started again\n"
            "                    (default 1s; nng 1.5 ends an ipc listener\n"
            "                    when a peer hangs up during its handshake)\n"
            "  --no-listen-check do not probe\n"
            "  --config FILE     read options from FILE: one \"key = value\"\n"
            "                    a line, the keys being these long options\n"
            "                    without the dashes; flags given here win\n"
            "  --log-format F    text (default) or json (one object a line)\n"
            "  --metrics-listen URL  serve Prometheus metrics at URL/metrics\n"
            "                    (http://HOST:PORT, e.g. "
            "http://127.0.0.1:9464;\n"
            "                    default: none)\n"
            "\n",
            DEFAULT_DATA, DEFAULT_IPC, DEFAULT_TCP, DEFAULT_LEASE_MAX,
            DEFAULT_LEASE_MAX_PRINCIPAL,
            (unsigned long long)DEFAULT_DISK_FREE_MIN);
    usage_replication(f);
    fputs("\n"
          "Authentication is on when DIR/principals exists (oncectl\n"
          "principal add --data DIR); without it onced runs OPEN and says\n"
          "so. SIGHUP re-reads DIR/principals, DIR/policy and the --config\n"
          "file (window, lease-ttl, lease-ttl-max and log-format change at\n"
          "once; other keys at the next start).\n"
          "\n"
          "Durations are written 200ms, 2s, 5m, 1h.\n"
          "  --version         the versions of onced, nng and LevelDB\n"
          "  -h, --help        this text\n"
          "\n"
          "Stop with SIGINT or SIGTERM: received calls finish and are "
          "synced.\n",
          f);
}

/* An option's whole number in [lo, hi] (strict decimal, number.h). */
static int
opt_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;

    if (number_parse_u64_all(s, &v) != 0 || v < lo || v > hi) {
        fprintf(stderr,
                "onced: %s wants a whole number from %llu to %llu, got "
                "\"%s\"\n",
                opt, (unsigned long long)lo, (unsigned long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int
opt_bytes(const char *opt, const char *s, uint64_t *out)
{
    const char *end = s;
    uint64_t v = 0;
    unsigned shift = 0;
    int rv = number_parse_u64(s, &end, &v);

    if (rv == 0 && (*end == 'K' || *end == 'M' || *end == 'G')) {
        shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
        end++;
    }
    if (rv != 0 || *end != '\0' || v > (UINT64_MAX >> 1) >> shift) {
        fprintf(stderr,
                "onced: %s wants a number of bytes, optionally with K, M or "
                "G, got \"%s\"\n",
                opt, s);
        return -1;
    }
    *out = v << shift;
    return 0;
}

static int
parse_dur(const char *opt, const char *s, uint64_t lo, uint64_t hi,
          uint64_t *out)
{
    uint64_t v;

    if (duration_parse(s, &v) != 0 || v < lo || v > hi) {
        fprintf(stderr,
                "onced: %s wants a duration from %llums to %llums written "
                "like 200ms, 2s, 5m or 1h, got \"%s\"\n",
                opt, (unsigned long long)lo, (unsigned long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* One of the --kv-* options (ch 1001..1004) into *kv. 0 or -1 (said on
 * stderr). Keys and values are also bounded by --recv-max, the whole
 * request's size. */
static int
parse_kv_option(int ch, const char *s, kv_limits *kv)
{
    const char *name = ch == 1001 ? "--kv-key-max" : "--kv-value-max";
    uint64_t v;

    if (ch == 1003) {
        return opt_u64("--kv-ops-max", s, 1, 100000, &kv->ops_max);
    }
    if (ch == 1004) {
        return opt_bytes("--kv-quota", s, &kv->quota);
    }
    if (opt_bytes(name, s, &v) != 0) {
        return -1;
    }
    if (v == 0 || v > (64u << 20)) {
        fprintf(stderr, "onced: %s is 1 byte to 64M, got \"%s\"\n", name, s);
        return -1;
    }
    *(ch == 1001 ? &kv->key_max : &kv->value_max) = v;
    return 0;
}

/* One of the connection options (--contexts, --conn-inflight,
 * --send-timeout, --conn-max, --conn-max-per-peer, --conn-idle-timeout)
 * into cfg. 0 or -1 (said on stderr). */
static int
parse_conn_option(int ch, const char *s, server_config *cfg)
{
    uint64_t v;

    switch (ch) {
    case 'c':
        if (opt_u64("--contexts", s, 1, 65536, &v) != 0) {
            return -1;
        }
        cfg->contexts = (size_t)v;
        return 0;
    case 'i':
        if (opt_u64("--conn-inflight", s, 1, 65536, &v) != 0) {
            return -1;
        }
        cfg->conn_inflight = (size_t)v;
        return 0;
    case 's':
        if (parse_dur("--send-timeout", s, 100, 3600000, &v) != 0) {
            return -1;
        }
        cfg->send_timeout_ms = v;
        return 0;
    case 'x':
        if (opt_u64("--conn-max", s, 1, 1000000, &v) != 0) {
            return -1;
        }
        cfg->conn_max = (size_t)v;
        return 0;
    case 'X':
        if (opt_u64("--conn-max-per-peer", s, 1, 1000000, &v) != 0) {
            return -1;
        }
        cfg->conn_max_per_peer = (size_t)v;
        return 0;
    case 'I':
        if (strcmp(s, "0") == 0) {
            cfg->conn_idle_ms = 0;
        } else if (parse_dur("--conn-idle-timeout", s, 100, 86400000, &v) !=
                   0) {
            return -1;
        } else {
            cfg->conn_idle_ms = v;
        }
        return 0;
    }
    return -1;
}

/* One of the --kv-* (ch 1001..1004) or --outbox-* (1005, 1006) options
 * into cfg. 0 or -1 (said on stderr). */
static int
parse_limit_option(int ch, const char *s, server_config *cfg)
{
    if (ch == 1005) {
        return opt_bytes("--outbox-max-bytes", s, &cfg->outbox.max_bytes);
    }
    if (ch == 1006) {
        return opt_bytes("--outbox-payload-max", s, &cfg->outbox.payload_max);
    }
    return parse_kv_option(ch, s, &cfg->kv);
}

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
    struct stat st;

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
    if (rc->etcd_tls.key != NULL && stat(rc->etcd_tls.key, &st) == 0 &&
        (st.st_mode & 077) != 0) {
        fprintf(stderr,
                "onced: warning: --etcd-key %s is readable by others (mode "
                "%03o): whoever reads it can write this cluster's log in "
                "etcd. Fix: chmod 600 %s\n",
                rc->etcd_tls.key, (unsigned)(st.st_mode & 0777),
                rc->etcd_tls.key);
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

static const struct option onced_opts[] = {
    {"data", required_argument, NULL, 'd'},
    {"listen", required_argument, NULL, 'l'},
    {"contexts", required_argument, NULL, 'c'},
    {"conn-inflight", required_argument, NULL, 'i'},
    {"send-timeout", required_argument, NULL, 's'},
    {"conn-max", required_argument, NULL, 'x'},
    {"conn-max-per-peer", required_argument, NULL, 'X'},
    {"conn-idle-timeout", required_argument, NULL, 'I'},
    {"recv-max", required_argument, NULL, 'r'},
    {"lease-ttl", required_argument, NULL, 't'},
    {"lease-ttl-max", required_argument, NULL, 'T'},
    {"window", required_argument, NULL, 'w'},
    {"gc-interval", required_argument, NULL, 'g'},
    {"gc-budget", required_argument, NULL, 'b'},
    {"dev", no_argument, NULL, 'D'},
    {"tls-cert", required_argument, NULL, 'C'},
    {"tls-key", required_argument, NULL, 'K'},
    {"listen-check", required_argument, NULL, 'L'},
    {"no-listen-check", no_argument, NULL, 'N'},
    {"config", required_argument, NULL, 'F'},
    {"log-format", required_argument, NULL, 'J'},
    {"metrics-listen", required_argument, NULL, 'M'},
    {"lease-max", required_argument, NULL, 'm'},
    {"lease-max-per-principal", required_argument, NULL, 'P'},
    {"disk-free-min", required_argument, NULL, 'f'},
    {"kv-key-max", required_argument, NULL, 1001},
    {"kv-value-max", required_argument, NULL, 1002},
    {"kv-ops-max", required_argument, NULL, 1003},
    {"kv-quota", required_argument, NULL, 1004},
    {"outbox-max-bytes", required_argument, NULL, 1005},
    {"outbox-payload-max", required_argument, NULL, 1006},
    {"replicate", required_argument, NULL, 'R'},
    {"cluster", required_argument, NULL, 'U'},
    {"advertise", required_argument, NULL, 'A'},
    {"replicate-ttl", required_argument, NULL, 'Z'},
    {"replicate-retain", required_argument, NULL, 'Y'},
    {"replicate-key", required_argument, NULL, 'k'},
    {"etcd-cacert", required_argument, NULL, 'E'},
    {"etcd-cert", required_argument, NULL, 'G'},
    {"etcd-key", required_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The options a SIGHUP applies to a running onced; every other change in
 * the file waits for a restart (and is logged as such). */
static const char *const RELOADABLE[] = {
    "window", "lease-ttl", "lease-ttl-max", "log-format", "config", NULL,
};

/* parse_options returns this when onced should go on (anything else is
 * the exit status: 0 after --help/--version, 2 for a bad option). */
#define PARSE_GO_ON (-1)

static void
config_defaults(server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->data_dir = DEFAULT_DATA;
    cfg->contexts = 256;
    cfg->conn_inflight = 64;
    cfg->send_timeout_ms = 10000;
    cfg->conn_max = 1000;
    cfg->conn_max_per_peer = 128;
    cfg->conn_idle_ms = 120000;
    cfg->recv_max = 1u << 20;
    cfg->lease_ttl_ms = 30000;
    cfg->lease_ttl_max_ms = 3600000;
    cfg->window = 512;
    cfg->gc_interval_ms = 200;
    cfg->listen_check_ms = 1000;
    cfg->gc_budget = 20000;
    cfg->lease_max = DEFAULT_LEASE_MAX;
    cfg->lease_max_principal = DEFAULT_LEASE_MAX_PRINCIPAL;
    cfg->disk_free_min = DEFAULT_DISK_FREE_MIN;
    cfg->kv.key_max = KV_KEY_MAX_DEFAULT;
    cfg->kv.value_max = KV_VALUE_MAX_DEFAULT;
    cfg->kv.ops_max = KV_OPS_MAX_DEFAULT;
    cfg->kv.quota = KV_QUOTA_DEFAULT;
    cfg->outbox.max_bytes = OUTBOX_MAX_BYTES_DEFAULT;
    cfg->outbox.payload_max = OUTBOX_PAYLOAD_MAX_DEFAULT;
}

/* Parses argv (the merged vector of config_file.h) into *out, which holds
 * pointers into argv afterwards; *json is --log-format json, *metrics_out
 * the --metrics-listen URL or NULL. */
static int
parse_options(int argc, char **argv, server_config *out, bool *json,
              const char **metrics_out, repl_config *rc_out)
{
    server_config cfg;
    repl_config rc;
    const char *metrics_url = NULL, *why;
    uint64_t v;
    int ch;

    config_defaults(&cfg);
    memset(&rc, 0, sizeof(rc));
    rc.cluster = "once";
    rc.ttl_s = 5;
    rc.retain = 10000;
    *json = false;
    optind = 0; /* glibc: start over (SIGHUP parses again) */
    while ((ch = getopt_long(argc, argv, "h", onced_opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            cfg.data_dir = optarg;
            break;
        case 'l':
            if (cfg.nlisten == SERVER_LISTEN_MAX) {
                fprintf(stderr, "onced: at most %d --listen addresses\n",
                        SERVER_LISTEN_MAX);
                return 2;
            }
            cfg.listen[cfg.nlisten++] = optarg;
            break;
        case 'c':
        case 'i':
        case 's':
        case 'x':
        case 'X':
        case 'I':
            if (parse_conn_option(ch, optarg, &cfg) != 0) {
                return 2;
            }
            break;
        case 'r':
            if (opt_u64("--recv-max", optarg, 1024, 64u << 20, &v) != 0) {
                return 2;
            }
            cfg.recv_max = (size_t)v;
            break;
        case 't':
            if (parse_dur("--lease-ttl", optarg, 100, 86400000, &v) != 0) {
                return 2;
            }
            cfg.lease_ttl_ms = v;
            break;
        case 'T':
            if (parse_dur("--lease-ttl-max", optarg, 100, 86400000, &v) != 0) {
                return 2;
            }
            cfg.lease_ttl_max_ms = v;
            break;
        case 'w':
            if (opt_u64("--window", optarg, 1, 1u << 20, &v) != 0) {
                return 2;
            }
            cfg.window = v;
            break;
        case 'g':
            if (parse_dur("--gc-interval", optarg, 1, 3600000, &v) != 0) {
                return 2;
            }
            cfg.gc_interval_ms = v;
            break;
        case 'b':
            if (opt_u64("--gc-budget", optarg, 1, 10000000, &v) != 0) {
                return 2;
            }
            cfg.gc_budget = v;
            break;
        case 'D':
            cfg.dev = true;
            break;
        case 'C':
            cfg.tls_cert = optarg;
            break;
        case 'K':
            cfg.tls_key = optarg;
            break;
        case 'L':
            if (parse_dur("--listen-check", optarg, 100, 3600000, &v) != 0) {
                return 2;
            }
            cfg.listen_check_ms = v;
            break;
        case 'N':
            cfg.listen_check_ms = 0; /* listener_open: no watch */
            break;
        case 'F':
            break; /* read by config_args_build */
        case 'J':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
                fprintf(stderr,
                        "onced: --log-format is text or json, got \"%s\"\n",
                        optarg);
                return 2;
            }
            *json = strcmp(optarg, "json") == 0;
            break;
        case 'M':
            if ((why = metrics_url_problem(optarg)) != NULL) {
                fprintf(stderr, "onced: --metrics-listen \"%s\": %s\n", optarg,
                        why);
                return 2;
            }
            metrics_url = optarg;
            break;
        case 'm':
            if (opt_u64("--lease-max", optarg, 0, 1u << 30, &v) != 0) {
                return 2;
            }
            cfg.lease_max = v;
            break;
        case 'P':
            if (opt_u64("--lease-max-per-principal", optarg, 0, 1u << 30, &v) !=
                0) {
                return 2;
            }
            cfg.lease_max_principal = v;
            break;
        case 'f':
            if (opt_bytes("--disk-free-min", optarg, &cfg.disk_free_min) != 0) {
                return 2;
            }
            break;
        case 1001 ... 1006:
            if (parse_limit_option(ch, optarg, &cfg) != 0) {
                return 2;
            }
            break;
        case 'R':
            rc.endpoints = optarg;
            break;
        case 'U':
            rc.cluster = optarg;
            break;
        case 'A':
            rc.advertise = optarg;
            break;
        case 'Z':
            if (opt_u64("--replicate-ttl", optarg, 1, 600, &v) != 0) {
                return 2;
            }
            rc.ttl_s = (uint32_t)v;
            break;
        case 'Y':
            if (opt_u64("--replicate-retain", optarg, 1, UINT64_MAX / 2, &v) !=
                0) {
                return 2;
            }
            rc.retain = v;
            break;
        case 'k':
            rc.key_file = optarg;
            break;
        case 'E':
            rc.etcd_tls.cacert = optarg;
            break;
        case 'G':
            rc.etcd_tls.cert = optarg;
            break;
        case 'H':
            rc.etcd_tls.key = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("onced %s (nng %s, LevelDB %d.%d)\n", ONCE_VERSION,
                   nng_version(), leveldb_major_version(),
                   leveldb_minor_version());
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "onced: unexpected argument \"%s\" (see --help)\n",
                argv[optind]);
        return 2;
    }
    if (options_together(&cfg, &rc) != 0) {
        return 2;
    }
    *out = cfg;
    *metrics_out = metrics_url;
    *rc_out = rc;
    return PARSE_GO_ON;
}

static void
reload_changed(const char *name, void *arg)
{
    (void)arg;
    for (const char *const *r = RELOADABLE; *r != NULL; r++) {
        if (strcmp(*r, name) == 0) {
            log_info("SIGHUP: %s changed", name);
            return;
        }
    }
    log_warn("SIGHUP: %s changed; it takes effect at the next start", name);
}

/* Re-reads the configuration file; *cur is the vector in force (replaced
 * on success; boot, whose strings the server's cfg points into, is never
 * freed). */
static void
reload_config(server *srv, int argc, char **argv, config_args *boot,
              config_args *cur)
{
    config_args next;
    server_config c;
    repl_config rc; /* not reloadable: parsed to check the file only */
    const char *metrics_url;
    char err[512];
    bool json;

    if (cur->file == NULL) {
        return;
    }
    if (config_args_build(onced_opts, argc, argv, &next, err, sizeof(err)) !=
        0) {
        log_error("SIGHUP: %s; the configuration in force stays", err);
        return;
    }
    if (parse_options(next.argc, next.argv, &c, &json, &metrics_url, &rc) !=
        PARSE_GO_ON) {
        log_error("SIGHUP: %s has a bad value (above); the configuration in "
                  "force stays",
                  next.file);
        config_args_free(&next);
        return;
    }
    if (config_args_diff(onced_opts, cur, &next, reload_changed, NULL) == 0) {
        log_info("SIGHUP: %s unchanged", next.file);
    }
    log_set_json(json);
    server_set_limits(srv, &c);
    if (cur->argv != boot->argv) {
        config_args_free(cur);
    }
    *cur = next;
}

int
main(int argc, char **argv)
{
    static config_args boot, cur; /* live as long as the server */
    server_config cfg;
    repl_config rc;
    repl *rp = NULL;
    server *srv;
    const char *metrics_url = NULL;
    metrics *mx = NULL;
    sigset_t set;
    char err[512];
    bool json;
    int sig, rv;

    if (config_args_build(onced_opts, argc, argv, &boot, err, sizeof(err)) !=
        0) {
        fprintf(stderr, "onced: %s\n", err);
        return 2;
    }
    if ((rv = parse_options(boot.argc, boot.argv, &cfg, &json, &metrics_url,
                            &rc)) != PARSE_GO_ON) {
        config_args_free(&boot);
        return rv;
    }
    cur = boot;
    log_set_json(json);
    if (boot.file != NULL) {
        log_info("configuration file %s", boot.file);
    }

    /* Signals are taken by sigwait below, never by a handler: block them
     * before any thread starts so every thread inherits the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    TEST_SEAMS_APPLY();
    if (rc.endpoints != NULL) {
        /* A replica: follow the log until this one leads (replica.h). */
        if (rc.advertise == NULL) {
            rc.advertise = cfg.listen[0];
        }
        rc.data_dir = cfg.data_dir;
        rc.tls_cert = cfg.tls_cert;
        rc.tls_key = cfg.tls_key;
        for (size_t i = 0; i < cfg.nlisten && i < REPL_LISTEN_MAX; i++) {
            rc.listen[rc.nlisten++] = cfg.listen[i];
        }
        rc.timeout_ms = rc.ttl_s * 1000 / 4 < 1000 ? rc.ttl_s * 1000 / 4 : 1000;
        rc.argv = argv;
        rc.on_follow = notify_following;
        if ((rv = repl_follow(&rp, &rc, &set, &sig)) == ECANCELED) {
            notify_stopping();
            log_info("%s while following: stopped",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
            config_args_free(&boot);
            return 0;
        }
        if (rv != 0) {
            log_error("not started");
            config_args_free(&boot);
            return 1;
        }
        cfg.append_fn = repl_append;
        cfg.append_arg = rp;
    }
    if ((rv = server_open(&srv, &cfg)) != 0) {
        log_error("not started");
        repl_close(rp);
        return 1;
    }
    if (metrics_url != NULL && metrics_open(&mx, metrics_url, srv) != 0) {
        server_close(srv);
        log_error("not started");
        return 1;
    }
    for (size_t i = 0; i < cfg.nlisten; i++) {
        log_info("listening on %s", cfg.listen[i]);
    }
    if ((rv = notify_watchdog_start(srv)) != 0) {
        log_warn("cannot start the watchdog thread (error %d)", rv);
    }
    notify_ready(srv);
    log_info("ready (pid %d)", (int)getpid());

    for (;;) {
        sigwait(&set, &sig);
        if (sig != SIGHUP) {
            break;
        }
        notify_reloading();
        log_info("SIGHUP: re-reading the principals, the policy and the "
                 "configuration file");
        server_reload_auth(srv);
        reload_config(srv, argc, argv, &boot, &cur);
        notify_ready(srv);
    }
    notify_stopping();
    log_info("%s: stopping; received calls finish and are synced",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    notify_watchdog_stop();
    metrics_stop(mx); /* before the executor stops: it may hold a task */
    server_close(srv);
    repl_close(rp); /* after the last append: another replica takes over */
    metrics_free(mx);
    log_info("stopped cleanly");
    if (cur.argv != boot.argv) {
        config_args_free(&cur);
    }
    config_args_free(&boot);
    return 0;
}
