/*
 * cmd_kv.c — `oncectl kv put|get|del|range|txn`: the user's own keys
 * (once.v1.KV, docs/kv.md).
 *
 * Owns: the kv commands' arguments and output.
 * Invariant: put, del and txn are Txns with an rpc id, sent as counter
 * incr sends its call — without --rpc-id a new call on a fresh lease left
 * alive for its TTL (`retry until`), with --rpc-id a retry of exactly that
 * id on a handle without a lease; the same arguments always build the same
 * payload, so a retry replays. A compare that fails is a successful call:
 * exit 0, succeeded false.
 * Never: invents an rpc id for a retry; prints a Txn's result other than
 * as onced sent it.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "cli/kv_file.h"
#include "once/kv.h"

#define RPC_ID_HINT "an rpc id is CLIENT:SEQ, both non-zero, e.g. 3:1"

static const char usage_put[] =
    "usage: oncectl [GLOBAL OPTIONS] kv put KEY VALUE\n"
    "               [--if-version N | --if-absent] [--lease] "
    "[--rpc-id CLIENT:SEQ]\n"
    "\n"
    "Sets KEY to VALUE exactly once. --if-version N puts only if KEY is at\n"
    "version N (0: absent), --if-absent only if KEY does not exist; when\n"
    "the compare fails nothing is written, KEY is read instead and the exit\n"
    "status is still 0 (succeeded false). --lease binds KEY to the call's\n"
    "lease: onced deletes it when that lease ends (without --rpc-id, the\n"
    "fresh lease of this call, alive for its TTL). --rpc-id as in counter\n"
    "incr: exactly that id, a retry (replayed), no lease opened.\n"
    "Output: one line per result, rpc id, retry until | --json\n"
    "{\"succeeded\":B,\"revision\":R,\"replayed\":B,\"failed_compare\":N,\n"
    " \"rpc_id\":\"C:S\"[,\"retry_until\":T],\"results\":[...]}\n";

static const char usage_get[] =
    "usage: oncectl [GLOBAL OPTIONS] kv get KEY\n"
    "\n"
    "Prints KEY's value and version (a missing key is not an error).\n"
    "Output: value V, version N | KEY not found | --json\n"
    "{\"found\":B,\"revision\":R[,\"key\":K,\"value\":V,\"version\":N,\n"
    " \"create_revision\":C,\"lease\":L]}\n";

static const char usage_del[] =
    "usage: oncectl [GLOBAL OPTIONS] kv del KEY [--prefix] "
    "[--rpc-id CLIENT:SEQ]\n"
    "\n"
    "Deletes KEY, or with --prefix every key starting with KEY, exactly\n"
    "once. --rpc-id as in kv put. Output as kv put's; the result says how\n"
    "many keys were deleted.\n";

static const char usage_range[] =
    "usage: oncectl [GLOBAL OPTIONS] kv range PREFIX [--limit N]\n"
    "\n"
    "Lists the keys starting with PREFIX (\"\": every key you may read) in\n"
    "key order, at most N (default 1000), reading page after page.\n"
    "Output: KEY = VALUE (version N) per key | --json\n"
    "{\"kvs\":[{\"key\":K,\"value\":V,\"version\":N,\"create_revision\":C,"
    "\"lease\":L}],\n"
    " \"more\":B,\"revision\":R}\n";

static const char usage_txn[] =
    "usage: oncectl [GLOBAL OPTIONS] kv txn --file TXN.json "
    "[--rpc-id CLIENT:SEQ]\n"
    "\n"
    "Runs the Txn of TXN.json (\"-\": stdin) exactly once:\n"
    "  {\"compares\": [{\"key\": K, \"target\": \"value\"|\"version\"|"
    "\"exists\"|\"absent\",\n"
    "                 \"op\": \"equal\"|\"less\"|\"greater\", "
    "\"value\": V | \"version\": N}],\n"
    "   \"then\": [OP...], \"else\": [OP...]}\n"
    "  OP: {\"op\": \"put\", \"key\": K, \"value\": V[, \"lease\": true]}\n"
    "      {\"op\": \"delete\"|\"get\", \"key\": K}\n"
    "      {\"op\": \"delete_prefix\", \"prefix\": P}\n"
    "      {\"op\": \"emit\", \"topic\": T[, \"payload\": V]}\n"
    "docs/kv.md has the whole format. A failed compare runs \"else\" and\n"
    "exits 0 (succeeded false). --rpc-id as in kv put. Output as kv put's.\n";

static const char usage_kv[] =
    "usage: oncectl [GLOBAL OPTIONS] kv put KEY VALUE [--if-version N | "
    "--if-absent]\n"
    "                                      [--lease] [--rpc-id CLIENT:SEQ]\n"
    "       oncectl [GLOBAL OPTIONS] kv get KEY\n"
    "       oncectl [GLOBAL OPTIONS] kv del KEY [--prefix] "
    "[--rpc-id CLIENT:SEQ]\n"
    "       oncectl [GLOBAL OPTIONS] kv range PREFIX [--limit N]\n"
    "       oncectl [GLOBAL OPTIONS] kv txn --file TXN.json "
    "[--rpc-id CLIENT:SEQ]\n"
    "`oncectl kv SUBCOMMAND --help` says more.\n";

/* ---- arguments ------------------------------------------------------------
 */

