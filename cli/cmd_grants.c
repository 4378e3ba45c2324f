/*
 * cmd_grants.c — `oncectl grants ...`: one subcommand per method of
 * once.v1.Grants (docs/grants.md), and `grants inputs` for libonce's input
 * store.
 *
 * Owns: the table mapping each subcommand to its method and to the request
 * fields its arguments fill (positional arguments and --options are named
 * after the fields, so the request is built from the generated
 * descriptors), and printing any reply message (msg_print.c): with
 * --json one object (nested messages as objects, repeated fields as
 * arrays, enums by name, bytes as lowercase hex, absent messages left
 * out), otherwise one "path value" line per field (grant.grant_id 3,
 * claimed[0].row.work_id 7).
 * Invariant: a mutating subcommand with --rpc-id sends exactly that id and
 * opens no lease; without it a fresh lease and its seq 1 are used, and the
 * id is printed (rpc_id) so an unknown outcome can be retried.
 * Never: retries under an id it invented, or prints more than one JSON
 * object.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/duration.h"
#include "proto/grants.pb-c.h"
#include "cli/json_out.h"
#include "cli/msg_print.h"
#include "base/number.h"
#include "once/client.h"
#include "once/inputs.h"
#include "cli/cli.h"
#include "cli/cmds.h"

#define MAX_POS  6
#define MAX_OPTS 6

/* One subcommand: method, the request fields filled by positional
 * arguments (all required) and by --options (field name with '-' for '_';
 * "*_ttl_ms" fields take a DURATION as --*-ttl). */
typedef struct gsub {
    const char *name;
    const char *method;
    bool mutating;
    const char *pos[MAX_POS];
    const char *opts[MAX_OPTS];
    const char *about;
} gsub;

static const gsub subs[] = {
    {"set-placement",
     "SetPlacement",
     true,
     {"surface", "machine", "location"},
     {NULL},
     "map SURFACE to (MACHINE, LOCATION); bumps the generation"},
    {"request",
     "RequestGrant",
     true,
     {"request_id", "surface", "machine", "location", "generation"},
     {"attempt", "payload", "credential_ttl_ms"},
     "ask for the start grant of SURFACE (--store DIR keeps the input)"},
    {"enqueue",
     "Enqueue",
     true,
     {"request_id", "surface"},
     {"attempt", "payload"},
     "queue work; its destination is the placement of this moment\n"
     "      (--store DIR keeps the input)"},
    {"claim",
     "Claim",
     true,
     {"machine"},
     {"max", "credential_ttl_ms"},
     "turn MACHINE's own queued rows into grants"},
    {"renew-credential",
     "RenewCredential",
     true,
     {"grant_id", "machine"},
     {"credential_ttl_ms"},
     "a fresh credential under the same grant"},
    {"finish",
     "FinishGrant",
     true,
     {"grant_id", "outcome"},
     {NULL},
     "close a grant: succeeded|failed-before-start|aborted|released"},
    {"cancel", "CancelGrant", true, {"grant_id"}, {NULL}, "cancel a grant"},
    {"delete-machine",
     "DeleteMachine",
     true,
     {"machine"},
     {NULL},
     "delete MACHINE's pending rows (open grants are kept)"},
    {"delete-work",
     "DeleteWork",
     true,
     {"work_id"},
     {NULL},
     "delete a queued row"},
    {"legacy-claim",
     "LegacyClaim",
     true,
     {"surface", "holder"},
     {NULL},
     "the old acquisition path (same surface lock)"},
    {"legacy-release",
     "LegacyRelease",
     true,
     {"surface", "holder"},
     {NULL},
     "release a legacy hold"},
    {"get-surface",
     "GetSurface",
     false,
     {"surface"},
     {NULL},
     "placement, open grant, history, recorded rejections"},
    {"list-queue",
     "ListQueue",
     false,
     {"machine"},
     {NULL},
     "MACHINE's pending and expired rows"},
    {"list-surfaces",
     "ListSurfaces",
     false,
     {NULL},
     {"page_size", "page_token"},
     "the surfaces with an open grant, a pending row or rejections,\n"
     "      in name order, a page at a time (default 20, at most 100;\n"
     "      the next page: --page-token NEXT_PAGE_TOKEN)"},
    {"list-machines",
     "ListMachines",
     false,
     {NULL},
     {"page_size", "page_token"},
     "the machines with pending rows, expired rows or deleted, in\n"
     "      name order, a page at a time (as list-surfaces)"},
};

