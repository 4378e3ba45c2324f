/*
 * oncectl.c — the command-line client of onced, for people and scripts.
 *
 *   oncectl [--server URL] [--json] [--timeout DURATION] [--principal NAME]
 *           [--key-file FILE] [--tls-ca FILE] COMMAND ...
 *
 * Owns: argument parsing, the mapping of commands onto libonce calls, and
 * the two output forms (text for people; with --json exactly one JSON
 * object on stdout, success or not).
 * Exit status: 0 only for OK; 1 a call ended with an error code; 2 usage
 * error; 3 the outcome is unknown (UNKNOWN/OUTCOME_UNKNOWN: retry the
 * printed rpc id).
 * Never: invents an rpc id for a retry — `counter incr --rpc-id` sends
 * exactly the id given and opens no lease; without it a fresh lease and
 * seq 1 are used.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duration.h"
#include <once/grants.h>
#include "json_out.h"
#include "msg_print.h"
#include "once/client.h"
#include "oncectl.h"
#include "principal_cmd.h"
#include "wire.h"

#define ONCECTL_DEFAULT_SERVER "ipc:///tmp/once.ipc"
/* onced --dev (make run) writes its operator key here; used when no key
 * is given otherwise. */
#define ONCECTL_DEV_KEY "./data/dev.key"

static const char usage_top[] =
    "usage: oncectl [--server URL] [--json] [--timeout DURATION]\n"
    "               [--principal NAME] COMMAND ...\n"
    "\n"
    "Talks to onced, the exactly-once RPC server.\n"
    "\n"
    "Commands:\n"
    "  lease open [--ttl DURATION]        open a lease, print its client id\n"
    "  lease renew CLIENT_ID              renew a lease\n"
    "  lease close CLIENT_ID              end a lease now\n"
    "  lease info CLIENT_ID               state, TTL, watermark, retention\n"
    "  counter incr NAME [--by N] [--rpc-id CLIENT:SEQ]\n"
    "                                     increment a counter exactly once\n"
    "  counter get NAME                   read a counter\n"
    "  grants SUBCOMMAND ...              start grants: set-placement, "
    "request,\n"
    "                                     enqueue, claim, finish, get-surface,"
    "\n"
    "                                     inputs, ... (oncectl grants --help)\n"
    "  key show                           the server's Ed25519 key for "
    "grant credentials\n"
    "  records list [--client ID] [--limit N]\n"
    "                                     retained completion records\n"
    "  stats                              server statistics\n"
    "  admin compact [--wait]             compact onced's LevelDB now "
    "(operators)\n"
    "  principal add|list|revoke|restore  the principals of a local data\n"
    "                                     folder (oncectl principal --help)\n"
    "\n"
    "Global options (before the command):\n"
    "  --server URL        default: $ONCE_SERVER, else " ONCECTL_DEFAULT_SERVER
    "\n"
    "  --json              print exactly one JSON object on stdout\n"
    "  --timeout DURATION  deadline over all attempts (default 10s); one\n"
    "                      attempt waits at most a third of it (min 100ms,\n"
    "                      max 2s)\n"
    "  --principal NAME    default: anonymous (or the key file's name)\n"
    "  --key-file FILE     sign every request with this principal's key\n"
    "                      (\"NAME KEYHEX\"); default: $ONCE_KEY_FILE, else\n"
    "                      " ONCECTL_DEV_KEY " when it exists (onced --dev)\n"
    "  --tls-ca FILE       PEM CA that a tls+tcp:// server must be signed by\n"
    "  --version           oncectl's version\n"
    "  -h, --help          this text; `oncectl COMMAND --help` for a command\n"
    "\n"
    "DURATION is <number><unit> with unit ms, s, m or h (200ms, 2s, 5m, 1h,\n"
    "1m30s); a bare number is milliseconds.\n"
    "\n"
    "Exit status: 0 OK; 1 the call failed (code printed); 2 usage error;\n"
    "3 outcome unknown (retry the printed rpc id with --rpc-id).\n";

