/*
 * floor_load.c — n REQ callers against a fresh once_floor for a number of
 * seconds (floor_load.h).
 */
#include "bench/floor_load.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "bench/bench_env.h"

#define FLOOR_BYTES_MAX 4096

typedef struct floor_caller {
    nng_socket s;
    int bytes;
    const atomic_bool *stop;
    uint64_t calls, errors;
    pthread_t th;
} floor_caller;

/* One echo: sends buf, 0 when the same bytes came back. */
static int
floor_echo(nng_socket s, const char *buf, int bytes)
{
    nng_msg *m = NULL;
    int rv;

    if ((rv = nng_send(s, (void *)buf, (size_t)bytes, 0)) != 0 ||
        (rv = nng_recvmsg(s, &m, 0)) != 0) {
        return rv;
    }
    rv = nng_msg_len(m) == (size_t)bytes &&
                 memcmp(nng_msg_body(m), buf, (size_t)bytes) == 0
             ? 0
             : -1;
    nng_msg_free(m);
    return rv;
}

static void *
floor_caller_run(void *arg)
{
    floor_caller *k = arg;
    char buf[FLOOR_BYTES_MAX];

    memset(buf, 'f', sizeof(buf));
    for (long i = 0; i < FLOOR_LOAD_MAX_CALLS && !atomic_load(k->stop); i++) {
        if (floor_echo(k->s, buf, k->bytes) == 0) {
            k->calls++;
        } else {
            k->errors++;
        }
    }
    return NULL;
}

/* Dials n sockets into ks; on failure closes those it dialed. */
static int
floor_dial_all(floor_caller *ks, int n, const char *url)
{
    for (int i = 0; i < n; i++) {
        int rv = bench_dial(&ks[i].s, url);

        if (rv != 0) {
            fprintf(stderr, "floor_load: dial %s: %s\n", url, nng_strerror(rv));
            while (i-- > 0) {
                nng_close(ks[i].s);
            }
            return -1;
        }
    }
    return 0;
}

/* Runs the dialed callers for seconds and sums them into *t. */
static void
floor_run(floor_caller *ks, int n, int seconds, floor_tally *t)
{
    atomic_bool stop = false;
    int64_t t0 = bench_now_ns();

    for (int i = 0; i < n; i++) {
        ks[i].stop = &stop;
        pthread_create(&ks[i].th, NULL, floor_caller_run, &ks[i]);
    }
    bench_sleep_ms(seconds * 1000);
    atomic_store(&stop, true);
    for (int i = 0; i < n; i++) {
        pthread_join(ks[i].th, NULL);
        t->calls += ks[i].calls;
        t->errors += ks[i].errors;
        nng_close(ks[i].s);
    }
    t->per_s = (double)t->calls / ((double)(bench_now_ns() - t0) / 1e9);
}

int
floor_load(const char *path, bool sync, int n, int seconds, int bytes,
           floor_tally *t)
{
    const char *const no_sync[] = {"--no-sync", NULL};
    bench_onced fl;
    floor_caller *ks;
    int rv = -1;

    memset(t, 0, sizeof(*t));
    if (bytes < 1 || bytes > FLOOR_BYTES_MAX ||
        (ks = calloc((size_t)n, sizeof(*ks))) == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        ks[i].bytes = bytes;
    }
    if (bench_spawn(&fl, path, sync ? NULL : no_sync) == 0 &&
        bench_floor_ready(&fl) == 0 && floor_dial_all(ks, n, fl.url) == 0) {
        floor_run(ks, n, seconds, t);
        rv = 0;
    }
    bench_onced_stop(&fl);
    free(ks);
    return rv;
}