#define N_SUBS (sizeof(subs) / sizeof(subs[0]))

static void
usage_grants(FILE *f)
{
    fputs("usage: oncectl [GLOBAL OPTIONS] grants SUBCOMMAND ARGS... "
          "[OPTIONS]\n\nStart grants (once.v1.Grants). Subcommands:\n",
          f);
    for (size_t i = 0; i < N_SUBS; i++) {
        char line[256];
        size_t n = (size_t)snprintf(line, sizeof(line), "  %s", subs[i].name);
        for (int k = 0; k < MAX_POS && subs[i].pos[k] != NULL; k++) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, " ");
            for (const char *p = subs[i].pos[k]; *p && n + 1 < sizeof(line);
                 p++) {
                line[n++] = (char)toupper((unsigned char)*p);
            }
            line[n] = '\0';
        }
        fprintf(f, "%s\n      %s\n", line, subs[i].about);
        for (int k = 0; k < MAX_OPTS && subs[i].opts[k] != NULL; k++) {
            const char *o = subs[i].opts[k];
            bool ttl = strstr(o, "_ttl_ms") != NULL;
            fprintf(f, "      --");
            for (const char *p = o; *p && !(ttl && strcmp(p, "_ms") == 0);
                 p++) {
                fputc(*p == '_' ? '-' : *p, f);
            }
            fprintf(f, " %s\n", ttl ? "DURATION" : "VALUE");
        }
    }
    fputs("  inputs --store DIR [--resume]\n"
          "      the inputs libonce keeps until accepted (once/inputs.h);\n"
          "      --resume re-sends the pending ones with their own rpc ids\n"
          "\n"
          "Mutating subcommands take --rpc-id CLIENT:SEQ to retry exactly\n"
          "that id (no lease is opened); otherwise a fresh lease is used and\n"
          "the rpc id is printed. `request --store DIR` keeps the input in\n"
          "DIR until the grant is accepted, `enqueue --store DIR` until the\n"
          "row is (not with --rpc-id).\n"
          "Output: the reply's fields (nested as objects, lists as arrays,\n"
          "enums by name, bytes as hex), or with --json one JSON object;\n"
          "errors as {\"code\",\"reason\",\"message\"} and a non-zero exit.\n",
          f);
}

/* ---- printing ----------------------------------------------------------- */

/* Prints the reply r (and the rpc id when id is not NULL). */
static void
print_reply(const cli *g, const ProtobufCMessage *r, const once_rpc_id *id,
            const once_status *st)
{
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        msg_print_json(&j, r);
        if (id != NULL) {
            char idbuf[48];
            snprintf(idbuf, sizeof(idbuf), "%" PRIu64 ":%" PRIu64,
                     id->client_id, id->seq);
            json_str(&j, "rpc_id", idbuf);
            json_bool(&j, "replayed", st->replayed);
        }
        json_end(&j);
    } else {
        msg_print_text(stdout, r, 0);
        if (id != NULL) {
            printf("rpc_id %" PRIu64 ":%" PRIu64 "%s\n", id->client_id, id->seq,
                   st->replayed ? " (replayed)" : "");
        }
    }
    fflush(stdout);
}

/* ---- building a request ------------------------------------------------- */

