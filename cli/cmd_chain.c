/*
 * cmd_chain.c — `oncectl chain list|show --journal DIR`: a (crashed)
 * scheduler's chain journal as an operator sees it (once/journal.h,
 * docs/chains.md): each chain's state, its pending step with its rpc id
 * and lease, its context, the reply not yet consumed.
 *
 * Owns: the chain commands' output (text and --json).
 * Invariant: reads only: nothing is sent, nothing written (the journal is
 * opened, listed or shown, and closed; once_journal_open_existing tells a
 * LevelDB journal from an input store's journal of files and creates
 * neither).
 * Never: opens a chain (that would resume it); prints more than one JSON
 * object.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "cli/msg_print.h"
#include "once/journal.h"
#include "proto/grants.pb-c.h"
#include "proto/once.pb-c.h"

static const char chain_usage[] =
    "usage: oncectl [GLOBAL OPTIONS] chain list --journal DIR\n"
    "       oncectl [GLOBAL OPTIONS] chain show --journal DIR CHAIN_ID\n"
    "Reads a chain journal without resuming anything. DIR is either kind\n"
    "(told by its files): a LevelDB journal (once_journal_open's; holds\n"
    "CURRENT; it must not be open in another process) or an input store\n"
    "(once_inputs_open's, --store of grants inputs: one file per chain,\n"
    "readable while schedulers run; its inputs are the chains\n"
    "input/<hash>-<attempt>).\n"
    "list: one line per chain (id, state, steps, pending rpc id).\n"
    "show: one chain: state, owner, context, the step in flight (method,\n"
    "rpc id, its lease's TTL and the time the chain should be resumed by),\n"
    "the recorded answer, and the request or reply decoded.\n";

/* --journal DIR and at most one positional argument. ONCECTL_EXIT_OK, or
 * the exit status when the command ends here (*done): a usage error, or
 * --help printed. */
static int
chain_args(const cli *g, int argc, char **argv, const char **dir,
           const char **id, bool want_id, bool *done)
{
    int ex;

    *dir = *id = NULL;
    *done = true;
    for (int i = 0; i < argc; i++) {
        int r = opt_value(argc, argv, &i, "--journal", dir);
        if (r < 0) {
            return usage_error(g, "e.g. --journal /var/lib/sched/journal",
                               "--journal needs a directory");
        }
        if (r > 0) {
            continue;
        }
        if (common_arg(g, argv[i], chain_usage, &ex)) {
            return ex;
        }
        if (!want_id || *id != NULL || argv[i][0] == '-') {
            return usage_error(g, "oncectl chain --help",
                               "unexpected argument '%s'", argv[i]);
        }
        *id = argv[i];
    }
    if (*dir == NULL || (want_id && *id == NULL)) {
        return usage_error(g, "oncectl chain --help",
                           want_id ? "chain show needs --journal DIR and a "
                                     "chain id"
                                   : "chain list needs --journal DIR");
    }
    *done = false;
    return ONCECTL_EXIT_OK;
}

static void
info_json(json_obj *j, const once_chain_info *in)
{
    char rid[48];

    snprintf(rid, sizeof(rid), "%" PRIu64 ":%" PRIu64, in->id.client_id,
             in->id.seq);
    json_str(j, "chain_id", in->chain_id);
    json_str(j, "state", once_chain_state_name(in->state));
    json_u64(j, "steps", in->steps);
    json_str(j, "principal", in->principal);
    if (in->state != ONCE_CHAIN_IDLE) {
        json_str(j, "method", in->method);
        json_str(j, "rpc_id", rid);
        json_u64(j, "lease_ttl_ms", in->lease_ttl_ms);
        if (in->state == ONCE_CHAIN_PENDING) {
            json_u64(j, "resume_by_unix_ms",
                     in->updated_unix_ms + in->lease_ttl_ms);
        }
        if (in->state != ONCE_CHAIN_PENDING) { /* written with the answer */
            json_u64(j, "sends", in->sends);
        }
    }
    if (in->state == ONCE_CHAIN_REPLIED ||
        in->state == ONCE_CHAIN_LEASE_ENDED) {
        json_str(j, "code", once_strerror(in->code));
        json_str(j, "reason", in->reason);
        json_str(j, "message", in->message);
    }
    json_u64(j, "updated_unix_ms", in->updated_unix_ms);
}

static int
cmd_chain_list(const cli *g, int argc, char **argv)
{
    once_chain_info *rows = NULL;
    once_journal *jn = NULL;
    const char *dir, *id;
    once_status st;
    size_t n = 0;
    bool done;
    int ex;

    if ((ex = chain_args(g, argc, argv, &dir, &id, false, &done)), done) {
        return ex;
    }
    if (once_journal_open_existing(dir, &jn, &st) != ONCE_OK ||
        once_journal_list(jn, &rows, &n, &st) != ONCE_OK) {
        once_journal_close(jn);
        return report_error(g, &st, NULL);
    }
    once_journal_close(jn);
    if (g->json) {
        json_obj j, arr, e;
        json_begin(&j, stdout);
        json_arr_begin(&j, "chains");
        arr = j;
        for (size_t i = 0; i < n; i++) {
            json_elem_begin(&arr, &e);
            info_json(&e, &rows[i]);
            json_elem_end(&e);
        }
        json_arr_end(&j);
        json_end(&j);
    } else {
        for (size_t i = 0; i < n; i++) {
            printf("%-24s %-11s steps %-6" PRIu64, rows[i].chain_id,
                   once_chain_state_name(rows[i].state), rows[i].steps);
            if (rows[i].state != ONCE_CHAIN_IDLE) {
                printf(" rpc_id %" PRIu64 ":%" PRIu64 " %s",
                       rows[i].id.client_id, rows[i].id.seq, rows[i].method);
            }
            putchar('\n');
        }
    }
    once_free(rows);
    return ONCECTL_EXIT_OK;
}

