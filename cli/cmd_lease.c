/*
 * cmd_lease.c — `oncectl lease open|renew|close|info`: the Lease service
 * on any client id.
 *
 * Owns: the lease commands' arguments and output.
 * Invariant: every command opens a handle without a lease of its own, so
 * only the lease named by CLIENT_ID is touched.
 * Never: prints more than one JSON object.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "base/duration.h"
#include "cli/json_out.h"
#include "base/number.h"

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
    "Unknown ids: renew answers FAILED_PRECONDITION (LEASE_EXPIRED) for\n"
    "an id never issued as for an ended lease; close and info answer\n"
    "NOT_FOUND (UNKNOWN_CLIENT) for an id never issued. With\n"
    "authentication on, an id that is not one of your leases (another\n"
    "principal's, never issued, or collected) is PERMISSION_DENIED\n"
    "(NOT_YOUR_LEASE) for renew, close and info alike, so ids cannot be\n"
    "probed; an operator's info still sees every lease.\n";

/* Parses the one CLIENT_ID argument of `lease renew|close|info`. Returns
 * 0, or the exit status of the usage error it reported; *done is set when
 * the command is over all the same (it printed --help). */
static int
lease_id_arg(const cli *g, const char *sub, int argc, char **argv, uint64_t *id,
             bool *done)
{
    const char *arg = NULL;

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
    if (number_parse_u64_all(arg, id) != 0 || *id == 0) {
        return usage_error(g, "a client id is a positive integer, e.g. 3",
                           "bad CLIENT_ID '%s'", arg);
    }
    return 0;
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
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
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

/* What `lease renew|close|info` learned. */
typedef struct lease_result {
    uint64_t id;
    uint64_t ttl, left;        /* renew */
    uint64_t retained;         /* close */
    struct once_lease_info li; /* info */
} lease_result;

static void
lease_print_renew(const cli *g, const lease_result *r)
{
    char b1[64], b2[64];

    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", r->id);
        json_u64(&j, "ttl_ms", r->ttl);
        json_u64(&j, "remaining_ms", r->left);
        json_end(&j);
    } else {
        printf("client id %" PRIu64 " renewed: ttl %s, remaining %s\n", r->id,
               duration_format(r->ttl, b1, sizeof(b1)),
               duration_format(r->left, b2, sizeof(b2)));
    }
}

static void
lease_print_close(const cli *g, const lease_result *r)
{
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", r->id);
        json_u64(&j, "records_retained", r->retained);
        json_end(&j);
    } else {
        printf("client id %" PRIu64 " closed; %" PRIu64
               " record(s) left for the collector\n",
               r->id, r->retained);
    }
}

static void
lease_print_info(const cli *g, const lease_result *r)
{
    const struct once_lease_info *li = &r->li;
    char b1[64], b2[64], b3[64];

    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "client_id", li->client_id);
        json_str(&j, "principal", li->principal);
        json_str(&j, "state", once_lease_state_name(li->state));
        json_u64(&j, "ttl_ms", li->ttl_ms);
        json_u64(&j, "remaining_ms", li->remaining_ms);
        json_u64(&j, "watermark", li->watermark);
        json_u64(&j, "watermark_durable", li->watermark_durable);
        json_u64(&j, "records_retained", li->records_retained);
        json_u64(&j, "bytes_retained", li->bytes_retained);
        json_u64(&j, "max_seq", li->max_seq);
        json_u64(&j, "oldest_record_age_ms", li->oldest_record_age_ms);
        json_end(&j);
    } else {
        printf("client_id %" PRIu64 "\n", li->client_id);
        printf("principal %s\n", li->principal);
        printf("state %s\n", once_lease_state_name(li->state));
        printf("ttl %s\n", duration_format(li->ttl_ms, b1, sizeof(b1)));
        printf("remaining %s\n",
               duration_format(li->remaining_ms, b2, sizeof(b2)));
        printf("watermark %" PRIu64 "\n", li->watermark);
        printf("watermark_durable %" PRIu64 "\n", li->watermark_durable);
        printf("records_retained %" PRIu64 "\n", li->records_retained);
        printf("bytes_retained %" PRIu64 "\n", li->bytes_retained);
        printf("max_seq %" PRIu64 "\n", li->max_seq);
        printf("oldest_record_age %s\n",
               duration_format(li->oldest_record_age_ms, b3, sizeof(b3)));
    }
}

/* `lease renew|close|info CLIENT_ID` (sub names which): one call on a
 * handle without a lease of its own, then its result. */
static int
lease_on_id(const cli *g, const char *sub, int argc, char **argv)
{
    lease_result r = {0};
    once_client *c = NULL;
    once_status st;
    bool done;
    int rv;

    if ((rv = lease_id_arg(g, sub, argc, argv, &r.id, &done)) != 0 || done) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        if (strcmp(sub, "renew") == 0) {
            rv = once_lease_renew(c, r.id, &r.ttl, &r.left, &st);
        } else if (strcmp(sub, "close") == 0) {
            rv = once_lease_close(c, r.id, &r.retained, &st);
        } else {
            rv = once_lease_info(c, r.id, &r.li, &st);
        }
    }
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    if (strcmp(sub, "renew") == 0) {
        lease_print_renew(g, &r);
    } else if (strcmp(sub, "close") == 0) {
        lease_print_close(g, &r);
    } else {
        lease_print_info(g, &r);
    }
    return ONCECTL_EXIT_OK;
}

static int
cmd_lease_renew(const cli *g, int argc, char **argv)
{
    return lease_on_id(g, "renew", argc, argv);
}

static int
cmd_lease_close(const cli *g, int argc, char **argv)
{
    return lease_on_id(g, "close", argc, argv);
}

static int
cmd_lease_info(const cli *g, int argc, char **argv)
{
    return lease_on_id(g, "info", argc, argv);
}

/* `oncectl lease SUBCOMMAND ...`; argv[0] is the subcommand. */
int
cmd_lease(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {
        {"open", cmd_lease_open},
        {"renew", cmd_lease_renew},
        {"close", cmd_lease_close},
        {"info", cmd_lease_info},
    };

    return cli_dispatch(g, "lease", subs, sizeof(subs) / sizeof(subs[0]),
                        usage_lease,
                        "lease commands are: lease open [--ttl D], lease "
                        "renew|close|info CLIENT_ID",
                        argc, argv);
}