/* Sets field `field` of m from text a. 0, or a usage error's exit status. */
static int
set_field(const cli *g, ProtobufCMessage *m, const char *field, const char *a)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
    char *p;
    uint64_t v = 0;

    if (fd == NULL) {
        return usage_error(g, NULL, "internal: no field %s", field);
    }
    p = (char *)m + fd->offset;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_STRING:
        *(const char **)p = a;
        return 0;
    case PROTOBUF_C_TYPE_BYTES:
        ((ProtobufCBinaryData *)p)->data = (uint8_t *)a;
        ((ProtobufCBinaryData *)p)->len = strlen(a);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        char up[64];
        const ProtobufCEnumValue *ev;
        size_t i;
        for (i = 0; a[i] != '\0' && i + 1 < sizeof(up); i++) {
            up[i] = a[i] == '-' ? '_' : (char)toupper((unsigned char)a[i]);
        }
        up[i] = '\0';
        ev = protobuf_c_enum_descriptor_get_value_by_name(fd->descriptor, up);
        if (ev == NULL || ev->value == 0) {
            return usage_error(g,
                               "outcomes are succeeded, failed-before-start, "
                               "aborted, released",
                               "bad %s '%s'", field, a);
        }
        *(int *)p = ev->value;
        return 0;
    }
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_UINT32:
        if (strstr(field, "_ttl_ms") != NULL) {
            if (duration_parse(a, &v) != 0) {
                return usage_error(g, "write durations like 30s, 5m, 1h",
                                   "bad duration '%s'", a);
            }
        } else if (number_parse_u64_all(a, &v) != 0) {
            return usage_error(g, NULL,
                               "%s takes a non-negative integer, "
                               "not '%s'",
                               field, a);
        }
        if (fd->type == PROTOBUF_C_TYPE_UINT32) {
            if (v > UINT32_MAX) {
                return usage_error(g, NULL, "%s '%s' is too large", field, a);
            }
            *(uint32_t *)p = (uint32_t)v;
        } else {
            *(uint64_t *)p = v;
        }
        return 0;
    default:
        return usage_error(g, NULL, "internal: field %s", field);
    }
}

/* Matches argv[*i] against the option of field (see gsub). */
static int
field_opt(int argc, char **argv, int *i, const char *field, const char **val)
{
    char name[64];
    size_t n = 0;
    bool ttl = strstr(field, "_ttl_ms") != NULL;

    name[n++] = '-';
    name[n++] = '-';
    for (const char *p = field; *p && n + 1 < sizeof(name); p++) {
        if (ttl && strcmp(p, "_ms") == 0) {
            break;
        }
        name[n++] = *p == '_' ? '-' : *p;
    }
    name[n] = '\0';
    return opt_value(argc, argv, i, name, val);
}

/* ---- running a subcommand ----------------------------------------------- */

/* `request --store` / `enqueue --store`: req kept in s, then sent. */
static int
submit_kept(once_client *c, once_inputs *s, const gsub *sc,
            const ProtobufCMessage *req, once_rpc_id *id, void **resp,
            size_t *resp_len, once_status *st)
{
    if (strcmp(sc->method, "Enqueue") == 0) {
        const Once__V1__EnqueueRequest *q = (const void *)req;
        once_work_input in = {.request_id = q->request_id,
                              .attempt = q->attempt,
                              .surface = q->surface,
                              .payload = q->payload.data,
                              .payload_len = q->payload.len};
        return once_work_submit(c, s, &in, id, resp, resp_len, st);
    }
    {
        const Once__V1__RequestGrantRequest *q = (const void *)req;
        once_grant_input in = {.request_id = q->request_id,
                               .attempt = q->attempt,
                               .surface = q->surface,
                               .machine = q->machine,
                               .location = q->location,
                               .generation = q->generation,
                               .payload = q->payload.data,
                               .payload_len = q->payload.len,
                               .credential_ttl_ms = q->credential_ttl_ms};
        return once_grant_submit(c, s, &in, id, resp, resp_len, st);
    }
}

/* Fills req from run_sub's arguments: --rpc-id into *id (rpc_arg its
 * text), --store into *store, options and positionals into fields.
 * ONCECTL_EXIT_OK with nothing to do after --help; -1 to go on; else the
 * usage error's status. */
