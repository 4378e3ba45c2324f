/*
 * cmd_counter.c — `oncectl counter incr|get`: the example service.
 *
 * Owns: the counter commands' arguments and output.
 * Invariant: `counter incr` without --rpc-id is a new call (once_counter_
 * incr_new) on a fresh lease, and leaves that lease alive for its TTL
 * (once_client_close_keep_lease), printing until when the printed rpc id
 * can be retried; with --rpc-id it is a retry of exactly that id
 * (once_counter_incr_retry) on a handle without a lease.
 * Never: invents an rpc id for a retry.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"

static const char usage_incr[] =
    "usage: oncectl [GLOBAL OPTIONS] counter incr NAME [--by N]\n"
    "                                [--rpc-id CLIENT:SEQ]\n"
    "\n"
    "Adds N (default 1, may be negative) to counter NAME, exactly once.\n"
    "Without --rpc-id a new lease is opened and the call is its seq 1; the\n"
    "lease is left alive for its TTL, so the printed rpc id can be retried\n"
    "(with --rpc-id) until the time printed after it.\n"
    "With --rpc-id no lease is opened and exactly that id is sent: a retry\n"
    "of an earlier call returns the stored result (replayed) and changes\n"
    "nothing; the same id with a different NAME or N is ALREADY_EXISTS.\n"
    "Output: value V, rpc id C:S, retry until T | --json "
    "{\"value\":V,\"replayed\":B,\"rpc_id\":\"C:S\"[,\"retry_until\":T]}\n"
    "(T in UTC, RFC 3339; about the lease's TTL from the call.)\n";

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

static int
cmd_counter_incr(const cli *g, int argc, char **argv)
{
    const char *name = NULL;
    int64_t by = 1, value = 0;
    once_rpc_id id = {0, 0};
    bool explicit_id = false;
    once_client *c = NULL;
    once_status st;
    char idbuf[48], until[32];
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
        rv = explicit_id
                 ? once_counter_incr_retry(c, name, by, &id, &value, &st)
                 : once_counter_incr_new(c, name, by, &id, &value, &st);
    }
    /* A one-shot tool: the lease stays alive for its TTL, so the rpc id it
     * prints can still be retried (and replays) after it exits. */
    if (!call_end_keep_lease(g, c, rv, &st, explicit_id, &id, until,
                             sizeof(until), &rv)) {
        return rv;
    }
    snprintf(idbuf, sizeof(idbuf), "%" PRIu64 ":%" PRIu64, id.client_id,
             id.seq);
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_i64(&j, "value", value);
        json_bool(&j, "replayed", st.replayed);
        json_str(&j, "rpc_id", idbuf);
        if (until[0] != '\0') {
            json_str(&j, "retry_until", until);
        }
        json_end(&j);
    } else {
        printf("value %" PRId64 "%s\nrpc id %s\n", value,
               st.replayed ? " (replayed)" : "", idbuf);
        if (until[0] != '\0') {
            printf("retry until %s\n", until);
        }
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
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
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

/* `oncectl counter SUBCOMMAND ...`; argv[0] is the subcommand. */
int
cmd_counter(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {
        {"incr", cmd_counter_incr},
        {"get", cmd_counter_get},
    };

    return cli_dispatch(
        g, "counter", subs, sizeof(subs) / sizeof(subs[0]), usage_counter,
        "counter commands are: counter incr, counter get", argc, argv);
}
