/*
 * conns.c — the connection table of conns.h: admission in the pipe
 * callbacks, the per-connection request limit, the penalties, the idle
 * closes and their log.
 *
 * Every decision is a scan of the table under cs->mtx (at most --conn-max
 * entries: microseconds, no allocation, no I/O). Pipes to close are
 * collected under the lock and closed after it (nng_pipe_close only marks
 * the pipe and hands it to nng's reaper; REM_POST runs later on that
 * thread, so no callback of ours runs inside it).
 */
#include "server/conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/periodic.h"

#define CONNS_PEERS_MAX 256 /* penalised peers remembered */
#define CONNS_CLOSE_MAX 64  /* pipes closed by one pass of the thread */

enum { PEER_NONE, PEER_IP4, PEER_IP6, PEER_UID };

typedef struct conns_peer {
    uint8_t kind; /* PEER_* */
    uint8_t addr[16];
} conns_peer;

typedef struct conn_entry {
    uint32_t id; /* pipe id; 0: a free slot */
    conns_peer peer;
    uint64_t last_ms;    /* clock_now_ms() of its opening, last request or
                            last reply */
    uint32_t held;       /* its requests holding a context */
    uint32_t limit;      /* --conn-inflight, or 1 (penalised peer) */
    uint32_t auth_fails; /* requests in a row that failed authentication */
} conn_entry;

typedef struct peer_penalty {
    conns_peer peer;
    uint64_t until_ms;  /* its connections opened before this get 1 */
    uint64_t window_ms; /* the last window given (doubles) */
} peer_penalty;

/* What happened since the last log line (written by callbacks). */
typedef struct conns_news {
    uint64_t refused, evicted, idle, penalised;
    conns_peer last_refused;
    const char *why_refused;
    conns_peer last_penalised;
    uint64_t last_window_ms;
} conns_news;

struct conns {
    conns_config cfg;
    server_stats *stats;
    periodic *thread;
    pthread_mutex_t mtx; /* protects everything below */
    conn_entry *v;       /* cfg.max slots */
    size_t n;            /* entries in use */
    peer_penalty pen[CONNS_PEERS_MAX];
    conns_news news;
};

static bool
peer_eq(const conns_peer *a, const conns_peer *b)
{
    return a->kind != PEER_NONE && a->kind == b->kind &&
           memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* The peer of p as its transport tells it (kind PEER_NONE: unknown). */
static conns_peer
peer_of(nng_pipe p)
{
    conns_peer k;
    nng_sockaddr sa;
    uint64_t uid;

    memset(&k, 0, sizeof(k));
    if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0) {
        return k;
    }
    switch (sa.s_family) {
    case NNG_AF_INET:
        k.kind = PEER_IP4;
        memcpy(k.addr, &sa.s_in.sa_addr, 4);
        break;
    case NNG_AF_INET6:
        k.kind = PEER_IP6;
        memcpy(k.addr, sa.s_in6.sa_addr, 16);
        break;
    case NNG_AF_IPC:
        if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) == 0) {
            k.kind = PEER_UID;
            memcpy(k.addr, &uid, sizeof(uid));
        }
        break;
    default:
        break;
    }
    return k;
}

static const char *
peer_text(const conns_peer *k, char *buf, size_t len)
{
    uint64_t uid;

    switch (k->kind) {
    case PEER_IP4:
        return inet_ntop(AF_INET, k->addr, buf, (socklen_t)len);
    case PEER_IP6:
        return inet_ntop(AF_INET6, k->addr, buf, (socklen_t)len);
    case PEER_UID:
        memcpy(&uid, k->addr, sizeof(uid));
        snprintf(buf, len, "uid %llu (ipc)", (unsigned long long)uid);
        return buf;
    default:
        snprintf(buf, len, "an unknown peer");
        return buf;
    }
}

static conn_entry *
conns_find(conns *cs, uint32_t id)
{
    for (size_t i = 0; i < cs->cfg.max; i++) {
        if (cs->v[i].id == id) {
            return &cs->v[i];
        }
    }
    return NULL;
}