/* argv[*i], which no option of `kv sub` matched, as the next of the n
 * positional arguments pos ("--" first lets one start with '-'). 0, or the
 * exit status of the usage error it reported. */
static int
kv_positional(const cli *g, const char *sub, int argc, char **argv, int *i,
              const char **pos, int n)
{
    char hint[64];

    snprintf(hint, sizeof(hint), "see 'oncectl kv %s --help'", sub);
    if (argv[*i][0] == '-' && argv[*i][1] != '\0' && strcmp(argv[*i], "--")) {
        return usage_error(g, hint, "unknown option '%s' to kv %s", argv[*i],
                           sub);
    }
    if (strcmp(argv[*i], "--") == 0 && *i + 1 < argc) {
        ++*i;
    }
    for (int k = 0; k < n; k++) {
        if (pos[k] == NULL) {
            pos[k] = argv[*i];
            return 0;
        }
    }
    return usage_error(g, hint, "unexpected argument '%s'", argv[*i]);
}

/* --rpc-id: 1 taken (*id, *explicit_id), 0 not this option, or -(exit
 * status) of a usage error. */
static int
kv_rpc_id_opt(const cli *g, int argc, char **argv, int *i, once_rpc_id *id,
              bool *explicit_id)
{
    const char *v;
    int m = opt_value(argc, argv, i, "--rpc-id", &v);

    if (m == 0) {
        return 0;
    }
    if (m < 0 || parse_rpc_id(v, id) != 0) {
        return -usage_error(g, RPC_ID_HINT, "bad --rpc-id '%s'",
                            m < 0 ? "" : v);
    }
    *explicit_id = true;
    return 1;
}

/* ---- output ---------------------------------------------------------------
 */

/* len bytes as a JSON string member (bytes after a NUL are not shown;
 * invalid UTF-8 is replaced, as json_out does). */
static void
json_bytes(json_obj *j, const char *key, const void *p, size_t len)
{
    char *s = malloc(len + 1);

    if (s == NULL) {
        json_str(j, key, "");
        return;
    }
    memcpy(s, p, len);
    s[len] = '\0';
    json_str(j, key, s);
    free(s);
}

static void
json_entry(json_obj *j, const once_kv *e)
{
    json_bytes(j, "key", e->key, e->key_len);
    json_bytes(j, "value", e->value, e->value_len);
    json_u64(j, "version", e->version);
    json_u64(j, "create_revision", e->create_revision);
    json_u64(j, "lease", e->lease);
}

/* A get's result as a stored key. */
static once_kv
get_entry(const once_kv_result *o)
{
    once_kv e = {o->key,     o->key_len,         o->value, o->value_len,
                 o->version, o->create_revision, o->lease};

    return e;
}

static const char *
op_name(int kind)
{
    static const char *const names[] = {"?",   "put", "delete", "delete_prefix",
                                        "get", "emit"};

    return kind > 0 && kind <= ONCE_KV_EMIT ? names[kind] : "?";
}

static void
print_op_text(const once_kv_result *o)
{
    switch (o->kind) {
    case ONCE_KV_PUT:
        printf("put: version %" PRIu64 " (was %" PRIu64 ")\n", o->version,
               o->prev_version);
        break;
    case ONCE_KV_DELETE:
    case ONCE_KV_DELETE_PREFIX:
        printf("%s: %" PRIu64 " deleted\n", op_name(o->kind), o->deleted);
        break;
    case ONCE_KV_GET:
        if (!o->found) {
            printf("get: not found\n");
            break;
        }
        printf("get: %.*s = %.*s (version %" PRIu64 ")\n", (int)o->key_len,
               (const char *)o->key, (int)o->value_len, (const char *)o->value,
               o->version);
        break;
    default:
        printf("%s\n", op_name(o->kind));
        break;
    }
}

