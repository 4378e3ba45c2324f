/*
 * cmd_outbox.c — `oncectl outbox subscribe|read|ack|topics`: durable
 * consumers of the outbox (docs/outbox.md).
 *
 * Owns: the outbox commands' arguments and output (text, or one JSON
 * object with --json).
 * Invariant: subscribe and ack without --rpc-id are new calls on a fresh
 * lease; with --rpc-id exactly that id is sent (a retry).
 * Never: moves a cursor on its own — read only reads; ack is explicit.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <once/outbox.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "base/duration.h"

static const char usage_outbox[] =
    "usage: oncectl [GLOBAL OPTIONS] outbox subscribe TOPIC --consumer NAME "
    "[--rpc-id CLIENT:SEQ]\n"
    "       oncectl [GLOBAL OPTIONS] outbox read TOPIC --consumer NAME "
    "[--max N] [--wait D] [--after OFFSET]\n"
    "       oncectl [GLOBAL OPTIONS] outbox ack TOPIC --consumer NAME OFFSET "
    "[--rpc-id CLIENT:SEQ]\n"
    "       oncectl [GLOBAL OPTIONS] outbox topics\n"
    "\n"
    "read prints the events after the consumer's cursor (it does not move\n"
    "it; ack does), waiting up to --wait for one when there are none.\n"
    "--after OFFSET starts past max(cursor, OFFSET): a receiver that stored\n"
    "OFFSET with its effect reads on past events it has not acknowledged.\n"
    "Output of read --json: {\"events\":[{\"offset\":N,\"id\":\"C:S:I\",\n"
    "\"method\":M,\"payload\":P}],\"low_water\":L,\"head\":H,\"acked\":A}\n";

/* The arguments every outbox subcommand takes. */
typedef struct ob_args {
    const char *topic;
    const char *consumer;
    const char *offset; /* ack's OFFSET */
    uint64_t max;
    uint64_t wait_ms;
    uint64_t after; /* read's --after: 0, the cursor alone */
    once_rpc_id id;
    bool explicit_id;
} ob_args;

/* One option or positional argument at argv[*i] into a. 0, or the exit
 * status of the usage error reported. */
static int
ob_arg(const cli *g, int argc, char **argv, int *i, ob_args *a)
{
    const char *v;
    int m;

    if ((m = opt_value(argc, argv, i, "--consumer", &v)) != 0) {
        return m < 0 ? usage_error(g, NULL, "--consumer needs a NAME")
                     : (a->consumer = v, 0);
    }
    if ((m = opt_value(argc, argv, i, "--rpc-id", &v)) != 0) {
        if (m < 0 || parse_rpc_id(v, &a->id) != 0) {
            return usage_error(g, "an rpc id is CLIENT:SEQ, e.g. 3:1",
                               "bad --rpc-id '%s'", m < 0 ? "" : v);
        }
        a->explicit_id = true;
        return 0;
    }
    if ((m = opt_value(argc, argv, i, "--max", &v)) != 0) {
        int64_t n;
        if (m < 0 || parse_i64(v, &n) != 0 || n < 0 || n > 1000) {
            return usage_error(g, "--max is 0 to 1000", "bad --max");
        }
        a->max = (uint64_t)n;
        return 0;
    }
    if ((m = opt_value(argc, argv, i, "--after", &v)) != 0) {
        int64_t n;
        if (m < 0 || parse_i64(v, &n) != 0 || n < 0) {
            return usage_error(g, "--after takes an OFFSET, e.g. 42",
                               "bad --after");
        }
        a->after = (uint64_t)n;
        return 0;
    }
    if ((m = opt_value(argc, argv, i, "--wait", &v)) != 0) {
        if (m < 0 || duration_parse(v, &a->wait_ms) != 0) {
            return usage_error(g, "--wait takes a duration, e.g. 5s",
                               "bad --wait");
        }
        return 0;
    }
    if (argv[*i][0] == '-' && argv[*i][1] != '\0') {
        return usage_error(g, "see 'oncectl outbox --help'",
                           "unknown option '%s'", argv[*i]);
    }
    if (a->topic == NULL) {
        a->topic = argv[*i];
    } else if (a->offset == NULL) {
        a->offset = argv[*i];
    } else {
        return usage_error(g, NULL, "unexpected argument '%s'", argv[*i]);
    }
    return 0;
}

