/*
 * cmd_admin.c — `oncectl stats` and `oncectl admin compact` (`admin
 * backup` is cmd_backup.c's). Stats goes
 * through once_call, so every field of its reply is printed, including
 * fields added to the .proto after libonce's once_stats was frozen into the
 * public ABI; Compact through once_admin_compact.
 *
 * Owns: the Stats and Compact requests and their output; `compact --wait`
 * polling Stats until the compaction has ended.
 * Invariant: --wait never waits past the global deadline (--timeout,
 * default 10s): the compaction goes on in onced, and oncectl says so and
 * exits 1.
 * Never: prints more than one JSON object.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/duration.h"
#include "cli/json_out.h"
#include "cli/msg_print.h"
#include "once/client.h"
#include "cli/cli.h"
#include "cli/cmds.h"
#include "proto/wire.h"
#include "proto/reasons.h"

/* Library default of once_options.deadline_ms, used when no --timeout. */
#define ADMIN_DEADLINE_MS 10000
#define ADMIN_POLL_MS     100

static const char usage_stats[] =
    "usage: oncectl [GLOBAL OPTIONS] stats\n"
    "\n"
    "Prints every field of the server's StatsResponse (requests, replays,\n"
    "conflicts, commits, fsyncs, records_stored, rejected, leases_opened,\n"
    "..., compacting, compactions, disk_bytes), one per line, or as one\n"
    "JSON object with --json.\n";

static const char usage_admin[] =
    "usage: oncectl [GLOBAL OPTIONS] admin compact [--wait]\n"
    "       oncectl [GLOBAL OPTIONS] admin backup DIR\n"
    "\n"
    "compact  has onced compact its LevelDB over the whole key range, on a\n"
    "         thread of its own: the call answers at once. Deleted records\n"
    "         leave the disk only through compactions, so afterwards\n"
    "         `oncectl stats` disk_bytes is the size of what is kept. One\n"
    "         runs at a time; asking while one runs starts nothing else\n"
    "         (already_running). Operators only (Admin methods).\n"
    "           --wait  poll Stats until the compaction has ended, at most\n"
    "                   until --timeout (default 10s); past it oncectl\n"
    "                   exits 1 (DEADLINE_EXCEEDED/STILL_COMPACTING) and the\n"
    "                   compaction goes on\n"
    "         Output: compaction started | --json "
    "{\"already_running\":B,\"compactions_before\":N}\n"
    "         with --wait also: compactions N, disk_bytes B, waited T |\n"
    "         \"compactions\":N,\"disk_bytes\":N,\"waited_ms\":N\n"
    "backup   copies the whole store, at one moment, into the new folder\n"
    "         DIR while onced serves (see 'oncectl admin backup --help')\n";

static int
admin_fail(once_status *st, int code, const char *reason, const char *msg)
{
    st->code = code;
    snprintf(st->reason, sizeof(st->reason), "%s", reason);
    snprintf(st->message, sizeof(st->message), "%s", msg);
    return code;
}

/*
 * Calls /once.v1.Admin/<name> with req (an empty or small message) and
 * unpacks the reply as rd into *out (free with
 * protobuf_c_message_free_unpacked). Returns ONCE_OK, or the code with *st
 * filled.
 */
static int
admin_call(once_client *c, const char *name, const ProtobufCMessage *req,
           const ProtobufCMessageDescriptor *rd, ProtobufCMessage **out,
           once_status *st)
{
    const char *method = wire_method_name(&once__v1__admin__descriptor, name);
    uint8_t buf[64];
    void *resp = NULL;
    size_t len, resp_len = 0;
    int rv;

    *out = NULL;
    if (method == NULL) {
        return admin_fail(st, ONCE_UNIMPLEMENTED, ONCE_REASON_NO_METHOD,
                          "oncectl was built without this Admin method");
    }
    if (protobuf_c_message_get_packed_size(req) > sizeof(buf)) {
        return admin_fail(st, ONCE_INTERNAL, ONCE_REASON_REQUEST_TOO_LARGE,
                          "request does not fit");
    }
    len = protobuf_c_message_pack(req, buf);
    if ((rv = once_call(c, method, false, NULL, buf, len, &resp, &resp_len,
                        st)) != ONCE_OK) {
        return rv;
    }
    *out = protobuf_c_message_unpack(rd, NULL, resp_len, resp);
    once_free(resp);
    if (*out == NULL) {
        return admin_fail(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                          "the reply payload is not the method's response");
    }
    return ONCE_OK;
}

