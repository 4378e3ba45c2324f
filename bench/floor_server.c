/*
 * floor_server.c — once_floor: onced's shape with nothing in it, the
 * ceiling of that shape on the machine it runs on (bench_calls "floor").
 *
 * What it keeps of onced: one nng REP socket with many contexts (the async
 * nng_ctx + nng_aio pattern), callbacks that only hand a request over, one
 * executor thread that — whenever it has run out of queued requests —
 * writes everything it took in one synced LevelDB batch (two puts per
 * request, about the bytes of an Increment: an 8-byte counter and the
 * request as its "record"), then sends every reply. What it leaves out:
 * protobuf, ids, records, leases, reads, digests, the overlay, stats. A
 * reply is the request's own bytes.
 *
 * Owns: its socket, contexts, executor thread and LevelDB store (--data).
 * Invariant: no reply leaves before the batch holding its request's writes
 * is synced (with --no-sync: written, unsynced — the shape's ceiling with
 * no disk in it, for bench_outbox); callbacks never block (they queue and, when
 * the executor sleeps, signal it). Never: answers a request it has not written,
 * or keeps serving after SIGTERM/SIGINT (it closes the socket, syncs what it
 * took, exits 0).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leveldb/c.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#define FLOOR_CONTEXTS 256        /* as onced's default --contexts */
#define FLOOR_RECV_MAX (1u << 20) /* as onced's default --recv-max */

typedef struct floor_ctx {
    nng_ctx ctx;
    nng_aio *aio;
    bool sending;
    uint64_t count; /* this context's "counter" */
    struct floor_ctx *next;
} floor_ctx;

static struct {
    nng_socket sock;
    floor_ctx *ctxs;
    leveldb_t *db;
    leveldb_writeoptions_t *sync;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t cv;
    floor_ctx *head, *tail; /* requests handed over, in arrival order */
    bool idle;              /* the executor waits on cv */
    bool stopping;
} fl = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void
floor_usage(FILE *f)
{
    fprintf(f, "usage: once_floor --listen URL --data DIR [--no-sync]\n"
               "\n"
               "onced's shape with nothing in it: nng REP contexts hand each\n"
               "request to one executor thread, which writes every request it\n"
               "has taken in one synced LevelDB batch and then echoes them.\n"
               "bench_calls starts it to measure the ceiling of that shape.\n"
               "\n"
               "  --listen URL   where to listen (ipc:// or tcp://)\n"
               "  --data DIR     the LevelDB store (created, reused if there)\n"
               "  --no-sync      write each batch without syncing it: what\n"
               "                 the shape does with no disk in it (not\n"
               "                 durable; a measure, never a server)\n"
               "  --help         this text\n");
}

/* nng's thread: queue a request, or receive again. Never blocks. */
static void
floor_cb(void *arg)
{
    floor_ctx *x = arg;
    int rv = nng_aio_result(x->aio);

    if (rv == NNG_ECLOSED) {
        if (x->sending) {
            nng_msg_free(nng_aio_get_msg(x->aio)); /* never sent */
            nng_aio_set_msg(x->aio, NULL);
        }
        return;
    }
    if (x->sending) {
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(x->aio));
            nng_aio_set_msg(x->aio, NULL);
        }
        x->sending = false;
        nng_ctx_recv(x->ctx, x->aio);
        return;
    }
    if (rv != 0) {
        nng_ctx_recv(x->ctx, x->aio);
        return;
    }
    pthread_mutex_lock(&fl.lock);
    x->next = NULL;
    if (fl.tail != NULL) {
        fl.tail->next = x;
    } else {
        fl.head = x;
    }
    fl.tail = x;
    if (fl.idle) {
        pthread_cond_signal(&fl.cv);
    }
    pthread_mutex_unlock(&fl.lock);
}

/* Writes the taken requests' effects and "records" in one synced batch. */
static void
floor_write(floor_ctx *list)
{
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    char *err = NULL;

    for (floor_ctx *x = list; x != NULL; x = x->next) {
        nng_msg *m = nng_aio_get_msg(x->aio);
        char key[32];
        int klen;

        x->count++;
        klen = snprintf(key, sizeof(key), "c/%zu", (size_t)(x - fl.ctxs));
        leveldb_writebatch_put(wb, key, (size_t)klen, (const char *)&x->count,
                               sizeof(x->count));
        klen = snprintf(key, sizeof(key), "r/%zu/%llu", (size_t)(x - fl.ctxs),
                        (unsigned long long)x->count);
        leveldb_writebatch_put(wb, key, (size_t)klen, nng_msg_body(m),
                               nng_msg_len(m));
    }
    leveldb_write(fl.db, fl.sync, wb, &err);
    leveldb_writebatch_destroy(wb);
    if (err != NULL) {
        fprintf(stderr, "once_floor: synced write failed: %s\n", err);
        abort(); /* nothing unsynced may be answered */
    }
}