/* Parses argv into a; a TOPIC and (need_consumer) --consumer required. */
static int
ob_parse(const cli *g, int argc, char **argv, bool need_consumer, ob_args *a)
{
    int rv;

    memset(a, 0, sizeof(*a));
    for (int i = 0; i < argc; i++) {
        if (common_arg(g, argv[i], usage_outbox, &rv)) {
            return rv;
        }
        if ((rv = ob_arg(g, argc, argv, &i, a)) != 0) {
            return rv;
        }
    }
    if (need_consumer && (a->topic == NULL || a->consumer == NULL)) {
        return usage_error(g,
                           "e.g. oncectl outbox read jobs --consumer billing",
                           "a TOPIC and --consumer NAME are needed");
    }
    return 0;
}

static int
cmd_outbox_subscribe(const cli *g, int argc, char **argv)
{
    once_client *c = NULL;
    once_status st;
    ob_args a;
    bool created = false;
    int rv, ex;

    if ((rv = ob_parse(g, argc, argv, true, &a)) != 0) {
        return rv;
    }
    if ((rv = open_client(g, a.explicit_id, &c, &st)) == ONCE_OK) {
        rv =
            once_outbox_subscribe(c, a.topic, a.consumer, &a.id, &created, &st);
    }
    if (!call_end(g, c, rv, &st, &ex)) {
        return ex;
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_bool(&j, "created", created);
        json_end(&j);
    } else {
        printf("%s %s on %s\n", created ? "subscribed" : "already subscribed",
               a.consumer, a.topic);
    }
    return ONCECTL_EXIT_OK;
}

static void
read_print(const cli *g, const once_outbox_batch *b)
{
    size_t n = once_outbox_batch_count(b);
    once_outbox_event ev;
    char id[80];
    json_obj j, e;

    if (g->json) {
        json_begin(&j, stdout);
        json_arr_begin(&j, "events");
    }
    for (size_t i = 0; i < n; i++) {
        char *p;
        once_outbox_batch_at(b, i, &ev);
        snprintf(id, sizeof(id), "%" PRIu64 ":%" PRIu64 ":%" PRIu32,
                 ev.client_id, ev.seq, ev.index);
        if ((p = malloc(ev.payload_len + 1)) == NULL) {
            continue;
        }
        memcpy(p, ev.payload, ev.payload_len);
        p[ev.payload_len] = '\0';
        if (g->json) {
            json_elem_begin(&j, &e);
            json_u64(&e, "offset", ev.offset);
            json_str(&e, "id", id);
            json_str(&e, "method", ev.method);
            json_str(&e, "payload", p);
            json_elem_end(&e);
        } else {
            printf("%" PRIu64 " %s %s %s\n", ev.offset, id, ev.method, p);
        }
        free(p);
    }
    if (g->json) {
        json_arr_end(&j);
        json_u64(&j, "low_water", once_outbox_batch_low_water(b));
        json_u64(&j, "head", once_outbox_batch_head(b));
        json_u64(&j, "acked", once_outbox_batch_acked(b));
        json_end(&j);
    } else {
        printf("low water %" PRIu64 ", head %" PRIu64 ", acked %" PRIu64 "\n",
               once_outbox_batch_low_water(b), once_outbox_batch_head(b),
               once_outbox_batch_acked(b));
    }
}

static int
cmd_outbox_read(const cli *g, int argc, char **argv)
{
    once_client *c = NULL;
    once_outbox_batch *b = NULL;
    once_status st;
    ob_args a;
    int rv, ex;

    if ((rv = ob_parse(g, argc, argv, true, &a)) != 0) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_outbox_read_after(c, a.topic, a.consumer, a.after,
                                    (uint32_t)a.max, a.wait_ms, &b, &st);
    }
    if (!call_end(g, c, rv, &st, &ex)) {
        return ex;
    }
    read_print(g, b);
    once_outbox_batch_free(b);
    return ONCECTL_EXIT_OK;
}