static const char usage_lease[] =
    "usage: oncectl [GLOBAL OPTIONS] lease open [--ttl DURATION]\n"
    "       oncectl [GLOBAL OPTIONS] lease renew CLIENT_ID\n"
    "       oncectl [GLOBAL OPTIONS] lease close CLIENT_ID\n"
    "       oncectl [GLOBAL OPTIONS] lease info CLIENT_ID\n"
    "\n"
    "open   opens a lease and prints the client id it grants.\n"
    "         --ttl DURATION  requested lease TTL (default: the server's)\n"
    "         Output: client id N (ttl T) | --json "
    "{\"client_id\":N,\"ttl_ms\":N}\n"
    "renew  extends a live lease by its TTL.\n"
    "         Output: ttl T, remaining R | --json "
    "{\"client_id\":N,\"ttl_ms\":N,\"remaining_ms\":N}\n"
    "close  ends a lease now (OK again for one already ended); the\n"
    "       collector then reclaims its records and its rpc ids get\n"
    "       LEASE_EXPIRED.\n"
    "         Output: records_retained N | --json "
    "{\"client_id\":N,\"records_retained\":N}\n"
    "info   prints the lease: state (LEASE_LIVE, LEASE_CLOSED,\n"
    "       LEASE_EXPIRED, LEASE_COLLECTED), ttl, remaining, watermark,\n"
    "       retained records and bytes, ... one \"name value\" per line, or\n"
    "       one JSON object with --json.\n"
    "An id never issued is NOT_FOUND (UNKNOWN_CLIENT); renewing an ended\n"
    "one is FAILED_PRECONDITION (LEASE_EXPIRED).\n";

static const char usage_records[] =
    "usage: oncectl [GLOBAL OPTIONS] records list [--client ID] [--limit N]\n"
    "\n"
    "Without --client: one row per client holding records or a live lease\n"
    "(state, records, bytes, watermark, durable watermark, lag, max seq,\n"
    "oldest record age). With --client: that client's row and its records\n"
    "(seq, method, code, age, bytes).\n"
    "  --limit N   most rows (default 100, at most 10000)\n"
    "Output: tables | --json {\"clients\":[{...}],\"records\":[{...}],"
    "\"truncated\":B}\n";

static const char usage_incr[] =
    "usage: oncectl [GLOBAL OPTIONS] counter incr NAME [--by N]\n"
    "                                [--rpc-id CLIENT:SEQ]\n"
    "\n"
    "Adds N (default 1, may be negative) to counter NAME, exactly once.\n"
    "Without --rpc-id a new lease is opened and the call is its seq 1.\n"
    "With --rpc-id no lease is opened and exactly that id is sent: a retry\n"
    "of an earlier call returns the stored result (replayed) and changes\n"
    "nothing; the same id with a different NAME or N is ALREADY_EXISTS.\n"
    "Output: value V | --json "
    "{\"value\":V,\"replayed\":B,\"rpc_id\":\"C:S\"}\n";

static const char usage_get[] =
    "usage: oncectl [GLOBAL OPTIONS] counter get NAME\n"
    "\n"
    "Prints the value of counter NAME.\n"
    "Output: value V | --json {\"value\":V}\n";

static const char usage_counter[] =
    "usage: oncectl [GLOBAL OPTIONS] counter incr NAME [--by N] "
    "[--rpc-id CLIENT:SEQ]\n"
    "       oncectl [GLOBAL OPTIONS] counter get NAME\n"
    "`oncectl counter incr --help` and `oncectl counter get --help` say "
    "more.\n";

/* ---- output ------------------------------------------------------------ */

int
usage_error(const cli *g, const char *hint, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "oncectl: %s\n", msg);
    if (hint != NULL) {
        fprintf(stderr, "hint: %s\n", hint);
    }
    fprintf(stderr, "Try 'oncectl --help'.\n");
    if (g->json) {
        json_error(stdout, "INVALID_ARGUMENT", "USAGE", msg);
    }
    return ONCECTL_EXIT_USAGE;
}

static int
exit_for(const once_status *st)
{
    if (st->code == ONCE_OK) {
        return ONCECTL_EXIT_OK;
    }
    if (st->code == ONCE_UNKNOWN &&
        strcmp(st->reason, "OUTCOME_UNKNOWN") == 0) {
        return ONCECTL_EXIT_UNKNOWN;
    }
    return ONCECTL_EXIT_CALL;
}

/* What to do next, for people; NULL when there is nothing useful to say. */
static const char *
error_hint(const cli *g, const once_status *st, const once_rpc_id *id,
           char *buf, size_t len)
{
    const char *r = st->reason;

    if (strcmp(r, "OUTCOME_UNKNOWN") == 0 && id != NULL) {
        snprintf(buf, len,
                 "retry with --rpc-id %" PRIu64 ":%" PRIu64
                 " (same arguments) to learn whether it took effect",
                 id->client_id, id->seq);
        return buf;
    }
    if (strcmp(r, "NOT_SENT") == 0) {
        snprintf(buf, len,
                 "is onced listening on %s? set --server or ONCE_SERVER",
                 g->server);
        return buf;
    }
    if (strcmp(r, "RPC_ID_CONFLICT") == 0) {
        return "this rpc id belongs to a call with other arguments; retry "
               "with the original NAME and --by to get its result";
    }
    if (strcmp(r, "LEASE_EXPIRED") == 0) {
        return "the lease of this client id has ended; its calls can no "
               "longer be retried or learned";
    }
    if (strcmp(r, "STALE_RPC") == 0) {
        return "this rpc id was already acknowledged; its result is no "
               "longer kept";
    }
    if (st->code == ONCE_DEADLINE_EXCEEDED || strcmp(r, "NO_REPLY") == 0) {
        return "the server did not answer in time; raise --timeout or check "
               "that onced is running";
    }
    return NULL;
}