static void
json_op(json_obj *arr, const once_kv_result *o)
{
    json_obj e;

    json_elem_begin(arr, &e);
    json_str(&e, "op", op_name(o->kind));
    if (o->kind == ONCE_KV_PUT) {
        json_u64(&e, "version", o->version);
        json_u64(&e, "prev_version", o->prev_version);
    } else if (o->kind == ONCE_KV_DELETE || o->kind == ONCE_KV_DELETE_PREFIX) {
        json_u64(&e, "deleted", o->deleted);
    } else if (o->kind == ONCE_KV_GET) {
        json_bool(&e, "found", o->found);
        if (o->found) {
            once_kv kv = get_entry(o);
            json_entry(&e, &kv);
        }
    }
    json_elem_end(&e);
}

static void
print_txn(const cli *g, const once_kv_txn *r, const once_status *st,
          const once_rpc_id *id, const char *until)
{
    char idbuf[48];
    size_t n = once_kv_txn_results(r);
    once_kv_result o;

    snprintf(idbuf, sizeof(idbuf), "%" PRIu64 ":%" PRIu64, id->client_id,
             id->seq);
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_bool(&j, "succeeded", once_kv_txn_succeeded(r));
        json_u64(&j, "revision", once_kv_txn_revision(r));
        json_bool(&j, "replayed", st->replayed);
        json_u64(&j, "failed_compare", once_kv_txn_failed_compare(r));
        json_str(&j, "rpc_id", idbuf);
        if (until[0] != '\0') {
            json_str(&j, "retry_until", until);
        }
        json_arr_begin(&j, "results");
        for (size_t i = 0; i < n; i++) {
            if (once_kv_txn_result(r, i, &o) == ONCE_OK) {
                json_op(&j, &o);
            }
        }
        json_arr_end(&j);
        json_end(&j);
        return;
    }
    if (once_kv_txn_succeeded(r)) {
        printf("succeeded, revision %" PRIu64 "%s\n", once_kv_txn_revision(r),
               st->replayed ? " (replayed)" : "");
    } else {
        printf("compare %" PRIu32 " failed, revision %" PRIu64 "%s\n",
               once_kv_txn_failed_compare(r), once_kv_txn_revision(r),
               st->replayed ? " (replayed)" : "");
    }
    for (size_t i = 0; i < n; i++) {
        if (once_kv_txn_result(r, i, &o) == ONCE_OK) {
            print_op_text(&o);
        }
    }
    printf("rpc id %s\n", idbuf);
    if (until[0] != '\0') {
        printf("retry until %s\n", until);
    }
}

/* ---- the Txn commands -----------------------------------------------------
 */

/* Sends b as a new call (explicit_id false) or a retry of id, and prints
 * the result. Returns the exit status. */
static int
kv_send(const cli *g, once_kv_txn *b, bool explicit_id, once_rpc_id id)
{
    once_client *c = NULL;
    once_status st;
    char until[32];
    int rv;

    /* A refusal the builder holds is the same with or without a server. */
    if ((rv = once_kv_txn_status(b, &st)) != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if ((rv = open_client(g, explicit_id, &c, &st)) == ONCE_OK) {
        rv = once_kv_txn_exec(c, b, &id, &st);
    }
    if (!call_end_keep_lease(g, c, rv, &st, explicit_id, &id, until,
                             sizeof(until), &rv)) {
        return rv;
    }
    print_txn(g, b, &st, &id, until);
    return ONCECTL_EXIT_OK;
}

/* Allocates *bp, or reports the failure; 0 or the exit status. */
static int
kv_builder(const cli *g, once_kv_txn **bp)
{
    once_status st;

    if (once_kv_txn_new(bp) == ONCE_OK) {
        return 0;
    }
    memset(&st, 0, sizeof(st));
    st.code = ONCE_RESOURCE_EXHAUSTED;
    snprintf(st.message, sizeof(st.message), "out of memory");
    return report_error(g, &st, NULL);
}

static int
cmd_kv_put(const cli *g, int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *v;
    once_rpc_id id = {0, 0};
    bool explicit_id = false, lease = false, absent = false;
    int64_t version = -1;
    once_kv_txn *b = NULL;
    int rv, m;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_put, &rv)) {
            return rv;
        }
        if ((m = kv_rpc_id_opt(g, argc, argv, &i, &id, &explicit_id)) != 0) {
            if (m < 0) {
                return -m;
            }
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--if-version", &v)) != 0) {
            if (m < 0 || parse_i64(v, &version) != 0 || version < 0) {
                return usage_error(g, "--if-version takes a version >= 0",
                                   "bad --if-version '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        if (strcmp(argv[i], "--if-absent") == 0) {
            absent = true;
            continue;
        }
        if (strcmp(argv[i], "--lease") == 0) {
            lease = true;
            continue;
        }
        if ((rv = kv_positional(g, "put", argc, argv, &i, pos, 2)) != 0) {
            return rv;
        }
    }
    if (pos[1] == NULL) {
        return usage_error(g, "e.g. oncectl kv put jobs/42 queued",
                           "kv put needs a KEY and a VALUE");
    }
    if (absent && version >= 0) {
        return usage_error(g, "--if-version 0 also means 'absent'",
                           "--if-version and --if-absent exclude each other");
    }
    if ((rv = kv_builder(g, &b)) != 0) {
        return rv;
    }
    if (absent) {
        once_kv_txn_compare_absent(b, pos[0], strlen(pos[0]));
    } else if (version >= 0) {
        once_kv_txn_compare_version(b, pos[0], strlen(pos[0]), ONCE_KV_EQUAL,
                                    (uint64_t)version);
    }
    once_kv_txn_put(b, ONCE_KV_THEN, pos[0], strlen(pos[0]), pos[1],
                    strlen(pos[1]), lease);
    if (absent || version >= 0) {
        once_kv_txn_get(b, ONCE_KV_ELSE, pos[0], strlen(pos[0]));
    }
    rv = kv_send(g, b, explicit_id, id);
    once_kv_txn_free(b);
    return rv;
}