static int
cmd_outbox_ack(const cli *g, int argc, char **argv)
{
    once_client *c = NULL;
    once_status st;
    ob_args a;
    int64_t off;
    uint64_t acked = 0;
    int rv, ex;

    if ((rv = ob_parse(g, argc, argv, true, &a)) != 0) {
        return rv;
    }
    if (a.offset == NULL || parse_i64(a.offset, &off) != 0 || off < 0) {
        return usage_error(g, "e.g. oncectl outbox ack jobs --consumer b 42",
                           "outbox ack needs an OFFSET");
    }
    if ((rv = open_client(g, a.explicit_id, &c, &st)) == ONCE_OK) {
        rv = once_outbox_ack(c, a.topic, a.consumer, (uint64_t)off, &a.id,
                             &acked, &st);
    }
    if (!call_end(g, c, rv, &st, &ex)) {
        return ex;
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_u64(&j, "acked", acked);
        json_bool(&j, "replayed", st.replayed);
        json_end(&j);
    } else {
        printf("acked %" PRIu64 "%s\n", acked,
               st.replayed ? " (replayed)" : "");
    }
    return ONCECTL_EXIT_OK;
}

static void
topics_print(const cli *g, const once_outbox_topics_list *l)
{
    once_outbox_topic_info t;
    once_outbox_consumer_info ci;
    json_obj j, e, ce;

    if (g->json) {
        json_begin(&j, stdout);
        json_arr_begin(&j, "topics");
    }
    for (size_t i = 0; i < once_outbox_topics_count(l); i++) {
        once_outbox_topics_at(l, i, &t);
        if (g->json) {
            json_elem_begin(&j, &e);
            json_str(&e, "name", t.name);
            json_u64(&e, "head", t.head);
            json_u64(&e, "low_water", t.low_water);
            json_u64(&e, "retained_events", t.retained_events);
            json_u64(&e, "retained_bytes", t.retained_bytes);
            json_arr_begin(&e, "consumers");
        } else {
            printf("%s head %" PRIu64 " low water %" PRIu64 " retained %" PRIu64
                   " events %" PRIu64 " bytes\n",
                   t.name, t.head, t.low_water, t.retained_events,
                   t.retained_bytes);
        }
        for (size_t k = 0; k < t.nconsumers; k++) {
            once_outbox_topics_consumer(l, i, k, &ci);
            if (g->json) {
                json_elem_begin(&e, &ce);
                json_str(&ce, "name", ci.name);
                json_u64(&ce, "acked", ci.acked);
                json_u64(&ce, "lag", ci.lag);
                json_elem_end(&ce);
            } else {
                printf("  %s acked %" PRIu64 " lag %" PRIu64 "\n", ci.name,
                       ci.acked, ci.lag);
            }
        }
        if (g->json) {
            json_arr_end(&e);
            json_elem_end(&e);
        }
    }
    if (g->json) {
        json_arr_end(&j);
        json_end(&j);
    }
}

static int
cmd_outbox_topics(const cli *g, int argc, char **argv)
{
    once_client *c = NULL;
    once_outbox_topics_list *l = NULL;
    once_status st;
    ob_args a;
    int rv, ex;

    if ((rv = ob_parse(g, argc, argv, false, &a)) != 0) {
        return rv;
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_outbox_topics(c, &l, &st);
    }
    if (!call_end(g, c, rv, &st, &ex)) {
        return ex;
    }
    topics_print(g, l);
    once_outbox_topics_free(l);
    return ONCECTL_EXIT_OK;
}

int
cmd_outbox(const cli *g, int argc, char **argv)
{
    static const cli_sub subs[] = {
        {"subscribe", cmd_outbox_subscribe},
        {"read", cmd_outbox_read},
        {"ack", cmd_outbox_ack},
        {"topics", cmd_outbox_topics},
    };

    return cli_dispatch(
        g, "outbox", subs, sizeof(subs) / sizeof(subs[0]), usage_outbox,
        "outbox commands are: subscribe, read, ack, topics", argc, argv);
}