/* Reports a failed call; id is NULL when no rpc id is involved. Returns
 * the exit status. */
int
report_error(const cli *g, const once_status *st, const once_rpc_id *id)
{
    char idbuf[48] = "";
    char hintbuf[256];
    const char *hint;

    if (id != NULL) {
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64 ":%" PRIu64, id->client_id,
                 id->seq);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "code", once_strerror(st->code));
        json_str(&j, "reason", st->reason);
        json_str(&j, "message", st->message);
        if (id != NULL) {
            json_str(&j, "rpc_id", idbuf);
        }
        json_end(&j);
        return exit_for(st);
    }
    if (st->reason[0] != '\0') {
        fprintf(stderr, "oncectl: %s (%s): %s\n", once_strerror(st->code),
                st->reason, st->message);
    } else {
        fprintf(stderr, "oncectl: %s: %s\n", once_strerror(st->code),
                st->message);
    }
    if (id != NULL && strstr(st->message, idbuf) == NULL) {
        fprintf(stderr, "rpc id %s\n", idbuf);
    }
    if ((hint = error_hint(g, st, id, hintbuf, sizeof(hintbuf))) != NULL) {
        fprintf(stderr, "hint: %s\n", hint);
    }
    return exit_for(st);
}

/* ---- argument parsing -------------------------------------------------- */

bool
is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* A global option written after the command: worth a precise hint. */
bool
is_global_opt(const char *a)
{
    static const char *const globals[] = {"--json",     "--server",
                                          "--timeout",  "--principal",
                                          "--key-file", "--tls-ca"};

    for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++) {
        size_t n = strlen(globals[i]);
        if (strncmp(a, globals[i], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
            return true;
        }
    }
    return false;
}

/*
 * Matches argv[*i] against option `name` taking a value, as "--name VALUE"
 * or "--name=VALUE". Returns 1 and sets *val (advancing *i past a separate
 * value), 0 when it is another argument, -1 when the value is missing.
 */
int
opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0) {
        return 0;
    }
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

/* Strict decimal, no sign, no spaces. */
int
parse_u64(const char *s, const char **end, uint64_t *v)
{
    uint64_t n = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9') {
        if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
            return ERANGE;
        }
        n = n * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == s) {
        return EINVAL;
    }
    *end = p;
    *v = n;
    return 0;
}

static int
parse_i64(const char *s, int64_t *v)
{
    bool neg = (*s == '-');
    const char *end;
    uint64_t u;

    if (parse_u64(neg ? s + 1 : s, &end, &u) != 0 || *end != '\0') {
        return EINVAL;
    }
    if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX) {
        return ERANGE;
    }
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

/* "CLIENT:SEQ", both non-zero. */
int
parse_rpc_id(const char *s, once_rpc_id *id)
{
    const char *end;
    uint64_t c, q;

    if (parse_u64(s, &end, &c) != 0 || *end != ':' ||
        parse_u64(end + 1, &end, &q) != 0 || *end != '\0' || c == 0 || q == 0) {
        return EINVAL;
    }
    id->client_id = c;
    id->seq = q;
    return 0;
}

/* The arguments every command here takes the same way: -h/--help prints
 * usage and ends the command with ONCECTL_EXIT_OK; a global option written
 * after the command is a usage error. Returns true when a was one of them,
 * with the exit status in *ex. */
static bool
common_arg(const cli *g, const char *a, const char *usage, int *ex)
{
    if (is_help(a)) {
        fputs(usage, stdout);
        *ex = ONCECTL_EXIT_OK;
        return true;
    }
    if (is_global_opt(a)) {
        *ex = usage_error(g, GLOBAL_HINT, "misplaced option '%s'", a);
        return true;
    }
    return false;
}

/* Takes argv[*i], which no option of `counter sub` matched, as its one NAME
 * ("--" first lets a NAME start with '-'). Returns 0, or the exit status of
 * the usage error it reported. */