static int
cmd_kv_del(const cli *g, int argc, char **argv)
{
    const char *pos[1] = {NULL};
    once_rpc_id id = {0, 0};
    bool explicit_id = false, prefix = false;
    once_kv_txn *b = NULL;
    int rv, m;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_del, &rv)) {
            return rv;
        }
        if ((m = kv_rpc_id_opt(g, argc, argv, &i, &id, &explicit_id)) != 0) {
            if (m < 0) {
                return -m;
            }
            continue;
        }
        if (strcmp(argv[i], "--prefix") == 0) {
            prefix = true;
            continue;
        }
        if ((rv = kv_positional(g, "del", argc, argv, &i, pos, 1)) != 0) {
            return rv;
        }
    }
    if (pos[0] == NULL) {
        return usage_error(g, "e.g. oncectl kv del jobs/42",
                           "kv del needs a KEY");
    }
    if ((rv = kv_builder(g, &b)) != 0) {
        return rv;
    }
    (prefix ? once_kv_txn_del_prefix : once_kv_txn_del)(b, ONCE_KV_THEN, pos[0],
                                                        strlen(pos[0]));
    rv = kv_send(g, b, explicit_id, id);
    once_kv_txn_free(b);
    return rv;
}

static int
cmd_kv_txn(const cli *g, int argc, char **argv)
{
    const char *file = NULL, *v;
    once_rpc_id id = {0, 0};
    bool explicit_id = false;
    once_kv_txn *b = NULL;
    char err[512];
    int rv, m;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_txn, &rv)) {
            return rv;
        }
        if ((m = kv_rpc_id_opt(g, argc, argv, &i, &id, &explicit_id)) != 0) {
            if (m < 0) {
                return -m;
            }
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--file", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(g, "e.g. --file txn.json",
                                   "--file needs a path");
            }
            file = v;
            continue;
        }
        return usage_error(g, "see 'oncectl kv txn --help'",
                           "unexpected argument '%s'", argv[i]);
    }
    if (file == NULL) {
        return usage_error(g, "e.g. oncectl kv txn --file txn.json",
                           "kv txn needs --file");
    }
    if ((rv = kv_builder(g, &b)) != 0) {
        return rv;
    }
    if (kv_file_load(file, b, err, sizeof(err)) != 0) {
        once_kv_txn_free(b);
        return usage_error(g, "oncectl kv txn --help shows the format", "%s",
                           err);
    }
    rv = kv_send(g, b, explicit_id, id);
    once_kv_txn_free(b);
    return rv;
}

/* ---- reads ----------------------------------------------------------------
 */

static int
cmd_kv_get(const cli *g, int argc, char **argv)
{
    const char *pos[1] = {NULL};
    once_client *c = NULL;
    once_kv_range *page = NULL;
    once_kv e;
    once_status st;
    bool found;
    int rv;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_get, &rv)) {
            return rv;
        }
        if ((rv = kv_positional(g, "get", argc, argv, &i, pos, 1)) != 0) {
            return rv;
        }
    }
    if (pos[0] == NULL) {
        return usage_error(g, "e.g. oncectl kv get jobs/42",
                           "kv get needs a KEY");
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_kv_range_get(c, pos[0], strlen(pos[0]), false, 1, NULL, 0,
                               &page, &st);
    }
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    found = once_kv_range_at(page, 0, &e) == ONCE_OK;
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_bool(&j, "found", found);
        json_u64(&j, "revision", once_kv_range_revision(page));
        if (found) {
            json_entry(&j, &e);
        }
        json_end(&j);
    } else if (found) {
        printf("value %.*s\nversion %" PRIu64 "\n", (int)e.value_len,
               (const char *)e.value, e.version);
    } else {
        printf("%s not found\n", pos[0]);
    }
    once_kv_range_free(page);
    return ONCECTL_EXIT_OK;
}