static int
sub_args(const cli *g, const gsub *sc, const ProtobufCMethodDescriptor *md,
         ProtobufCMessage *req, int argc, char **argv, const char **rpc_arg,
         const char **store, once_rpc_id *id)
{
    int npos = 0, ex, m;

    for (int i = 0; i < argc; i++) {
        const char *v;
        bool matched = false;

        if (is_help(argv[i])) {
            usage_grants(stdout);
            return ONCECTL_EXIT_OK;
        }
        if (is_global_opt(argv[i])) {
            ex = usage_error(g, GLOBAL_HINT, "misplaced option '%s'", argv[i]);
            return ex;
        }
        if (sc->mutating &&
            (m = opt_value(argc, argv, &i, "--rpc-id", rpc_arg)) != 0) {
            if (m < 0 || parse_rpc_id(*rpc_arg, id) != 0) {
                ex = usage_error(g, "e.g. --rpc-id 3:1",
                                 "--rpc-id takes CLIENT:SEQ");
                return ex;
            }
            continue;
        }
        if ((strcmp(sc->method, "RequestGrant") == 0 ||
             strcmp(sc->method, "Enqueue") == 0) &&
            (m = opt_value(argc, argv, &i, "--store", store)) != 0) {
            if (m < 0 || (*store)[0] == '\0') {
                ex = usage_error(g, NULL, "--store needs a DIR");
                return ex;
            }
            continue;
        }
        for (int k = 0; k < MAX_OPTS && sc->opts[k] != NULL; k++) {
            if ((m = field_opt(argc, argv, &i, sc->opts[k], &v)) != 0) {
                if (m < 0) {
                    ex = usage_error(g, NULL, "'%s' needs a value", argv[i]);
                    return ex;
                }
                if ((ex = set_field(g, req, sc->opts[k], v)) != 0) {
                    return ex;
                }
                matched = true;
                break;
            }
        }
        if (matched) {
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            ex = usage_error(g, "see 'oncectl grants --help'",
                             "unknown option '%s' to grants %s", argv[i],
                             sc->name);
            return ex;
        }
        if (npos >= MAX_POS || sc->pos[npos] == NULL) {
            ex = usage_error(g, "see 'oncectl grants --help'",
                             "too many arguments to grants %s", sc->name);
            return ex;
        }
        if ((ex = set_field(g, req, sc->pos[npos++], argv[i])) != 0) {
            return ex;
        }
    }
    if (npos < MAX_POS && sc->pos[npos] != NULL) {
        ex = usage_error(g, "see 'oncectl grants --help'", "grants %s needs %s",
                         sc->name, sc->pos[npos]);
        return ex;
    }
    {
        /* attempt: 1 unless given (the server counts from 1). */
        const ProtobufCFieldDescriptor *fd =
            protobuf_c_message_descriptor_get_field_by_name(md->input,
                                                            "attempt");
        if (fd != NULL && *(uint32_t *)((char *)req + fd->offset) == 0) {
            *(uint32_t *)((char *)req + fd->offset) = 1;
        }
    }
    if (*store != NULL && *rpc_arg != NULL) {
        ex = usage_error(g, "the store keeps the rpc id it sent with",
                         "--store and --rpc-id do not go together");
        return ex;
    }

    return -1;
}