static int
counter_name_arg(const cli *g, const char *sub, int argc, char **argv, int *i,
                 const char **name)
{
    char hint[64];

    if (argv[*i][0] == '-' && argv[*i][1] != '\0' && strcmp(argv[*i], "--")) {
        snprintf(hint, sizeof(hint), "see 'oncectl counter %s --help'", sub);
        return usage_error(g, hint, "unknown option '%s' to counter %s",
                           argv[*i], sub);
    }
    if (strcmp(argv[*i], "--") == 0 && *i + 1 < argc) {
        ++*i;
    }
    if (*name != NULL) {
        snprintf(hint, sizeof(hint), "counter %s takes one NAME", sub);
        return usage_error(g, hint, "unexpected argument '%s'", argv[*i]);
    }
    *name = argv[*i];
    return 0;
}

/* ---- commands ---------------------------------------------------------- */

int
open_client(const cli *g, bool no_lease, once_client **cp, once_status *st)
{
    once_options o;
    once_security sec;

    once_options_init(&o);
    once_security_init(&sec);
    sec.key_file = g->key_file;
    sec.tls_ca_file = g->tls_ca;
    o.url = g->server;
    o.principal = g->principal;
    o.deadline_ms = (uint32_t)g->timeout_ms;
    /* Under a short --timeout, leave room for retries: an attempt gets a
     * third of the deadline (at least 100ms), never more than the
     * library's default 2s. */
    if (g->timeout_ms != 0 && g->timeout_ms / 3 < 2000) {
        o.attempt_timeout_ms =
            (uint32_t)(g->timeout_ms / 3 < 100 ? 100 : g->timeout_ms / 3);
    }
    o.no_lease = no_lease;
    return once_client_open_secure(cp, &o, &sec, st);
}

static int
cmd_lease_open(const cli *g, int argc, char **argv)
{
    uint64_t ttl = 0, cid = 0, granted = 0;
    once_client *c = NULL;
    once_status st;
    char dbuf[64];
    int rv;

    for (int i = 0; i < argc; i++) {
        const char *v;
        int m;
        if (common_arg(g, argv[i], usage_lease, &rv)) {
            return rv;
        }
        if ((m = opt_value(argc, argv, &i, "--ttl", &v)) < 0) {
            return usage_error(g, NULL, "--ttl needs a DURATION");
        } else if (m > 0) {
            if (duration_parse(v, &ttl) != 0) {
                return usage_error(g, "write durations like 30s, 5m, 1h",
                                   "bad --ttl '%s'", v);
            }
            continue;
        }
        return usage_error(g, "see 'oncectl lease open --help'",
                           "unexpected argument '%s' to lease open", argv[i]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_lease_open(c, NULL, ttl, &cid, &granted, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", cid);
        json_u64(&j, "ttl_ms", granted);
        json_end(&j);
    } else {
        printf("client id %" PRIu64 " (ttl %s)\n", cid,
               duration_format(granted, dbuf, sizeof(dbuf)));
    }
    return ONCECTL_EXIT_OK;
}

static int
cmd_counter_incr(const cli *g, int argc, char **argv)
{
    const char *name = NULL;
    int64_t by = 1, value = 0;
    once_rpc_id id = {0, 0};
    bool explicit_id = false;
    once_client *c = NULL;
    once_status st;
    char idbuf[48];
    int rv;

    for (int i = 0; i < argc; i++) {
        const char *v;
        int m;
        if (common_arg(g, argv[i], usage_incr, &rv)) {
            return rv;
        }
        if ((m = opt_value(argc, argv, &i, "--by", &v)) != 0) {
            if (m < 0 || parse_i64(v, &by) != 0) {
                return usage_error(g, "--by takes an integer, e.g. --by 5",
                                   "bad --by '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--rpc-id", &v)) != 0) {
            if (m < 0 || parse_rpc_id(v, &id) != 0) {
                return usage_error(
                    g, "an rpc id is CLIENT:SEQ, both non-zero, e.g. 3:1",
                    "bad --rpc-id '%s'", m < 0 ? "" : v);
            }
            explicit_id = true;
            continue;
        }
        if ((rv = counter_name_arg(g, "incr", argc, argv, &i, &name)) != 0) {
            return rv;
        }
    }
    if (name == NULL) {
        return usage_error(g, "e.g. oncectl counter incr jobs --by 2",
                           "counter incr needs a NAME");
    }

    if ((rv = open_client(g, explicit_id, &c, &st)) == ONCE_OK) {
        rv = once_counter_incr(c, name, by, &id, &value, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        /* The id is worth printing only if it may have reached the server. */
        bool show = explicit_id || (id.seq != 0 && st.attempts > 0);
        return report_error(g, &st, show ? &id : NULL);
    }
    snprintf(idbuf, sizeof(idbuf), "%" PRIu64 ":%" PRIu64, id.client_id,
             id.seq);
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_i64(&j, "value", value);
        json_bool(&j, "replayed", st.replayed);
        json_str(&j, "rpc_id", idbuf);
        json_end(&j);
    } else {
        printf("value %" PRId64 "%s\nrpc id %s\n", value,
               st.replayed ? " (replayed)" : "", idbuf);
    }
    return ONCECTL_EXIT_OK;
}

static int
cmd_counter_get(const cli *g, int argc, char **argv)
{
    const char *name = NULL;
    int64_t value = 0;
    once_client *c = NULL;
    once_status st;
    int rv;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_get, &rv)) {
            return rv;
        }
        if ((rv = counter_name_arg(g, "get", argc, argv, &i, &name)) != 0) {
            return rv;
        }
    }
    if (name == NULL) {
        return usage_error(g, "e.g. oncectl counter get jobs",
                           "counter get needs a NAME");
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_counter_get(c, name, &value, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_i64(&j, "value", value);
        json_end(&j);
    } else {
        printf("value %" PRId64 "\n", value);
    }
    return ONCECTL_EXIT_OK;
}

