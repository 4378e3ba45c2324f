/*
 * cli.c — what oncectl's command files share (cli.h): usage and error
 * reporting (text, or one JSON object with --json), option and number
 * parsing, opening a client from the global options.
 *
 * Owns: the exit statuses' meaning and the hints printed beside errors.
 * Invariant: every reporting function prints at most one JSON object.
 * Never: calls a command (it sits below every cmd_*.c and main.c).
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/json_out.h"
#include "base/clock.h"
#include "base/number.h"
#include "proto/reasons.h"

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
        json_error(stdout, "INVALID_ARGUMENT", REASON_USAGE, msg);
    }
    return ONCECTL_EXIT_USAGE;
}

int
exit_for(const once_status *st)
{
    if (st->code == ONCE_OK) {
        return ONCECTL_EXIT_OK;
    }
    if (once_status_outcome_unknown(st)) {
        return ONCECTL_EXIT_UNKNOWN;
    }
    return ONCECTL_EXIT_CALL;
}

/* What to do next, for people; NULL when there is nothing useful to say. */
static const char *
error_hint(const cli *g, const once_status *st, const once_rpc_id *id,
           char *buf, size_t len)
{
    if (once_status_outcome_unknown(st) && id != NULL) {
        snprintf(buf, len,
                 "retry with --rpc-id %" PRIu64 ":%" PRIu64
                 " (same arguments) to learn whether it took effect",
                 id->client_id, id->seq);
        return buf;
    }
    if (once_status_is(st, ONCE_REASON_NOT_SENT)) {
        bool conf = g->server_from != NULL;
        snprintf(buf, len,
                 "is onced listening on %s%s%s%s? set --server or ONCE_SERVER",
                 g->server, conf ? " (a listener of " : "",
                 conf ? g->server_from : "", conf ? ")" : "");
        return buf;
    }
    if (once_status_is(st, ONCE_REASON_RPC_ID_CONFLICT)) {
        return "this rpc id belongs to a call with other arguments; retry "
               "with the original arguments to get its result";
    }
    if (once_status_is(st, ONCE_REASON_LEASE_EXPIRED)) {
        return "the lease of this client id has ended; its calls can no "
               "longer be retried or learned";
    }
    if (once_status_is(st, ONCE_REASON_STALE_RPC)) {
        return "this rpc id was already acknowledged; its result is no "
               "longer kept";
    }
    if (st->code == ONCE_DEADLINE_EXCEEDED ||
        once_status_is(st, ONCE_REASON_NO_REPLY)) {
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

bool
is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* A global option written after the command: worth a precise hint. */
bool
is_global_opt(const char *a)
{
    const global_opt *o = globals_find(a);

    return o != NULL && o->kind != GLOBAL_VERSION && o->kind != GLOBAL_HELP;
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

int
parse_i64(const char *s, int64_t *v)
{
    bool neg = (*s == '-');
    uint64_t u;

    if (number_parse_u64_all(neg ? s + 1 : s, &u) != 0) {
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

    if (number_parse_u64(s, &end, &c) != 0 || *end != ':' ||
        number_parse_u64_all(end + 1, &q) != 0 || c == 0 || q == 0) {
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
bool
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

int
open_client(const cli *g, bool no_lease, once_client **cp, once_status *st)
{
    once_options o;
    once_security sec;

    once_options_init(&o);
    once_security_init(&sec);
    sec.key_file = g->key_file;
    sec.tls_ca_file = g->tls_ca;
    sec.tls_server_name = g->tls_server_name;
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

bool
call_end(const cli *g, once_client *c, int rv, const once_status *st, int *ex)
{
    once_client_close(c);
    if (rv != ONCE_OK) {
        *ex = report_error(g, st, NULL);
        return false;
    }
    return true;
}

/* The wall-clock time left_ms from now, "2026-12-01T15:04:05Z", into
 * buf. */
static void
time_from_now(uint64_t left_ms, char *buf, size_t len)
{
    time_t t = (time_t)(clock_wall_ms() / 1000 + left_ms / 1000);
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL ||
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        buf[0] = '\0';
    }
}

bool
call_end_keep_lease(const cli *g, once_client *c, int rv, const once_status *st,
                    bool explicit_id, const once_rpc_id *id, char *until,
                    size_t len, int *ex)
{
    uint64_t left = 0;
    bool show;

    once_client_close_keep_lease(c, &left);
    until[0] = '\0';
    if (!explicit_id && left > 0) {
        time_from_now(left, until, len);
    }
    if (rv == ONCE_OK) {
        return true;
    }
    /* The id is worth printing only if it may have reached the server. */
    show = explicit_id || (id->seq != 0 && st->attempts > 0);
    *ex = report_error(g, st, show ? id : NULL);
    if (show && !g->json && until[0] != '\0') {
        fprintf(stderr,
                "rpc id %" PRIu64 ":%" PRIu64 " can be retried until %s\n",
                id->client_id, id->seq, until);
    }
    return false;
}

int
cli_dispatch(const cli *g, const char *family, const cli_sub *subs, size_t n,
             const char *usage, const char *hint, int argc, char **argv)
{
    const char *sub = argc > 0 ? argv[0] : NULL;

    if (sub == NULL) {
        return usage_error(g, hint, "%s needs a subcommand", family);
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(sub, subs[i].name) == 0) {
            return subs[i].run(g, argc - 1, argv + 1);
        }
    }
    if (is_help(sub)) {
        fputs(usage, stdout);
        return ONCECTL_EXIT_OK;
    }
    return usage_error(g, hint, "unknown %s subcommand '%s'", family, sub);
}
