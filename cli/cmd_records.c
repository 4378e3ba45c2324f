/*
 * cmd_records.c — `oncectl records list`: the completion records onced
 * retains, per client or for one client (Admin ListRecords).
 *
 * Owns: the records command's arguments and its two tables / JSON.
 * Invariant: the list is freed with once_free on every path.
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
#include "once/admin.h"

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
        json_str(&e, "state", once_lease_state_name(r->state));
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
               r->client_id, once_lease_state_name(r->state), r->records,
               r->bytes, r->watermark, r->watermark_durable, r->watermark_lag,
               r->max_seq,
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
        const char *v;
        int m;
        if (common_arg(g, argv[i], usage_records, &rv)) {
            return rv;
        }
        if ((m = opt_value(argc, argv, &i, "--client", &v)) != 0) {
            if (m < 0 || number_parse_u64_all(v, &id) != 0 || id == 0) {
                return usage_error(g, "--client takes a client id, e.g. 3",
                                   "bad --client '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--limit", &v)) != 0) {
            if (m < 0 || number_parse_u64_all(v, &limit) != 0 || limit == 0 ||
                limit > 10000) {
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
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    if (g->json) {
        records_print_json(l);
    } else {
        records_print_text(l, id != 0);
    }
    once_free(l);
    return ONCECTL_EXIT_OK;
}

/* `oncectl records SUBCOMMAND ...`; argv[0] is the subcommand. */
int
cmd_records(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {{"list", cmd_records_list}};

    return cli_dispatch(g, "records", subs, 1, usage_records,
                        "the records command is: records list", argc, argv);
}