/* "LEASE_LIVE" for ONCE_LEASE_STATE_LIVE, ... */
static const char *
lease_state_name(int state)
{
    switch (state) {
    case ONCE_LEASE_STATE_LIVE:
        return "LEASE_LIVE";
    case ONCE_LEASE_STATE_CLOSED:
        return "LEASE_CLOSED";
    case ONCE_LEASE_STATE_EXPIRED:
        return "LEASE_EXPIRED";
    case ONCE_LEASE_STATE_COLLECTED:
        return "LEASE_COLLECTED";
    default:
        return "LEASE_STATE_UNSPECIFIED";
    }
}

/* Parses the one CLIENT_ID argument of `lease renew|close|info`. Returns
 * 0, or the exit status of the usage error it reported; *done is set when
 * the command is over all the same (it printed --help). */
static int
lease_id_arg(const cli *g, const char *sub, int argc, char **argv, uint64_t *id,
             bool *done)
{
    const char *arg = NULL;
    const char *end;

    *done = false;
    for (int i = 0; i < argc; i++) {
        int ex;
        if (common_arg(g, argv[i], usage_lease, &ex)) {
            *done = true;
            return ex;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error(g, "see 'oncectl lease --help'",
                               "unknown option '%s' to lease %s", argv[i], sub);
        }
        if (arg != NULL) {
            return usage_error(g, "lease commands take one CLIENT_ID",
                               "unexpected argument '%s'", argv[i]);
        }
        arg = argv[i];
    }
    if (arg == NULL) {
        return usage_error(g, "e.g. oncectl lease info 3",
                           "lease %s needs a CLIENT_ID", sub);
    }
    if (parse_u64(arg, &end, id) != 0 || *end != '\0' || *id == 0) {
        return usage_error(g, "a client id is a positive integer, e.g. 3",
                           "bad CLIENT_ID '%s'", arg);
    }
    return 0;
}

static int
cmd_lease_renew(const cli *g, int argc, char **argv)
{
    uint64_t id = 0, ttl = 0, left = 0;
    once_client *c = NULL;
    once_status st;
    char b1[64], b2[64];
    bool done;
    int rv;

    if ((rv = lease_id_arg(g, "renew", argc, argv, &id, &done)) != 0 || done) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_lease_renew(c, id, &ttl, &left, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", id);
        json_u64(&j, "ttl_ms", ttl);
        json_u64(&j, "remaining_ms", left);
        json_end(&j);
    } else {
        printf("client id %" PRIu64 " renewed: ttl %s, remaining %s\n", id,
               duration_format(ttl, b1, sizeof(b1)),
               duration_format(left, b2, sizeof(b2)));
    }
    return ONCECTL_EXIT_OK;
}

static int
cmd_lease_close(const cli *g, int argc, char **argv)
{
    uint64_t id = 0, retained = 0;
    once_client *c = NULL;
    once_status st;
    bool done;
    int rv;

    if ((rv = lease_id_arg(g, "close", argc, argv, &id, &done)) != 0 || done) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_lease_close(c, id, &retained, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", id);
        json_u64(&j, "records_retained", retained);
        json_end(&j);
    } else {
        printf("client id %" PRIu64 " closed; %" PRIu64
               " record(s) left for the collector\n",
               id, retained);
    }
    return ONCECTL_EXIT_OK;
}