static int
admin_stats(once_client *c, Once__V1__StatsResponse **r, once_status *st)
{
    Once__V1__StatsRequest req = ONCE__V1__STATS_REQUEST__INIT;

    return admin_call(c, "Stats", &req.base,
                      &once__v1__stats_response__descriptor,
                      (ProtobufCMessage **)r, st);
}

int
cmd_stats(const cli *g, int argc, char **argv)
{
    Once__V1__StatsResponse *r = NULL;
    once_client *c = NULL;
    once_status st;
    int rv;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_stats, &rv)) {
            return rv;
        }
        return usage_error(g, "stats takes no arguments",
                           "unexpected argument '%s' to stats", argv[i]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = admin_stats(c, &r, &st);
    }
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        msg_print_json(&j, &r->base);
        json_end(&j);
    } else {
        msg_print_text(stdout, &r->base, 22);
    }
    once__v1__stats_response__free_unpacked(r, NULL);
    return ONCECTL_EXIT_OK;
}

/* Polls Stats until compacting is false or deadline (monotonic ms) has
 * passed; on OK *last is the final reply (free_unpacked). */
static int
compact_wait(once_client *c, uint64_t deadline, Once__V1__StatsResponse **last,
             once_status *st)
{
    uint64_t now = clock_now_ms();
    uint64_t max_polls =
        (deadline > now ? deadline - now : 0) / ADMIN_POLL_MS + 2;
    char msg[160];
    int rv;

    *last = NULL;
    for (uint64_t n = 0; n < max_polls; n++) {
        if ((rv = admin_stats(c, last, st)) != ONCE_OK) {
            return rv;
        }
        if (!(*last)->compacting) {
            return ONCE_OK;
        }
        once__v1__stats_response__free_unpacked(*last, NULL);
        *last = NULL;
        if (clock_now_ms() + ADMIN_POLL_MS > deadline) {
            break;
        }
        clock_sleep_ms(ADMIN_POLL_MS);
    }
    snprintf(msg, sizeof(msg),
             "the compaction still runs at the deadline; it goes on in "
             "onced (see oncectl stats: compacting)");
    return admin_fail(st, ONCE_DEADLINE_EXCEEDED, REASON_STILL_COMPACTING, msg);
}

static int
cmd_admin_compact(const cli *g, int argc, char **argv)
{
    Once__V1__StatsResponse *sr = NULL;
    bool already_running = false;
    uint64_t before = 0;
    uint64_t t0 = clock_now_ms();
    uint64_t deadline =
        t0 + (g->timeout_ms != 0 ? g->timeout_ms : ADMIN_DEADLINE_MS);
    bool wait = false;
    once_client *c = NULL;
    once_status st;
    char b[64];
    int rv;

    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_admin, &rv)) {
            return rv;
        }
        if (strcmp(argv[i], "--wait") == 0) {
            wait = true;
            continue;
        }
        return usage_error(g, "see 'oncectl admin --help'",
                           "unexpected argument '%s' to admin compact",
                           argv[i]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_admin_compact(c, &already_running, &before, &st);
    }
    if (rv == ONCE_OK && wait) {
        rv = compact_wait(c, deadline, &sr, &st);
    }
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_bool(&j, "already_running", already_running);
        json_u64(&j, "compactions_before", before);
        if (sr != NULL) {
            json_u64(&j, "compactions", sr->compactions);
            json_u64(&j, "disk_bytes", sr->disk_bytes);
            json_u64(&j, "waited_ms", clock_now_ms() - t0);
        }
        json_end(&j);
    } else {
        printf("%s\n", already_running
                           ? "a compaction was already running; no other "
                             "started"
                           : "compaction started");
        if (sr != NULL) {
            printf("compaction ended: compactions %" PRIu64
                   ", disk_bytes %" PRIu64 ", waited %s\n",
                   sr->compactions, sr->disk_bytes,
                   duration_format(clock_now_ms() - t0, b, sizeof(b)));
        }
    }
    if (sr != NULL) {
        once__v1__stats_response__free_unpacked(sr, NULL);
    }
    return ONCECTL_EXIT_OK;
}

int
cmd_admin(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {{"compact", cmd_admin_compact},
                                   {"backup", cmd_admin_backup}};

    return cli_dispatch(g, "admin", subs, sizeof(subs) / sizeof(subs[0]),
                        usage_admin,
                        "the admin commands are: admin compact [--wait], "
                        "admin backup DIR",
                        argc, argv);
}