/* The penalty entry of k, or NULL. */
static peer_penalty *
penalty_find(conns *cs, const conns_peer *k)
{
    for (size_t i = 0; i < CONNS_PEERS_MAX; i++) {
        if (peer_eq(&cs->pen[i].peer, k)) {
            return &cs->pen[i];
        }
    }
    return NULL;
}

/* Penalises k: a window of cfg.penalty_ms, doubled when k offends again
 * before twice its last window has passed. */
static void
penalty_add(conns *cs, const conns_peer *k, uint64_t now)
{
    peer_penalty *p = penalty_find(cs, k);

    if (k->kind == PEER_NONE) {
        return;
    }
    if (p == NULL) { /* a free slot, else the one that ended first */
        p = &cs->pen[0];
        for (size_t i = 1; i < CONNS_PEERS_MAX && p->until_ms > 0; i++) {
            if (cs->pen[i].until_ms < p->until_ms) {
                p = &cs->pen[i];
            }
        }
        memset(p, 0, sizeof(*p));
        p->peer = *k;
    }
    if (p->until_ms > now) {
        return; /* its connections of this window offend once */
    }
    if (p->window_ms == 0 || now > p->until_ms + 2 * p->window_ms) {
        p->window_ms = cs->cfg.penalty_ms;
    } else if (p->window_ms < CONNS_PENALTY_MAX_MS) {
        p->window_ms *= 2;
    }
    p->until_ms = now + p->window_ms;
    cs->news.penalised++;
    cs->news.last_penalised = *k;
    cs->news.last_window_ms = p->window_ms;
    STATS_INC(cs->stats, peers_penalised);
}

/* Forgets e, a connection onced closes now: nng 1.5.2 reaps closed pipes
 * on one thread, which a pipe that never finishes closing can hold for
 * good (seen with non-readers), and REM_POST would then never come. */
static void
conns_forget(conns *cs, conn_entry *e)
{
    memset(e, 0, sizeof(*e));
    cs->n--;
    atomic_store(&cs->stats->conns_open, cs->n);
}

/* The entry to close so that a connection of peer k (or any, all) fits:
 * the longest idle one of the scope with nothing in flight, idle at least
 * CONNS_EVICT_IDLE_MS; NULL when none. */
static conn_entry *
conns_victim(conns *cs, const conns_peer *k, bool all, uint64_t now)
{
    conn_entry *best = NULL;

    for (size_t i = 0; i < cs->cfg.max; i++) {
        conn_entry *e = &cs->v[i];

        if (e->id == 0 || e->held > 0 || (!all && !peer_eq(&e->peer, k)) ||
            now - e->last_ms < CONNS_EVICT_IDLE_MS) {
            continue;
        }
        if (best == NULL || e->last_ms < best->last_ms) {
            best = e;
        }
    }
    return best;
}

static size_t
conns_of_peer(conns *cs, const conns_peer *k)
{
    size_t n = 0;

    for (size_t i = 0; i < cs->cfg.max && k->kind != PEER_NONE; i++) {
        n += cs->v[i].id != 0 && peer_eq(&cs->v[i].peer, k);
    }
    return n;
}

/* Makes room for a connection of k if a cap is reached: *close is set to
 * the pipe closed for it (0: none). False: no room, refused (why). */
static bool
conns_room(conns *cs, const conns_peer *k, uint64_t now, uint32_t *close,
           const char **why)
{
    conn_entry *e = NULL;

    *close = 0;
    if (k->kind != PEER_NONE && conns_of_peer(cs, k) >= cs->cfg.max_per_peer) {
        if ((e = conns_victim(cs, k, false, now)) == NULL) {
            *why = "its peer holds --conn-max-per-peer connections, all "
                   "busy";
            return false;
        }
    } else if (cs->n >= cs->cfg.max) {
        if ((e = conns_victim(cs, k, true, now)) == NULL) {
            *why = "onced holds --conn-max connections, all busy";
            return false;
        }
    }
    if (e != NULL) {
        *close = e->id;
        conns_forget(cs, e);
        cs->news.evicted++;
        STATS_INC(cs->stats, conns_evicted);
    }
    return true;
}