static int
cmd_lease_info(const cli *g, int argc, char **argv)
{
    struct once_lease_info li;
    uint64_t id = 0;
    once_client *c = NULL;
    once_status st;
    char b1[64], b2[64], b3[64];
    bool done;
    int rv;

    if ((rv = lease_id_arg(g, "info", argc, argv, &id, &done)) != 0 || done) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_lease_info(c, id, &li, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", li.client_id);
        json_str(&j, "principal", li.principal);
        json_str(&j, "state", lease_state_name(li.state));
        json_u64(&j, "ttl_ms", li.ttl_ms);
        json_u64(&j, "remaining_ms", li.remaining_ms);
        json_u64(&j, "watermark", li.watermark);
        json_u64(&j, "watermark_durable", li.watermark_durable);
        json_u64(&j, "records_retained", li.records_retained);
        json_u64(&j, "bytes_retained", li.bytes_retained);
        json_u64(&j, "max_seq", li.max_seq);
        json_u64(&j, "oldest_record_age_ms", li.oldest_record_age_ms);
        json_end(&j);
    } else {
        printf("client_id %" PRIu64 "\n", li.client_id);
        printf("principal %s\n", li.principal);
        printf("state %s\n", lease_state_name(li.state));
        printf("ttl %s\n", duration_format(li.ttl_ms, b1, sizeof(b1)));
        printf("remaining %s\n",
               duration_format(li.remaining_ms, b2, sizeof(b2)));
        printf("watermark %" PRIu64 "\n", li.watermark);
        printf("watermark_durable %" PRIu64 "\n", li.watermark_durable);
        printf("records_retained %" PRIu64 "\n", li.records_retained);
        printf("bytes_retained %" PRIu64 "\n", li.bytes_retained);
        printf("max_seq %" PRIu64 "\n", li.max_seq);
        printf("oldest_record_age %s\n",
               duration_format(li.oldest_record_age_ms, b3, sizeof(b3)));
    }
    return ONCECTL_EXIT_OK;
}

static void
records_print_json(const once_record_list *l)
{
    json_obj j, e;

    json_begin(&j, stdout);
    json_arr_begin(&j, "clients");
    for (size_t i = 0; i < l->n_clients; i++) {
        const once_client_records *r = &l->clients[i];
        json_elem_begin(&j, &e);
        json_u64(&e, "client_id", r->client_id);
        json_str(&e, "state", lease_state_name(r->state));
        json_u64(&e, "records", r->records);
        json_u64(&e, "bytes", r->bytes);
        json_u64(&e, "watermark", r->watermark);
        json_u64(&e, "watermark_durable", r->watermark_durable);
        json_u64(&e, "watermark_lag", r->watermark_lag);
        json_u64(&e, "max_seq", r->max_seq);
        json_u64(&e, "oldest_record_age_ms", r->oldest_record_age_ms);
        json_elem_end(&e);
    }
    json_arr_end(&j);
    json_arr_begin(&j, "records");
    for (size_t i = 0; i < l->n_records; i++) {
        const once_record_info *r = &l->records[i];
        json_elem_begin(&j, &e);
        json_u64(&e, "client_id", r->client_id);
        json_u64(&e, "seq", r->seq);
        json_str(&e, "method", r->method);
        json_str(&e, "code", once_strerror(r->code));
        json_u64(&e, "age_ms", r->age_ms);
        json_u64(&e, "bytes", r->bytes);
        json_elem_end(&e);
    }
    json_arr_end(&j);
    json_bool(&j, "truncated", l->truncated);
    json_end(&j);
}

static void
records_print_text(const once_record_list *l, bool one_client)
{
    char b[64];

    if (l->n_clients == 0 && !one_client) {
        printf("no client holds records or a live lease\n");
    }
    if (l->n_clients > 0) {
        printf("%-10s %-15s %10s %12s %10s %10s %8s %10s %10s\n", "CLIENT",
               "STATE", "RECORDS", "BYTES", "WATERMARK", "DURABLE", "LAG",
               "MAX_SEQ", "OLDEST");
    }
    for (size_t i = 0; i < l->n_clients; i++) {
        const once_client_records *r = &l->clients[i];
        printf("%-10" PRIu64 " %-15s %10" PRIu64 " %12" PRIu64 " %10" PRIu64
               " %10" PRIu64 " %8" PRIu64 " %10" PRIu64 " %10s\n",
               r->client_id, lease_state_name(r->state), r->records, r->bytes,
               r->watermark, r->watermark_durable, r->watermark_lag, r->max_seq,
               duration_format(r->oldest_record_age_ms, b, sizeof(b)));
    }
    if (one_client) {
        if (l->n_clients == 0) {
            printf("no lease entry (never issued, or ended and collected)\n");
        }
        if (l->n_records == 0) {
            printf("no records\n");
        } else {
            printf("%-10s %-10s %-32s %-20s %10s %8s\n", "CLIENT", "SEQ",
                   "METHOD", "CODE", "AGE", "BYTES");
        }
        for (size_t i = 0; i < l->n_records; i++) {
            const once_record_info *r = &l->records[i];
            printf("%-10" PRIu64 " %-10" PRIu64 " %-32s %-20s %10s %8" PRIu64
                   "\n",
                   r->client_id, r->seq, r->method, once_strerror(r->code),
                   duration_format(r->age_ms, b, sizeof(b)), r->bytes);
        }
    }
    if (l->truncated) {
        printf("(truncated: raise --limit)\n");
    }
}