static void *
floor_executor(void *arg)
{
    (void)arg;
    for (;;) {
        floor_ctx *list;

        pthread_mutex_lock(&fl.lock);
        while (fl.head == NULL && !fl.stopping) {
            fl.idle = true;
            pthread_cond_wait(&fl.cv, &fl.lock);
            fl.idle = false;
        }
        list = fl.head;
        fl.head = fl.tail = NULL;
        pthread_mutex_unlock(&fl.lock);
        if (list == NULL) {
            return NULL; /* stopping, nothing left */
        }
        floor_write(list);
        while (list != NULL) {
            floor_ctx *next = list->next;
            list->sending = true;
            nng_ctx_send(list->ctx, list->aio);
            list = next;
        }
    }
}

static int
floor_open_db(const char *dir, bool sync)
{
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;

    leveldb_options_set_create_if_missing(o, 1);
    fl.db = leveldb_open(o, dir, &err);
    leveldb_options_destroy(o);
    if (err != NULL) {
        fprintf(stderr, "once_floor: cannot open %s: %s\n", dir, err);
        leveldb_free(err);
        return -1;
    }
    fl.sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(fl.sync, sync ? 1 : 0);
    return 0;
}

static int
floor_listen(const char *url)
{
    int rv;

    if ((rv = nng_rep0_open(&fl.sock)) != 0 ||
        (rv = nng_socket_set_size(fl.sock, NNG_OPT_RECVMAXSZ,
                                  FLOOR_RECV_MAX)) != 0 ||
        (rv = nng_listen(fl.sock, url, NULL, 0)) != 0) {
        fprintf(stderr, "once_floor: cannot listen on %s: %s\n", url,
                nng_strerror(rv));
        return -1;
    }
    if ((fl.ctxs = calloc(FLOOR_CONTEXTS, sizeof(*fl.ctxs))) == NULL) {
        return -1;
    }
    for (size_t i = 0; i < FLOOR_CONTEXTS; i++) {
        floor_ctx *x = &fl.ctxs[i];
        if ((rv = nng_ctx_open(&x->ctx, fl.sock)) != 0 ||
            (rv = nng_aio_alloc(&x->aio, floor_cb, x)) != 0) {
            fprintf(stderr, "once_floor: context: %s\n", nng_strerror(rv));
            return -1;
        }
        nng_ctx_recv(x->ctx, x->aio);
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data", required_argument, NULL, 'd'},
        {"no-sync", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *url = NULL, *dir = NULL;
    bool sync = true;
    sigset_t set;
    pthread_t exec;
    int c, sig;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            url = optarg;
            break;
        case 'd':
            dir = optarg;
            break;
        case 'n':
            sync = false;
            break;
        case 'h':
            floor_usage(stdout);
            return 0;
        default:
            floor_usage(stderr);
            return 2;
        }
    }
    if (url == NULL || dir == NULL || optind != argc) {
        fprintf(stderr, "once_floor: --listen and --data are required\n\n");
        floor_usage(stderr);
        return 2;
    }
    /* Signals are taken by sigwait below, not by nng's or our threads. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if (floor_open_db(dir, sync) != 0) {
        return 1;
    }
    if (pthread_create(&exec, NULL, floor_executor, NULL) != 0 ||
        floor_listen(url) != 0) {
        return 1;
    }
    fprintf(stderr, "once_floor: listening on %s, data %s\n", url, dir);
    sigwait(&set, &sig);

    nng_close(fl.sock); /* no new requests; callbacks end with ECLOSED */
    pthread_mutex_lock(&fl.lock);
    fl.stopping = true;
    pthread_cond_signal(&fl.cv);
    pthread_mutex_unlock(&fl.lock);
    pthread_join(exec, NULL);
    for (size_t i = 0; i < FLOOR_CONTEXTS; i++) {
        nng_aio_free(fl.ctxs[i].aio);
    }
    free(fl.ctxs);
    leveldb_writeoptions_destroy(fl.sync);
    leveldb_close(fl.db);
    fprintf(stderr, "once_floor: stopped on signal %d\n", sig);
    return 0;
}