/* ADD_PRE: the connection is admitted into the table or refused. */
static void
conns_added(conns *cs, nng_pipe p)
{
    conns_peer k = peer_of(p);
    uint64_t now = clock_now_ms();
    uint32_t close = 0;
    const char *why = NULL;
    peer_penalty *pen;
    bool ok;

    pthread_mutex_lock(&cs->mtx);
    if ((ok = conns_room(cs, &k, now, &close, &why))) {
        conn_entry *e = conns_find(cs, 0);

        e->id = (uint32_t)nng_pipe_id(p);
        e->peer = k;
        e->last_ms = now;
        e->limit = (uint32_t)cs->cfg.inflight;
        if ((pen = penalty_find(cs, &k)) != NULL && pen->until_ms > now) {
            e->limit = 1;
        }
        cs->n++;
        atomic_store(&cs->stats->conns_open, cs->n);
    } else {
        cs->news.refused++;
        cs->news.last_refused = k;
        cs->news.why_refused = why;
        STATS_INC(cs->stats, conns_refused);
    }
    pthread_mutex_unlock(&cs->mtx);
    if (close != 0) {
        nng_pipe_close((nng_pipe){.id = close});
    }
    if (!ok) {
        nng_pipe_close(p); /* in ADD_PRE: never added to the socket */
    }
}

static void
conns_removed(conns *cs, nng_pipe p)
{
    conn_entry *e;

    pthread_mutex_lock(&cs->mtx);
    if ((e = conns_find(cs, (uint32_t)nng_pipe_id(p))) != NULL) {
        conns_forget(cs, e);
    }
    pthread_mutex_unlock(&cs->mtx);
}

void
conns_pipe_event(conns *cs, nng_pipe p, nng_pipe_ev ev)
{
    if (ev == NNG_PIPE_EV_ADD_PRE) {
        conns_added(cs, p);
    } else if (ev == NNG_PIPE_EV_REM_POST) {
        conns_removed(cs, p);
    }
}

conns_hold_result
conns_hold(conns *cs, uint32_t id)
{
    conns_hold_result r = CONNS_HOLD_GONE;
    conn_entry *e;

    pthread_mutex_lock(&cs->mtx);
    if ((e = conns_find(cs, id)) != NULL) {
        e->last_ms = clock_now_ms();
        if (e->held < e->limit) {
            e->held++;
            r = CONNS_HOLD_OK;
        } else {
            r = CONNS_HOLD_FULL;
        }
    }
    pthread_mutex_unlock(&cs->mtx);
    return r;
}

void
conns_release(conns *cs, uint32_t id)
{
    conn_entry *e;

    pthread_mutex_lock(&cs->mtx);
    if ((e = conns_find(cs, id)) != NULL && e->held > 0) {
        e->held--;
        e->last_ms = clock_now_ms();
    }
    pthread_mutex_unlock(&cs->mtx);
}

void
conns_not_reading(conns *cs, uint32_t id)
{
    conn_entry *e;

    pthread_mutex_lock(&cs->mtx);
    if ((e = conns_find(cs, id)) != NULL) {
        penalty_add(cs, &e->peer, clock_now_ms());
        conns_forget(cs, e); /* the caller closes it */
    }
    pthread_mutex_unlock(&cs->mtx);
}

bool
conns_auth_result(conns *cs, uint32_t id, bool ok)
{
    conn_entry *e;
    bool close = false;

    pthread_mutex_lock(&cs->mtx);
    if ((e = conns_find(cs, id)) != NULL) {
        e->auth_fails = ok ? 0 : e->auth_fails + 1;
        if (e->auth_fails >= CONNS_AUTH_FAILS_MAX) {
            close = true;
            penalty_add(cs, &e->peer, clock_now_ms());
            STATS_INC(cs->stats, auth_disconnects);
            conns_forget(cs, e); /* the caller closes it */
        }
    }
    pthread_mutex_unlock(&cs->mtx);
    return close;
}

size_t
conns_count(conns *cs)
{
    size_t n;

    pthread_mutex_lock(&cs->mtx);
    n = cs->n;
    pthread_mutex_unlock(&cs->mtx);
    return n;
}