static int
cmd_records_list(const cli *g, int argc, char **argv)
{
    uint64_t id = 0, limit = 0;
    once_record_list *l = NULL;
    once_client *c = NULL;
    once_status st;
    int rv;

    for (int i = 0; i < argc; i++) {
        const char *v, *end;
        int m;
        if (common_arg(g, argv[i], usage_records, &rv)) {
            return rv;
        }
        if ((m = opt_value(argc, argv, &i, "--client", &v)) != 0) {
            if (m < 0 || parse_u64(v, &end, &id) != 0 || *end != '\0' ||
                id == 0) {
                return usage_error(g, "--client takes a client id, e.g. 3",
                                   "bad --client '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--limit", &v)) != 0) {
            if (m < 0 || parse_u64(v, &end, &limit) != 0 || *end != '\0' ||
                limit == 0 || limit > 10000) {
                return usage_error(g, "--limit takes 1 to 10000",
                                   "bad --limit '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        return usage_error(g, "see 'oncectl records list --help'",
                           "unexpected argument '%s' to records list", argv[i]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_admin_list_records(c, id, (uint32_t)limit, &l, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        records_print_json(l);
    } else {
        records_print_text(l, id != 0);
    }
    once_free(l);
    return ONCECTL_EXIT_OK;
}

/* ---- main -------------------------------------------------------------- */

/* --json anywhere before a "--" makes usage errors JSON too, even ones
 * found before --json itself is parsed. */
static bool
wants_json(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            return true;
        }
    }
    return false;
}

/* key show: the server's Ed25519 public key for start-grant credentials,
 * in hex — what an agent passes to once_grant_credential_verify. */
static int
cmd_key_show(const cli *g, int argc, char **argv)
{
    uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES];
    char hex[2 * ONCE_GRANT_PUBLIC_KEY_BYTES + 1];
    once_client *c = NULL;
    once_status st;
    int rv;

    if (argc > 0 && is_help(argv[0])) {
        fputs("usage: oncectl [GLOBAL OPTIONS] key show\n"
              "Prints onced's Ed25519 public key (hex), which verifies the\n"
              "credentials of start grants offline.\n"
              "Output: public_key HEX | --json {\"public_key\":\"HEX\"}\n",
              stdout);
        return ONCECTL_EXIT_OK;
    }
    if (argc > 0) {
        return usage_error(g, "e.g. oncectl key show",
                           "unexpected argument '%s'", argv[0]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_grants_public_key(c, pk, &st);
    }
    once_client_close(c);
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    for (size_t i = 0; i < sizeof(pk); i++) {
        snprintf(hex + 2 * i, 3, "%02x", pk[i]);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "public_key", hex);
        json_end(&j);
    } else {
        printf("public_key %s\n", hex);
    }
    return ONCECTL_EXIT_OK;
}

static int
dispatch(const cli *g, int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *sub = argc > 1 ? argv[1] : NULL;

    if (strcmp(cmd, "help") == 0) {
        fputs(usage_top, stdout);
        return ONCECTL_EXIT_OK;
    }
    if (strcmp(cmd, "stats") == 0) {
        return cmd_stats(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "admin") == 0) {
        return cmd_admin(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "principal") == 0) {
        return principal_cmd(argc - 1, argv + 1, g->json);
    }
    if (strcmp(cmd, "grants") == 0) {
        return cmd_grants(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "key") == 0) {
        if (sub != NULL && strcmp(sub, "show") == 0) {
            return cmd_key_show(g, argc - 2, argv + 2);
        }
        return usage_error(g, "the key command is: key show",
                           "key needs the subcommand show");
    }
    if (strcmp(cmd, "lease") == 0) {
        if (sub != NULL && strcmp(sub, "open") == 0) {
            return cmd_lease_open(g, argc - 2, argv + 2);
        }
        if (sub != NULL && strcmp(sub, "renew") == 0) {
            return cmd_lease_renew(g, argc - 2, argv + 2);
        }
        if (sub != NULL && strcmp(sub, "close") == 0) {
            return cmd_lease_close(g, argc - 2, argv + 2);
        }
        if (sub != NULL && strcmp(sub, "info") == 0) {
            return cmd_lease_info(g, argc - 2, argv + 2);
        }
        if (sub != NULL && is_help(sub)) {
            fputs(usage_lease, stdout);
            return ONCECTL_EXIT_OK;
        }
        return usage_error(g,
                           "lease commands are: lease open [--ttl D], lease "
                           "renew|close|info CLIENT_ID",
                           sub == NULL ? "lease needs a subcommand"
                                       : "unknown lease subcommand '%s'",
                           sub != NULL ? sub : "");
    }
    if (strcmp(cmd, "counter") == 0) {
        if (sub != NULL && strcmp(sub, "incr") == 0) {
            return cmd_counter_incr(g, argc - 2, argv + 2);
        }
        if (sub != NULL && strcmp(sub, "get") == 0) {
            return cmd_counter_get(g, argc - 2, argv + 2);
        }
        if (sub != NULL && is_help(sub)) {
            fputs(usage_counter, stdout);
            return ONCECTL_EXIT_OK;
        }
        return usage_error(g, "counter commands are: counter incr, counter get",
                           sub == NULL ? "counter needs a subcommand"
                                       : "unknown counter subcommand '%s'",
                           sub != NULL ? sub : "");
    }
    if (strcmp(cmd, "records") == 0) {
        if (sub != NULL && strcmp(sub, "list") == 0) {
            return cmd_records_list(g, argc - 2, argv + 2);
        }
        if (sub != NULL && is_help(sub)) {
            fputs(usage_records, stdout);
            return ONCECTL_EXIT_OK;
        }
        return usage_error(g, "the records command is: records list",
                           sub == NULL ? "records needs a subcommand"
                                       : "unknown records subcommand '%s'",
                           sub != NULL ? sub : "");
    }
    return usage_error(g,
                       "commands are: lease open|renew|close|info, counter "
                       "incr, counter get, records list, stats, admin "
                       "compact",
                       "unknown command '%s'", cmd);
}

int
main(int argc, char **argv)
{
    cli g;
    const char *v_env;
    int i;

    memset(&g, 0, sizeof(g));
    g.json = wants_json(argc, argv);
    g.server = getenv("ONCE_SERVER");
    if (g.server == NULL || g.server[0] == '\0') {
        g.server = ONCECTL_DEFAULT_SERVER;
    }

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int m;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            break; /* the command */
        }
        if (is_help(a)) {
            fputs(usage_top, stdout);
            return ONCECTL_EXIT_OK;
        }
        if (strcmp(a, "--version") == 0) {
            printf("oncectl %s\n", ONCE_VERSION);
            return ONCECTL_EXIT_OK;
        }
        if (strcmp(a, "--json") == 0) {
            g.json = true;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--server", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, "e.g. --server ipc:///tmp/once.ipc",
                                   "--server needs a URL");
            }
            g.server = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--timeout", &v)) != 0) {
            uint64_t ms = 0;
            if (m < 0 || duration_parse(v, &ms) != 0 || ms == 0 ||
                ms > UINT32_MAX) {
                return usage_error(&g,
                                   "write a positive duration like 500ms, "
                                   "2s, 1m",
                                   "bad --timeout '%s'", m < 0 ? "" : v);
            }
            g.timeout_ms = ms;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--principal", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--principal needs a NAME");
            }
            g.principal = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--key-file", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--key-file needs a FILE");
            }
            g.key_file = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--tls-ca", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--tls-ca needs a FILE");
            }
            g.tls_ca = v;
            continue;
        }
        return usage_error(&g,
                           "global options are --server, --json, --timeout, "
                           "--principal, --key-file, --tls-ca; command "
                           "options go after the command",
                           "unknown option '%s'", a);
    }
    if (i >= argc) {
        return usage_error(&g, "e.g. oncectl counter incr jobs",
                           "missing command");
    }
    /* No key named: $ONCE_KEY_FILE, else the dev key of `make run` when
     * it is there (and no other principal was asked for). */
    if (g.key_file == NULL && (v_env = getenv("ONCE_KEY_FILE")) != NULL &&
        v_env[0] != '\0') {
        g.key_file = v_env;
    }
    if (g.key_file == NULL && g.principal == NULL &&
        access(ONCECTL_DEV_KEY, R_OK) == 0) {
        g.key_file = ONCECTL_DEV_KEY;
    }
    return dispatch(&g, argc - i, argv + i);
}
