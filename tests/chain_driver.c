/*
 * chain_driver.c — the application of the client-side crash matrix
 * (test_chains.c): one chain of five steps run through the journal of
 * libonce_seams, to the end, resuming whatever the journal holds.
 *
 *   chain_driver URL JOURNAL_DIR CHAIN_ID TAG GENERATION OUTFILE [TTL_MS
 *                [ROUNDS]]
 *
 * The steps (k = 0..4): Increment TAG.a by 1, TAG.b by 10, RequestGrant
 * TAG-g on surface TAG-s (machine m1, /w, GENERATION), TAG.a by 100,
 * TAG.out by 1 (the output that is itself a once call). With ROUNDS > 1
 * (default 1) the five repeat, the grant step of later rounds being an
 * Increment of TAG.c by 1000. The context is the number of replies
 * consumed. Consuming reply k appends the line
 * "step k <summary>" to OUTFILE (the output that stays at-least-once),
 * then commits context k+1 with step k+1's request in the same write.
 * Crash points and the write-after-send switch are armed by the
 * environment (client/chain_seams.h); CHAIN_KEY_FILE signs every request
 * with that principal's key.
 *
 * Owns: nothing beyond one run. Exit: 0 the chain ran to its end, 3 its
 * pending step's lease had ended (once_chain_state said LEASE_ENDED), 2
 * any other failure (printed).
 * Never: decides a step from anything but the journal's state.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <once/client.h>
#include <once/journal.h>

#include "proto/grants.pb-c.h"
#include "proto/once.pb-c.h"

#define ROUND     5
#define INCREMENT "/once.v1.Counter/Increment"
#define REQUEST   "/once.v1.Grants/RequestGrant"

static const char *tag;
static uint64_t generation;
static int steps = ROUND; /* ROUND x ROUNDS */

/* The request of step k: *method and a malloc'd *req. */
static void
step_request(int k, const char **method, void **req, size_t *len)
{
    static const char *const names[] = {"a", "b", "c", "a", "out"};
    static const int64_t by[] = {1, 10, 1000, 100, 1};
    char name[128], rid[128], surface[128];
    once_status st;

    if (k != 2) {
        snprintf(name, sizeof(name), "%s.%s", tag, names[k % ROUND]);
        *method = INCREMENT;
        if (once_chain_counter_request(name, by[k % ROUND], req, len, &st) !=
            0) {
            fprintf(stderr, "driver: %s\n", st.message);
            exit(2);
        }
        return;
    }
    Once__V1__RequestGrantRequest r = ONCE__V1__REQUEST_GRANT_REQUEST__INIT;
    snprintf(rid, sizeof(rid), "%s-g", tag);
    snprintf(surface, sizeof(surface), "%s-s", tag);
    r.request_id = rid;
    r.attempt = 1;
    r.surface = surface;
    r.machine = "m1";
    r.location = "/w";
    r.generation = generation;
    *len = once__v1__request_grant_request__get_packed_size(&r);
    *req = malloc(*len + 1);
    once__v1__request_grant_request__pack(&r, *req);
    *method = REQUEST;
}

/* The output of reply k: one line appended to out. */
static void
produce(int fd, int k, const once_chain_info *in, const void *reply, size_t len)
{
    char line[256];
    int n;

    if (in->code != ONCE_OK) {
        n = snprintf(line, sizeof(line), "step %d code=%d reason=%s\n", k,
                     in->code, in->reason);
    } else if (k == 2) {
        Once__V1__RequestGrantResponse *g =
            once__v1__request_grant_response__unpack(NULL, len, reply);
        n = snprintf(line, sizeof(line),
                     "step %d grant=%" PRIu64 " existing=%d\n", k,
                     g != NULL && g->grant != NULL ? g->grant->grant_id : 0,
                     g != NULL ? g->existing : -1);
        once__v1__request_grant_response__free_unpacked(g, NULL);
    } else {
        int64_t v = -1;
        once_chain_counter_value(reply, len, &v, NULL);
        n = snprintf(line, sizeof(line), "step %d value=%" PRId64 "\n", k, v);
    }
    if (write(fd, line, (size_t)n) != n) {
        exit(2);
    }
}