static int
run_sub(const cli *g, const gsub *sc, int argc, char **argv)
{
    const ProtobufCServiceDescriptor *svc = &once__v1__grants__descriptor;
    const ProtobufCMethodDescriptor *md =
        protobuf_c_service_descriptor_get_method_by_name(svc, sc->method);
    ProtobufCMessage *req = NULL, *r = NULL;
    const char *rpc_arg = NULL, *store = NULL;
    once_rpc_id id = {0, 0};
    once_client *c = NULL;
    once_inputs *s = NULL;
    once_status st;
    char full[96];
    uint8_t *buf = NULL;
    void *resp = NULL;
    size_t len, resp_len = 0;
    int ex = ONCECTL_EXIT_OK, rv;

    if (md == NULL) {
        fprintf(stderr, "oncectl: built without once.v1.Grants/%s\n",
                sc->method);
        return ONCECTL_EXIT_CALL;
    }
    if ((req = calloc(1, md->input->sizeof_message)) == NULL) {
        return ONCECTL_EXIT_CALL;
    }
    md->input->message_init(req);
    if ((ex = sub_args(g, sc, md, req, argc, argv, &rpc_arg, &store, &id)) >=
        0) {
        goto out;
    }
    ex = ONCECTL_EXIT_OK;
    if ((rv = open_client(g, !sc->mutating || rpc_arg != NULL, &c, &st)) !=
        ONCE_OK) {
        ex = report_error(g, &st, NULL);
        goto out;
    }
    if (store != NULL) {
        if ((rv = once_inputs_open(&s, store, &st)) == ONCE_OK) {
            rv = submit_kept(c, s, sc, req, &id, &resp, &resp_len, &st);
        }
    } else {
        len = protobuf_c_message_get_packed_size(req);
        if ((buf = malloc(len + 1)) == NULL) {
            ex = ONCECTL_EXIT_CALL;
            goto out;
        }
        protobuf_c_message_pack(req, buf);
        snprintf(full, sizeof(full), "/%s/%s", svc->name, sc->method);
        rv = once_call(c, full, sc->mutating, sc->mutating ? &id : NULL, buf,
                       len, &resp, &resp_len, &st);
    }
    if (rv != ONCE_OK) {
        ex = report_error(g, &st, sc->mutating && id.seq != 0 ? &id : NULL);
        goto out;
    }
    if ((r = protobuf_c_message_unpack(md->output, NULL, resp_len, resp)) ==
        NULL) {
        st.code = ONCE_INTERNAL;
        snprintf(st.reason, sizeof(st.reason), ONCE_REASON_BAD_RESPONSE);
        snprintf(st.message, sizeof(st.message), "the reply is not a %s",
                 md->output->name);
        ex = report_error(g, &st, NULL);
        goto out;
    }
    print_reply(g, r, sc->mutating ? &id : NULL, &st);

out:
    if (r != NULL) {
        protobuf_c_message_free_unpacked(r, NULL);
    }
    once_free(resp);
    free(buf);
    free(req);
    once_inputs_close(s);
    once_client_close(c);
    return ex;
}

/* ---- inputs ------------------------------------------------------------ */

static void
input_json(FILE *f, const once_input_info *in)
{
    json_obj e;

    json_begin(&e, f);
    json_str(&e, "request_id", in->request_id);
    json_u64(&e, "attempt", in->attempt);
    json_str(&e, "state", once_input_state_name(in->state));
    json_str(&e, "kind",
             in->kind == ONCE_INPUT_ENQUEUE ? "enqueue" : "request");
    json_str(&e, "surface", in->surface);
    json_str(&e, "machine", in->machine);
    json_str(&e, "location", in->location);
    json_u64(&e, "generation", in->generation);
    json_u64(&e, "payload_bytes", in->payload_len);
    {
        char idb[48];
        snprintf(idb, sizeof(idb), "%" PRIu64 ":%" PRIu64, in->id.client_id,
                 in->id.seq);
        json_str(&e, "rpc_id", idb);
    }
    json_str(&e, "principal", in->principal);
    json_u64(&e, "sends", in->sends);
    json_str(&e, "code", in->code != 0 ? once_strerror(in->code) : "");
    json_str(&e, "reason", in->reason);
    json_str(&e, "message", in->message);
    json_u64(&e, "kept_unix_ms", in->kept_unix_ms);
    json_u64(&e, "updated_unix_ms", in->updated_unix_ms);
    json_str(&e, "file", in->file);
    fputc('}', f);
}