/* One line about what the callbacks noted since the last one. */
static void
conns_log(conns *cs, const conns_news *nw)
{
    char a[64], b[64];

    if (nw->refused > 0) {
        log_info("connections: %llu refused since the last report, the "
                 "last from %s: %s (Stats conns_refused %llu)",
                 (unsigned long long)nw->refused,
                 peer_text(&nw->last_refused, a, sizeof(a)), nw->why_refused,
                 (unsigned long long)atomic_load(&cs->stats->conns_refused));
    }
    if (nw->evicted > 0 || nw->idle > 0) {
        log_info(
            "connections: %llu idle ones closed to make room for new "
            "ones, %llu closed after --conn-idle-timeout (Stats "
            "conns_evicted %llu, conns_idle_closed %llu)",
            (unsigned long long)nw->evicted, (unsigned long long)nw->idle,
            (unsigned long long)atomic_load(&cs->stats->conns_evicted),
            (unsigned long long)atomic_load(&cs->stats->conns_idle_closed));
    }
    if (nw->penalised > 0) {
        log_info("connections: %llu peer(s) penalised, the last %s for "
                 "%llu ms: a connection of it did not read its replies or "
                 "kept failing authentication; its new connections may "
                 "hold one request each (Stats peers_penalised %llu)",
                 (unsigned long long)nw->penalised,
                 peer_text(&nw->last_penalised, b, sizeof(b)),
                 (unsigned long long)nw->last_window_ms,
                 (unsigned long long)atomic_load(&cs->stats->peers_penalised));
    }
}

/* The thread: closes connections idle past --conn-idle-timeout, then
 * writes the news. */
static void
conns_tick(void *arg, unsigned why)
{
    conns *cs = arg;
    uint32_t close[CONNS_CLOSE_MAX];
    size_t nclose = 0;
    uint64_t now = clock_now_ms();
    conns_news nw;

    (void)why;
    pthread_mutex_lock(&cs->mtx);
    for (size_t i = 0;
         i < cs->cfg.max && cs->cfg.idle_ms > 0 && nclose < CONNS_CLOSE_MAX;
         i++) {
        conn_entry *e = &cs->v[i];

        if (e->id != 0 && e->held == 0 && now - e->last_ms >= cs->cfg.idle_ms) {
            close[nclose++] = e->id;
            conns_forget(cs, e);
            cs->news.idle++;
            STATS_INC(cs->stats, conns_idle_closed);
        }
    }
    nw = cs->news;
    memset(&cs->news, 0, sizeof(cs->news));
    pthread_mutex_unlock(&cs->mtx);
    for (size_t i = 0; i < nclose; i++) {
        nng_pipe_close((nng_pipe){.id = close[i]});
    }
    conns_log(cs, &nw);
}

int
conns_open(conns **cp, const conns_config *cfg, server_stats *stats)
{
    conns *cs;

    if ((cs = calloc(1, sizeof(*cs))) == NULL) {
        return ENOMEM;
    }
    cs->cfg = *cfg;
    cs->cfg.max = cfg->max > 0 ? cfg->max : 1;
    cs->cfg.max_per_peer = cfg->max_per_peer > 0 ? cfg->max_per_peer : 1;
    cs->cfg.inflight = cfg->inflight > 0 ? cfg->inflight : 1;
    cs->stats = stats;
    if ((cs->v = calloc(cs->cfg.max, sizeof(*cs->v))) == NULL) {
        free(cs);
        return ENOMEM;
    }
    pthread_mutex_init(&cs->mtx, NULL);
    *cp = cs;
    return 0;
}

int
conns_start(conns *cs)
{
    uint64_t period = cs->cfg.idle_ms > 0 && cs->cfg.idle_ms / 4 < 1000
                          ? cs->cfg.idle_ms / 4
                          : 1000;

    return periodic_start(&cs->thread, conns_tick, cs,
                          period >= 50 ? period : 50, 0);
}

void
conns_stop(conns *cs)
{
    if (cs != NULL) {
        periodic_stop(&cs->thread);
    }
}

void
conns_free(conns *cs)
{
    if (cs == NULL) {
        return;
    }
    pthread_mutex_destroy(&cs->mtx);
    free(cs->v);
    free(cs);
}
