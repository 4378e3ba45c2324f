/*
 * listen_watch.c — the ipc:// listener watch (listen_watch.h).
 */
#include "server/listen_watch.h"

#include "base/endpoint_stats.h"
#include "base/tls_server.h"
#include "server/tls_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/periodic.h"

#include <nng/supplemental/util/platform.h>

#define WATCH_MAX      8   /* ipc:// listeners watched (--listen is bounded) */
#define WATCH_POLL_MS  10  /* how often a probe looks at the pipe count */
#define WATCH_STATS_MS 200 /* how often the listeners' statistics are read */
#define WATCH_QUICK_MS 300 /* a probe's wait once nng counted an error */
#define WATCH_PARKED   8   /* probes that timed out, kept open */
#define WATCH_PARK_MS  30000 /* how long one is kept at most */
/* tls+tcp:// listeners are probed on an error nng counted and otherwise
 * at most this often: a probe costs onced a TLS handshake (a signature),
 * and the error that ends such a listener is always counted. */
#define WATCH_TLS_EVERY_MS 30000
#define IPC_PREFIX         "ipc://"
#define IPC_PREFIX_LEN     (sizeof(IPC_PREFIX) - 1)

typedef struct watch_entry {
    char *url;
    nng_tls_config *tls;          /* tls+tcp://: the server configuration
                                     (a hold of the listener's); NULL: ipc */
    tls_probe *prober;            /* tls+tcp://: its probes (watch thread) */
    uint64_t other_seen;          /* its listener's "other" errors last read
                                     (watch thread) */
    nng_listener nl;              /* the listener now serving url */
    _Atomic uint32_t listener_id; /* its id, for the pipe callback */
    _Atomic uint64_t pipes;       /* pipes it has added */
} watch_entry;

struct listen_watch {
    nng_socket sock;
    uint64_t interval_ms;
    watch_entry entries[WATCH_MAX];
    _Atomic size_t n; /* entries in use: set up before it counts them, as
                         the pipe callback may already run */
    _Atomic uint64_t *restarts;  /* the caller's counter */
    listen_watch_moved_fn moved; /* told of every new listener; or NULL */
    void *moved_arg;
    periodic *thread;           /* NULL until started */
    uint64_t next_probe_ms;     /* clock_now_ms() of the next round of probes
                                   (watch thread) */
    uint64_t next_tls_probe_ms; /* the same for tls+tcp:// listeners */
    /* Probes that timed out, kept open (watch thread): closing one while
     * a slow onced is still in its handshake would end the listener (nng
     * 1.5.2), the very stop the watch looks for. */
    int parked[WATCH_PARKED];
    uint64_t parked_until[WATCH_PARKED];
};

void
listen_watch_pipe_added(listen_watch *w, nng_pipe p)
{
    int id = nng_listener_id(nng_pipe_listener(p));
    size_t n = atomic_load(&w->n);

    if (id <= 0) {
        return; /* not from a listener */
    }
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&w->entries[i].listener_id) == (uint32_t)id) {
            atomic_fetch_add(&w->entries[i].pipes, 1);
            return;
        }
    }
}

/* The watch thread: listen_watch_stop was called. */
static bool
watch_stopping(listen_watch *w)
{
    return periodic_stopping(w->thread);
}

/* Keeps fd open until onced answers or hangs up on it (watch_sweep), at
 * most WATCH_PARK_MS; closes it at once when all slots are taken. */
static void
watch_park(listen_watch *w, int fd)
{
    for (size_t i = 0; i < WATCH_PARKED; i++) {
        if (w->parked[i] < 0) {
            w->parked[i] = fd;
            w->parked_until[i] = clock_now_ms() + WATCH_PARK_MS;
            return;
        }
    }
    close(fd);
}

/* Closes the parked probes onced answered (its header: the handshake is
 * done on its side), hung up on, or that were kept WATCH_PARK_MS; all of
 * them when all is true. */
