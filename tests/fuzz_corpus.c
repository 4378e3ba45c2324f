/*
 * fuzz_corpus.c — writes fuzz_dispatch's seed corpus: a valid request of
 * every once.v1 method, in both input shapes (see fuzz_dispatch.c).
 *
 * Owns: the files DIR/<method>-{raw,typed} it writes. Payloads are the
 * method's message with its usual fields filled where the fuzzer would
 * hardly find them (a counter name, an increment, a TTL), else empty.
 * Never: talks to onced.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/once.pb-c.h"
#include "proto/wire.h"

static void
put(const char *dir, const char *name, const char *kind, const uint8_t *b,
    size_t n)
{
    char path[512], safe[160];
    FILE *f;
    size_t j = 0;

    for (size_t i = 0; name[i] != '\0' && j + 1 < sizeof(safe); i++) {
        safe[j++] = name[i] == '/' ? '_' : name[i];
    }
    safe[j] = '\0';
    snprintf(path, sizeof(path), "%s/%s-%s", dir, safe, kind);
    if ((f = fopen(path, "wb")) == NULL || fwrite(b, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* The payload of a typical valid call of m. */
static size_t
payload(const wire_method *m, uint8_t *out)
{
    const char *in = m->method->input->name;

    if (strcmp(in, "once.v1.IncrementRequest") == 0) {
        Once__V1__IncrementRequest r = ONCE__V1__INCREMENT_REQUEST__INIT;
        r.name = "fuzz";
        r.by = 1;
        return once__v1__increment_request__pack(&r, out);
    }
    if (strcmp(in, "once.v1.GetRequest") == 0) {
        Once__V1__GetRequest r = ONCE__V1__GET_REQUEST__INIT;
        r.name = "fuzz";
        return once__v1__get_request__pack(&r, out);
    }
    if (strcmp(in, "once.v1.OpenLeaseRequest") == 0) {
        Once__V1__OpenLeaseRequest r = ONCE__V1__OPEN_LEASE_REQUEST__INIT;
        r.principal = "fuzz";
        r.ttl_ms = 60000;
        return once__v1__open_lease_request__pack(&r, out);
    }
    {
        /* Any other message: its defaults, packed (often 0 bytes). */
        void *msg = calloc(1, m->method->input->sizeof_message);
        size_t n;
        protobuf_c_message_init(m->method->input, msg);
        n = protobuf_c_message_pack(msg, out);
        free(msg);
        return n;
    }
}

int
main(int argc, char **argv)
{
    const wire_method *ms;
    size_t count;
    uint8_t pl[1024], b[2048];

    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_corpus DIR\n");
        return 2;
    }
    ms = wire_methods(&count);
    for (size_t i = 0; i < count; i++) {
        Once__V1__Request r = ONCE__V1__REQUEST__INIT;
        size_t plen = payload(&ms[i], pl), n;

        /* typed: shape 1, method i, the live lease, seq 1. */
        memset(b, 0, 11);
        b[0] = 1;
        b[1] = (uint8_t)i;
        b[2] = 1;
        b[3] = 1;
        memcpy(b + 11, pl, plen);
        put(argv[1], ms[i].full_name, "typed", b, 11 + plen);

        /* raw: shape 0, a whole envelope (client id 1 is the first lease
         * the fuzzer's onced hands out). */
        r.method = (char *)ms[i].full_name;
        r.client_id = 1;
        r.seq = 1;
        r.attempt = 1;
        r.principal = "anonymous";
        r.payload.data = pl;
        r.payload.len = plen;
        b[0] = 0;
        n = once__v1__request__pack(&r, b + 1);
        put(argv[1], ms[i].full_name, "raw", b, 1 + n);
    }
    printf("fuzz_corpus: %zu methods, %zu seeds in %s\n", count, 2 * count,
           argv[1]);
    return 0;
}