static int
cmd_inputs(const cli *g, int argc, char **argv)
{
    const char *dir = NULL;
    bool resume = false;
    size_t n = 0, acc = 0, pend = 0, ended = 0, rej = 0;
    once_input_info *rows = NULL;
    once_client *c = NULL;
    once_inputs *s = NULL;
    once_status st;
    int ex = ONCECTL_EXIT_OK, m;

    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            usage_grants(stdout);
            return ONCECTL_EXIT_OK;
        }
        if ((m = opt_value(argc, argv, &i, "--store", &dir)) != 0) {
            if (m < 0 || dir[0] == '\0') {
                return usage_error(g, NULL, "--store needs a DIR");
            }
            continue;
        }
        if (strcmp(argv[i], "--resume") == 0) {
            resume = true;
            continue;
        }
        return usage_error(g, "e.g. oncectl grants inputs --store ./inputs",
                           "unexpected argument '%s' to grants inputs",
                           argv[i]);
    }
    if (dir == NULL) {
        return usage_error(g, "e.g. oncectl grants inputs --store ./inputs",
                           "grants inputs needs --store DIR");
    }
    if (once_inputs_open(&s, dir, &st) != ONCE_OK ||
        (resume && (open_client(g, false, &c, &st) != ONCE_OK ||
                    once_grant_inputs_resume(c, s, NULL, NULL, &acc, &pend,
                                             &ended, &rej, &st) != ONCE_OK)) ||
        once_grant_inputs_list(s, &rows, &n, &st) != ONCE_OK) {
        ex = report_error(g, &st, NULL);
        goto out;
    }
    if (g->json) {
        printf("{");
        if (resume) {
            printf("\"accepted\":%zu,\"pending\":%zu,\"lease_ended\":%zu,"
                   "\"rejected\":%zu,",
                   acc, pend, ended, rej);
        }
        printf("\"inputs\":[");
        for (size_t i = 0; i < n; i++) {
            fputs(i > 0 ? "," : "", stdout);
            input_json(stdout, &rows[i]);
        }
        printf("]}\n");
    } else {
        if (resume) {
            printf("resumed: %zu accepted, %zu still pending, %zu lease "
                   "ended, %zu rejected\n",
                   acc, pend, ended, rej);
        }
        if (n == 0) {
            printf("no inputs kept in %s\n", dir);
        }
        for (size_t i = 0; i < n; i++) {
            const once_input_info *in = &rows[i];
            char dest[1400];

            if (in->kind == ONCE_INPUT_ENQUEUE) {
                snprintf(dest, sizeof(dest), "queued");
            } else {
                snprintf(dest, sizeof(dest), "-> %s:%s gen %" PRIu64,
                         in->machine, in->location, in->generation);
            }
            printf("%s attempt %" PRIu32 " %s surface %s %s rpc %" PRIu64
                   ":%" PRIu64 " sends %" PRIu32 "%s%s%s\n",
                   in->request_id, in->attempt,
                   once_input_state_name(in->state), in->surface, dest,
                   in->id.client_id, in->id.seq, in->sends,
                   in->reason[0] != '\0' ? " (" : "", in->reason,
                   in->reason[0] != '\0' ? ")" : "");
        }
    }
    fflush(stdout);
out:
    once_free(rows);
    once_client_close(c);
    once_inputs_close(s);
    return ex;
}

int
cmd_grants(const cli *g, int argc, char **argv)
{
    const char *sub = argc > 0 ? argv[0] : NULL;

    if (sub == NULL) {
        return usage_error(g, "see 'oncectl grants --help'",
                           "grants needs a subcommand");
    }
    if (is_help(sub)) {
        usage_grants(stdout);
        return ONCECTL_EXIT_OK;
    }
    if (strcmp(sub, "inputs") == 0) {
        return cmd_inputs(g, argc - 1, argv + 1);
    }
    for (size_t i = 0; i < N_SUBS; i++) {
        if (strcmp(sub, subs[i].name) == 0) {
            return run_sub(g, &subs[i], argc - 1, argv + 1);
        }
    }
    return usage_error(g, "see 'oncectl grants --help'",
                       "unknown grants subcommand '%s'", sub);
}