static void
watch_sweep(listen_watch *w, bool all)
{
    uint64_t now = clock_now_ms();

    for (size_t i = 0; i < WATCH_PARKED; i++) {
        uint8_t buf[64];
        ssize_t n;

        if (w->parked[i] < 0) {
            continue;
        }
        n = recv(w->parked[i], buf, sizeof(buf), MSG_DONTWAIT);
        if (all || n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
            now >= w->parked_until[i]) {
            close(w->parked[i]);
            w->parked[i] = -1;
        }
    }
    for (size_t i = 0; i < atomic_load(&w->n); i++) {
        if (w->entries[i].prober != NULL) {
            tls_probe_sweep(w->entries[i].prober, all);
        }
    }
}

/* Connects to path as an SP REQ peer over a plain AF_UNIX socket and sends
 * its 8-byte header (the REP side answers with its own). Returns the
 * non-blocking fd, or -1 when nothing listens there (no file, refused). */
static int
watch_connect(const char *path)
{
    static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 0x30 /* REQ0 */, 0, 0};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path) ||
        (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        fcntl(fd, F_SETFL, O_NONBLOCK) != 0 ||
        send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* watch_probe over TLS (tls_probe.h): the same wait for a new pipe, the
 * same parking of a probe that got none. */
static bool
watch_probe_tls(listen_watch *w, watch_entry *e, int wait_ms)
{
    uint64_t before = atomic_load(&e->pipes);
    tls_probe_conn *c;
    bool accepted;

    if ((c = tls_probe_connect(e->prober, wait_ms)) == NULL) {
        return watch_stopping(w); /* refused, or no answer: not accepting */
    }
    for (int i = 0; i < wait_ms / WATCH_POLL_MS + 1; i++) {
        if (atomic_load(&e->pipes) != before || watch_stopping(w) ||
            tls_probe_hung_up(c, WATCH_POLL_MS)) {
            break;
        }
    }
    accepted = atomic_load(&e->pipes) != before;
    if (accepted) {
        tls_probe_close(c);
    } else {
        tls_probe_park(e->prober, c);
    }
    return accepted || watch_stopping(w);
}

/*
 * Connects to e's path and waits up to wait_ms for a new
 * pipe of its listener (any client's counts: it shows the listener
 * accepts). Returns false only when none came; true also when it could
 * not tell. The wait is counted in polls of WATCH_POLL_MS, not read off a
 * clock, so time onced spends stopped (SIGSTOP, a debugger) does not count
 * against the listener.
 *
 * A plain socket rather than an nng dialer: closing an nng socket whose
 * dialer is still in its handshake leaks the dialer in nng 1.5.2, and a
 * probe that times out does exactly that. The probe's own header is sent
 * at once; the socket is closed once onced added its pipe, and otherwise
 * kept open (watch_park) until onced's header comes back (its side of the
 * handshake is then done) or it hangs up, for at most WATCH_PARK_MS: a live
 * listener that is merely slow (valgrind, a loaded machine) never sees a probe
 * hang up mid-handshake, which would end it.
 */
static bool
watch_probe(listen_watch *w, watch_entry *e, int wait_ms)
{
    uint64_t before = atomic_load(&e->pipes);
    bool accepted;
    int fd;

    if (e->prober != NULL) {
        return watch_probe_tls(w, e, wait_ms);
    }

    if ((fd = watch_connect(e->url + IPC_PREFIX_LEN)) < 0) {
        return watch_stopping(w); /* no listener there at all */
    }
    for (int i = 0; i < wait_ms / WATCH_POLL_MS + 1; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint8_t buf[64];

        if (atomic_load(&e->pipes) != before || watch_stopping(w)) {
            break;
        }
        /* Drain what onced sends (its header); poll doubles as the wait. */
        if (poll(&p, 1, WATCH_POLL_MS) > 0 &&
            recv(fd, buf, sizeof(buf), 0) == 0) {
            break; /* onced hung up on the probe */
        }
    }
    /* Only a new pipe shows the listener accepts: a stopped one still
     * answers the handshake of what it took, and never hands it on. */
    accepted = atomic_load(&e->pipes) != before;
    if (accepted) {
        close(fd);
    } else {
        watch_park(w, fd); /* no pipe yet: never hang up mid-handshake */
    }
    return accepted || watch_stopping(w);
}

/* A new listener on e->url: ipc:// after removing its socket file. */
static int
watch_listen(listen_watch *w, watch_entry *e, nng_listener *nl)
{
    const char *path = e->url + IPC_PREFIX_LEN;
    int rv;

    if (e->tls != NULL) {
        if ((rv = tls_server_listen(w->sock, e->url, e->tls, nl)) == 0 &&
            (rv = tls_probe_retarget(e->prober, *nl)) != 0) {
            nng_listener_close(*nl);
        }
        return rv;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        log_error("the listener on %s accepts no connections and its "
                  "socket file cannot be removed: %s",
                  e->url, strerror(errno));
        return NNG_EPERM;
    }
    return nng_listen(w->sock, e->url, nl, 0);
}

/* The listener on e->url has stopped accepting: close it and listen there
 * again. */
static void
watch_relisten(listen_watch *w, watch_entry *e)
{
    nng_listener nl;
    int rv;

    /* Closing it also closes the connections it holds: those it accepted
     * (their clients reconnect; a request in flight is resent under its
     * rpc id and deduplicated) and those it negotiated but never handed to
     * the socket (their clients would otherwise wait for good). */
    if (e->nl.id != 0) {
        nng_listener_close(e->nl);
        e->nl.id = 0;
    }
    if ((rv = watch_listen(w, e, &nl)) == NNG_EPERM) {
        return; /* said */
    }
    if (rv != 0) {
        log_error("the listener on %s accepts no connections and listening "
                  "there again failed: %s (trying again in %llu ms)",
                  e->url, nng_strerror(rv), (unsigned long long)w->interval_ms);
        return;
    }
    e->nl = nl;
    e->other_seen = 0; /* a new listener's statistics */
    if (w->moved != NULL) {
        w->moved(w->moved_arg,
                 (nng_listener){.id = atomic_load(&e->listener_id)}, nl);
    }
    atomic_store(&e->listener_id, (uint32_t)nng_listener_id(nl));
    atomic_fetch_add(w->restarts, 1);
    log_warn("the listener on %s stopped accepting new connections (nng "
             "1.5 ends an ipc:// or tls+tcp:// listener when a peer hangs "
             "up during its handshake); listening there again (its clients "
             "reconnect)",
             e->url);
}

/* The "other" errors nng counted for e's listener in snapshot snap (0 when
 * it is not there). nng 1.5.2 counts there the error that ends an ipc
 * listener (the peer's hang-up mid-handshake, which its accept callback
 * takes for a close), and also failures it retries after (EMFILE). */
static uint64_t
watch_other_errors(nng_stat *snap, const watch_entry *e)
{
    nng_stat *ls = endpoint_stats_find(snap, "listener",
                                       (uint64_t)atomic_load(&e->listener_id));
    nng_stat *other = ls != NULL ? endpoint_stats_child(ls, "other") : NULL;

    return other != NULL ? nng_stat_value(other) : 0;
}

/* The watch thread, every WATCH_STATS_MS: a listener whose "other" error
 * count grew is probed at once, briefly, and started again unless the
 * probe is accepted (a retried EMFILE counts there too); every interval,
 * every listener is probed (a stop nng did not count). */
static void
watch_tick(void *arg, unsigned why)
{
    listen_watch *w = arg;
    uint64_t now = clock_now_ms();
    bool probes = now >= w->next_probe_ms;
    bool tls_probes = now >= w->next_tls_probe_ms;
    nng_stat *snap = NULL;

    (void)why;
    watch_sweep(w, false);
    if (nng_stats_get(&snap) != 0) {
        snap = NULL;
    }
    for (size_t i = 0; i < atomic_load(&w->n); i++) {
        watch_entry *e = &w->entries[i];
        uint64_t other = snap != NULL ? watch_other_errors(snap, e) : 0;

        if (other > e->other_seen) {
            e->other_seen = other;
            if (!watch_probe(w, e, WATCH_QUICK_MS) &&
                (e->prober == NULL ||
                 !watch_probe(w, e, LISTEN_WATCH_PROBE_MS))) {
                watch_relisten(w, e);
                continue;
            }
        }
        /* Two probes in a row must go unanswered: one alone may have met
         * a moment when onced could not run. */
        if ((e->prober != NULL ? tls_probes : probes) &&
            !watch_probe(w, e, LISTEN_WATCH_PROBE_MS) &&
            !watch_probe(w, e, LISTEN_WATCH_PROBE_MS)) {
            watch_relisten(w, e);
        }
    }
    if (snap != NULL) {
        nng_stats_free(snap);
    }
    if (probes) {
        w->next_probe_ms = clock_now_ms() + w->interval_ms;
    }
    if (tls_probes) {
        w->next_tls_probe_ms =
            clock_now_ms() + (w->interval_ms > WATCH_TLS_EVERY_MS
                                  ? w->interval_ms
                                  : WATCH_TLS_EVERY_MS);
    }
}

int
listen_watch_open(listen_watch **wp, nng_socket sock, uint64_t interval_ms,
                  _Atomic uint64_t *restarts)
{
    listen_watch *w;

    if ((w = calloc(1, sizeof(*w))) == NULL) {
        return NNG_ENOMEM;
    }
    w->sock = sock;
    w->interval_ms = interval_ms;
    w->next_tls_probe_ms = clock_now_ms() + WATCH_TLS_EVERY_MS;
    w->restarts = restarts;
    for (size_t i = 0; i < WATCH_PARKED; i++) {
        w->parked[i] = -1;
    }
    *wp = w;
    return 0;
}

int
listen_watch_add(listen_watch *w, const char *url, nng_listener nl,
                 nng_tls_config *tls)
{
    size_t n = atomic_load(&w->n);
    watch_entry *e;
    int rv;

    if ((tls == NULL && strncmp(url, IPC_PREFIX, IPC_PREFIX_LEN) != 0) ||
        n == WATCH_MAX) {
        return 0; /* tcp:// is not affected; past WATCH_MAX: unwatched */
    }
    e = &w->entries[n];
    if (tls != NULL && (rv = tls_probe_open(&e->prober, nl)) != 0) {
        return rv;
    }
    if ((e->url = strdup(url)) == NULL) {
        tls_probe_free(e->prober);
        e->prober = NULL;
        return NNG_ENOMEM;
    }
    if (tls != NULL) {
        nng_tls_config_hold(tls);
        e->tls = tls;
    }
    e->nl = nl;
    atomic_store(&e->listener_id, (uint32_t)nng_listener_id(nl));
    atomic_store(&e->pipes, 0);
    atomic_store(&w->n, n + 1); /* after the entry is whole */
    return 0;
}

void
listen_watch_on_move(listen_watch *w, listen_watch_moved_fn fn, void *arg)
{
    w->moved = fn;
    w->moved_arg = arg;
}

int
listen_watch_start(listen_watch *w)
{
    if (atomic_load(&w->n) == 0) {
        return 0;
    }
    return periodic_start(&w->thread, watch_tick, w,
                          w->interval_ms < WATCH_STATS_MS ? w->interval_ms
                                                          : WATCH_STATS_MS,
                          0) != 0
               ? NNG_ENOMEM
               : 0;
}

void
listen_watch_stop(listen_watch *w)
{
    if (w != NULL) {
        periodic_stop(&w->thread);
    }
}

void
listen_watch_free(listen_watch *w)
{
    if (w == NULL) {
        return;
    }
    listen_watch_stop(w);
    watch_sweep(w, true);
    for (size_t i = 0; i < atomic_load(&w->n); i++) {
        free(w->entries[i].url);
        tls_probe_free(w->entries[i].prober);
        if (w->entries[i].tls != NULL) {
            nng_tls_config_free(w->entries[i].tls); /* our hold */
        }
    }
    free(w);
}