/* The message type of method's request (reply false) or reply, for the
 * shipped services; NULL for another method. */
static const ProtobufCMessageDescriptor *
method_type(const char *method, bool reply)
{
    static const ProtobufCServiceDescriptor *const svcs[] = {
        &once__v1__counter__descriptor, &once__v1__grants__descriptor};

    for (size_t s = 0; s < sizeof(svcs) / sizeof(svcs[0]); s++) {
        size_t n = strlen(svcs[s]->name);
        if (method[0] != '/' || strncmp(method + 1, svcs[s]->name, n) != 0 ||
            method[n + 1] != '/') {
            continue;
        }
        const ProtobufCMethodDescriptor *m =
            protobuf_c_service_descriptor_get_method_by_name(svcs[s],
                                                             method + n + 2);
        return m == NULL ? NULL : reply ? m->output : m->input;
    }
    return NULL;
}

/* The payload decoded as the method's message (printed by descriptor), or
 * its length when it is not one. */
static void
payload_print(json_obj *j, const once_chain_info *in, const void *p, size_t len)
{
    bool reply = in->state == ONCE_CHAIN_REPLIED;
    const ProtobufCMessageDescriptor *d = method_type(in->method, reply);
    ProtobufCMessage *m =
        d != NULL ? protobuf_c_message_unpack(d, NULL, len, p) : NULL;
    const char *what = reply ? "reply" : "request";

    if (m == NULL) {
        if (j != NULL) {
            json_u64(j, reply ? "reply_len" : "request_len", len);
        } else {
            printf("%-12s %zu bytes\n", what, len);
        }
        return;
    }
    if (j != NULL) {
        json_obj sub;
        json_key(j, what);
        json_begin(&sub, stdout);
        msg_print_json(&sub, m);
        fputc('}', stdout);
    } else {
        printf("%s:\n", what);
        msg_print_text(stdout, m, 14);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void
show_text(const once_chain_info *in, const void *ctx, size_t clen)
{
    printf("%-12s %s\n%-12s %s\n%-12s %" PRIu64 "\n%-12s %s\n", "chain",
           in->chain_id, "state", once_chain_state_name(in->state), "steps",
           in->steps, "principal", in->principal);
    printf("%-12s %.*s (%zu bytes)\n", "context", (int)clen,
           ctx != NULL ? (const char *)ctx : "", clen);
    if (in->state != ONCE_CHAIN_IDLE) {
        printf("%-12s %s\n%-12s %" PRIu64 ":%" PRIu64 "\n%-12s %" PRIu64
               " ms\n",
               "method", in->method, "rpc_id", in->id.client_id, in->id.seq,
               "lease_ttl", in->lease_ttl_ms);
        if (in->state == ONCE_CHAIN_PENDING) {
            printf("%-12s unix ms %" PRIu64 " (last write + lease TTL)\n",
                   "resume_by", in->updated_unix_ms + in->lease_ttl_ms);
        }
    }
    if (in->state == ONCE_CHAIN_REPLIED ||
        in->state == ONCE_CHAIN_LEASE_ENDED) {
        printf("%-12s %s %s %s\n", "answer", once_strerror(in->code),
               in->reason, in->message);
    }
}

static int
cmd_chain_show(const cli *g, int argc, char **argv)
{
    once_journal *jn = NULL;
    once_chain_info in;
    void *ctx = NULL, *pay = NULL;
    size_t clen = 0, plen = 0;
    const char *dir, *id;
    once_status st;
    bool done;
    int ex;

    if ((ex = chain_args(g, argc, argv, &dir, &id, true, &done)), done) {
        return ex;
    }
    if (once_journal_open_existing(dir, &jn, &st) != ONCE_OK ||
        once_journal_show(jn, id, &in, &ctx, &clen, &pay, &plen, &st) !=
            ONCE_OK) {
        once_journal_close(jn);
        return report_error(g, &st, NULL);
    }
    once_journal_close(jn);
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        info_json(&j, &in);
        json_u64(&j, "context_len", clen);
        if (in.state != ONCE_CHAIN_IDLE) {
            payload_print(&j, &in, pay, plen);
        }
        json_end(&j);
    } else {
        show_text(&in, ctx, clen);
        if (in.state != ONCE_CHAIN_IDLE) {
            payload_print(NULL, &in, pay, plen);
        }
    }
    once_free(ctx);
    once_free(pay);
    return ONCECTL_EXIT_OK;
}

/* `oncectl chain list|show`; argv[0] is the subcommand. */
int
cmd_chain(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {{"list", cmd_chain_list},
                                   {"show", cmd_chain_show}};

    return cli_dispatch(g, "chain", subs, sizeof(subs) / sizeof(subs[0]),
                        chain_usage,
                        "the chain commands are: chain list, "
                        "chain show",
                        argc, argv);
}