static void
die(const char *what, const once_status *st)
{
    fprintf(stderr, "driver: %s: %s %s\n", what, st->reason, st->message);
    exit(2);
}

/* Consumes reply k and commits k+1 with the next request. */
static void
consume(once_chain *ch, int fd, int k, const once_chain_info *in,
        const void *reply, size_t len)
{
    char ctx[16];
    const char *method = NULL;
    void *req = NULL;
    size_t rlen = 0;
    once_status st;

    produce(fd, k, in, reply, len);
    snprintf(ctx, sizeof(ctx), "%d", k + 1);
    if (k + 1 < steps) {
        step_request(k + 1, &method, &req, &rlen);
    }
    if (once_chain_commit(ch, ctx, strlen(ctx), method, req, rlen, NULL, &st) !=
        ONCE_OK) {
        die("commit", &st);
    }
    free(req);
}

/* One move of the chain; false when it has ended. */
static bool
advance(once_chain *ch, int fd)
{
    once_chain_info in;
    void *ctx = NULL, *payload = NULL;
    size_t clen = 0, plen = 0;
    once_status st;
    int k;

    if (once_chain_state(ch, &in, &ctx, &clen, &payload, &plen, &st) != 0) {
        die("state", &st);
    }
    k = 0;
    if (clen > 0) { /* the context is "k", without a NUL */
        char b[16] = {0};
        memcpy(b, ctx, clen < sizeof(b) - 1 ? clen : sizeof(b) - 1);
        k = atoi(b);
    }
    free(ctx);
    if (in.state == ONCE_CHAIN_LEASE_ENDED) {
        printf("LEASE_ENDED %s %s\n", in.reason, in.message);
        exit(3);
    }
    if (in.state == ONCE_CHAIN_REPLIED) {
        consume(ch, fd, k, &in, payload, plen);
    } else if (in.state == ONCE_CHAIN_PENDING) {
        int rv = once_chain_send(ch, NULL, NULL, NULL, &st);
        if (rv != ONCE_OK && st.code != 0 &&
            once_status_is(&st, ONCE_REASON_CHAIN_LEASE_ENDED)) {
            printf("LEASE_ENDED %s\n", st.message);
            exit(3);
        }
    } else if (k < steps) {
        const char *method;
        void *req;
        size_t len;
        step_request(k, &method, &req, &len);
        (void)once_chain_step(ch, method, req, len, NULL, NULL, NULL, &st);
        free(req);
    } else {
        free(payload);
        return false;
    }
    free(payload);
    return true;
}

int
main(int argc, char **argv)
{
    once_options o;
    once_security sec;
    once_client *c;
    once_journal *j;
    once_chain *ch;
    once_status st;
    int fd;

    if (argc < 7) {
        fprintf(stderr, "usage: chain_driver URL JOURNAL CHAIN TAG GEN OUT "
                        "[TTL_MS [ROUNDS]]\n");
        return 2;
    }
    tag = argv[4];
    generation = strtoull(argv[5], NULL, 10);
    once_options_init(&o);
    o.url = argv[1];
    o.deadline_ms = 20000;
    o.lease_ttl_ms = argc > 7 ? strtoull(argv[7], NULL, 10) : 120000;
    steps = ROUND * (argc > 8 && atoi(argv[8]) > 0 ? atoi(argv[8]) : 1);
    once_security_init(&sec);
    sec.key_file = getenv("CHAIN_KEY_FILE"); /* signed, when set */
    if (once_client_open_secure(&c, &o, sec.key_file != NULL ? &sec : NULL,
                                &st) != ONCE_OK) {
        die("open client", &st);
    }
    if (once_journal_open(argv[2], &j, &st) != ONCE_OK) {
        die("open journal", &st);
    }
    if (once_chain_open(j, c, argv[3], &ch, &st) != ONCE_OK) {
        die("open chain", &st);
    }
    if ((fd = open(argv[6], O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0) {
        perror("driver: output");
        return 2;
    }
    while (advance(ch, fd)) {
    }
    close(fd);
    once_chain_close(ch);
    once_journal_close(j);
    once_client_close(c);
    return 0;
}