/* Prints one page's entries (text or JSON array elements); *left counts
 * down the keys still wanted. */
static void
range_page(const cli *g, json_obj *j, const once_kv_range *page, uint64_t *left)
{
    once_kv e;

    for (size_t i = 0; *left > 0 && once_kv_range_at(page, i, &e) == 0;
         i++, --*left) {
        if (g->json) {
            json_obj el;
            json_elem_begin(j, &el);
            json_entry(&el, &e);
            json_elem_end(&el);
        } else {
            printf("%.*s = %.*s (version %" PRIu64 ")\n", (int)e.key_len,
                   (const char *)e.key, (int)e.value_len, (const char *)e.value,
                   e.version);
        }
    }
}

static int
cmd_kv_range(const cli *g, int argc, char **argv)
{
    const char *pos[1] = {NULL}, *v;
    int64_t limit = 1000;
    uint64_t left, revision = 0;
    once_client *c = NULL;
    once_kv_range *page = NULL;
    const void *cont = NULL;
    size_t clen = 0;
    bool more = false, started = false;
    once_status st;
    json_obj j;
    int rv, m;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_range, &rv)) {
            return rv;
        }
        if ((m = opt_value(argc, argv, &i, "--limit", &v)) != 0) {
            if (m < 0 || parse_i64(v, &limit) != 0 || limit < 1) {
                return usage_error(g, "--limit takes a number >= 1",
                                   "bad --limit '%s'", m < 0 ? "" : v);
            }
            continue;
        }
        if ((rv = kv_positional(g, "range", argc, argv, &i, pos, 1)) != 0) {
            return rv;
        }
    }
    if (pos[0] == NULL) {
        return usage_error(g, "e.g. oncectl kv range jobs/ (\"\": all keys)",
                           "kv range needs a PREFIX");
    }
    if ((rv = open_client(g, true, &c, &st)) != ONCE_OK) {
        call_end(g, c, rv, &st, &rv);
        return rv;
    }
    left = (uint64_t)limit;
    /* Page after page while keys are wanted, each read after the commit
     * that holds it; the first page's revision is reported. */
    do {
        uint32_t want = left > 1000 ? 1000 : (uint32_t)left;
        once_kv_range *next = NULL;
        rv = once_kv_range_get(c, pos[0], strlen(pos[0]), true, want, cont,
                               clen, &next, &st);
        once_kv_range_free(page); /* cont pointed into it */
        page = next;
        if (rv != ONCE_OK) {
            break;
        }
        if (!started) {
            started = true;
            revision = once_kv_range_revision(page);
            if (g->json) {
                json_begin(&j, stdout);
                json_arr_begin(&j, "kvs");
            }
        }
        range_page(g, &j, page, &left);
        more = once_kv_range_more(page, &cont, &clen);
    } while (more && left > 0);
    once_client_close(c);
    once_kv_range_free(page);
    if (rv != ONCE_OK && !started) {
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_arr_end(&j);
        json_bool(&j, "more", more || rv != ONCE_OK);
        json_u64(&j, "revision", revision);
        if (rv != ONCE_OK) { /* a later page failed: said in the object */
            json_str(&j, "code", once_strerror(st.code));
            json_str(&j, "reason", st.reason);
            json_str(&j, "message", st.message);
        }
        json_end(&j);
        return exit_for(&st);
    }
    if (rv != ONCE_OK) {
        return report_error(g, &st, NULL);
    }
    if (more) {
        printf("(more keys: raise --limit)\n");
    }
    return ONCECTL_EXIT_OK;
}

/* `oncectl kv SUBCOMMAND ...`; argv[0] is the subcommand. */
int
cmd_kv(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {
        {"put", cmd_kv_put},     {"get", cmd_kv_get}, {"del", cmd_kv_del},
        {"range", cmd_kv_range}, {"txn", cmd_kv_txn},
    };

    return cli_dispatch(g, "kv", subs, sizeof(subs) / sizeof(subs[0]), usage_kv,
                        "kv commands are: kv put, kv get, kv del, kv range, "
                        "kv txn",
                        argc, argv);
}
