/*
 * metrics.c — serving the figures as Prometheus text (metrics.h): which
 * metrics exist, who publishes what, and the HTTP handler.
 */
#include "server/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "server/executor.h"
#include "server/http_srv.h"
#include "gc/gc.h"
#include "outbox/outbox.h"
#include "base/log.h"
#include "base/periodic.h"
#include "server/prom_text.h"
#include "server/stats_calls.h"
#include "lease/table.h"
#include "proto/wire.h"
#include "proto/reasons.h"

#define METRICS_PATH "/metrics"

struct metrics {
    server *srv;

    periodic *publisher; /* NULL unless it runs */
    pthread_mutex_t mtx; /* protects pending */
    pthread_cond_t cv;   /* signals !pending */
    bool pending;        /* a publication is queued on the executor */

    /* Published figures: written by the publisher thread (disk, gc_*) or
     * the executor (the rest), read by the handler. */
    _Atomic uint64_t records;
    _Atomic uint64_t bytes;
    _Atomic uint64_t oldest_age_ms;
    _Atomic uint64_t leases_live;
    _Atomic uint64_t leases_ended;
    _Atomic uint64_t lease_sum_us; /* stats_now_us() of the last sum; 0:
                                      none yet */
    _Atomic uint64_t disk_bytes;
    _Atomic uint64_t gc_passes;
    _Atomic uint64_t gc_reclaimed;
    _Atomic uint64_t gc_reclaimed_bytes;
    _Atomic uint64_t gc_leases_expired;

    pthread_mutex_t topics_mtx; /* protects topics */
    /* The outbox's topics as the executor last read them (published
     * every METRICS_PUBLISH_MS); outbox_topics_fini frees them. */
    Once__V1__OutboxTopicsResponse topics;
};

/* Topics rendered at most (the rest are left out of /metrics). */
#define METRICS_TOPICS_MAX 256

/* ---- publishing ---------------------------------------------------------
 */

/* The executor thread: the outbox's topics, read through a transaction
 * that stages nothing. */
static void
metrics_publish_topics(metrics *m)
{
    Once__V1__OutboxTopicsResponse fresh =
        ONCE__V1__OUTBOX_TOPICS_RESPONSE__INIT;
    store_txn *t = store_txn_begin(m->srv->env.st);

    if (t == NULL) {
        return;
    }
    if (outbox_topics(t, &fresh) == 0) {
        pthread_mutex_lock(&m->topics_mtx);
        outbox_topics_fini(&m->topics);
        m->topics = fresh;
        pthread_mutex_unlock(&m->topics_mtx);
    } else {
        outbox_topics_fini(&fresh);
    }
    store_txn_abort(t);
}

/* The executor thread: the lease table is its alone. */
static void
metrics_publish_leases(void *arg)
{
    metrics *m = arg;
    server *srv = m->srv;
    uint64_t now = srv->env.now_ms();
    lease_sum sum;

    lease_table_sum(srv->env.leases, now, &sum);
    metrics_publish_topics(m);
    atomic_store(&m->records, sum.records);
    atomic_store(&m->bytes, sum.bytes);
    atomic_store(&m->oldest_age_ms, lease_sum_oldest_age_ms(&sum, now));
    atomic_store(&m->leases_live, sum.live);
    atomic_store(&m->leases_ended, sum.ended);
    atomic_store(&m->lease_sum_us, stats_now_us());
    pthread_mutex_lock(&m->mtx);
    m->pending = false;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mtx);
}

/* The publisher thread, at once and then every METRICS_PUBLISH_MS: what
 * it may read itself, then the lease sums posted to the executor (unless
 * the last post has not run yet: a busy executor gets one, not a
 * backlog). */
static void
metrics_publish(void *arg, unsigned why)
{
    metrics *m = arg;
    uint64_t disk;
    gc_stats gs;
    bool post;

    if (store_disk_bytes(m->srv->env.st, &disk) == 0) {
        atomic_store(&m->disk_bytes, disk);
    }
    gc_stats_get(m->srv->env.gc, &gs);
    atomic_store(&m->gc_passes, gs.passes);
    atomic_store(&m->gc_reclaimed, gs.reclaimed_total);
    atomic_store(&m->gc_reclaimed_bytes, gs.reclaimed_bytes_total);
    atomic_store(&m->gc_leases_expired, gs.leases_expired);
    (void)why;
    pthread_mutex_lock(&m->mtx);
    post = !m->pending && !periodic_stopping(m->publisher);
    m->pending = m->pending || post;
    pthread_mutex_unlock(&m->mtx);
    if (post) {
        executor_post(m->srv->ex, metrics_publish_leases, m);
    }
}

/* ---- rendering (nng's threads: atomics only) ----------------------------
 */

static void
metrics_counter(prom_text *t, const char *name, const char *help, uint64_t v)
{
    prom_text_family(t, name, "counter", help);
    prom_text_u64(t, name, NULL, 0, v);
}

static void
metrics_gauge(prom_text *t, const char *name, const char *help, double v)
{
    prom_text_family(t, name, "gauge", help);
    prom_text_double(t, name, NULL, 0, v);
}

static void
metrics_render_requests(prom_text *t, stats_calls *sc)
{
    const char *name = "once_requests_total";

    prom_text_family(t, name, "counter",
                     "Requests answered, by method (full name; \"unknown\" "
                     "when the envelope did not decode, failed "
                     "authentication or named no method) and status code. "
                     "Replays included.");
    for (size_t slot = 0; slot <= STATS_METHODS_MAX; slot++) {
        const wire_method *wm = stats_calls_method(slot);
        if (wm == NULL && slot != STATS_METHODS_MAX) {
            continue;
        }
        for (int code = 0; code < STATS_CODES; code++) {
            uint64_t v = atomic_load(&sc->by_method[slot][code]);
            const char *labels[4] = {"method",
                                     wm != NULL ? wm->full_name : "unknown",
                                     "code", wire_code_name(code)};
            if (v != 0) {
                prom_text_u64(t, name, labels, 2, v);
            }
        }
    }
}

static void
metrics_render_histograms(prom_text *t, stats_calls *sc)
{
    uint64_t lat[STATS_LATENCY_BOUNDS + 1], grp[STATS_GROUP_BOUNDS + 1];

    for (size_t i = 0; i <= STATS_LATENCY_BOUNDS; i++) {
        lat[i] = atomic_load(&sc->latency.buckets[i]);
    }
    for (size_t i = 0; i <= STATS_GROUP_BOUNDS; i++) {
        grp[i] = atomic_load(&sc->group.buckets[i]);
    }
    prom_text_family(t, "once_call_duration_seconds", "histogram",
                     "Time from a request's receipt to its reply being "
                     "handed to nng (queueing, execution and the group's "
                     "fsync included).");
    prom_text_histogram(t, "once_call_duration_seconds",
                        stats_latency_bounds_us, STATS_LATENCY_BOUNDS, 1e6, lat,
                        (double)atomic_load(&sc->latency.sum_us) / 1e6);
    prom_text_family(t, "once_group_commit_size", "histogram",
                     "Transactions (calls, collector steps) answered by "
                     "one group commit, counted when it synced a write "
                     "(one fsync for all of them).");
    prom_text_histogram(t, "once_group_commit_size", stats_group_bounds,
                        STATS_GROUP_BOUNDS, 1, grp,
                        (double)atomic_load(&sc->group.sum));
}

static void
metrics_render_refusals(prom_text *t, server_stats *ss)
{
    static const struct {
        const char *reason;
        size_t off;
    } reasons[] = {
        {REASON_STALE_RPC, offsetof(server_stats, stale)},
        {REASON_WINDOW_FULL, offsetof(server_stats, window_full)},
        {REASON_LEASE_EXPIRED, offsetof(server_stats, lease_expired)},
        {"UNAUTHENTICATED", offsetof(server_stats, unauthenticated)},
        {"PERMISSION_DENIED", offsetof(server_stats, permission_denied)},
    };

    prom_text_family(t, "once_refusals_total", "counter",
                     "Calls refused before execution, by reason (the "
                     "status reason; UNAUTHENTICATED and PERMISSION_DENIED "
                     "stand for every reason of their code).");
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        _Atomic uint64_t *v = (_Atomic uint64_t *)((char *)ss + reasons[i].off);
        const char *labels[2] = {"reason", reasons[i].reason};
        prom_text_u64(t, "once_refusals_total", labels, 1, atomic_load(v));
    }
}

/* The outbox, per topic (published by the executor). */
static void
metrics_render_outbox(prom_text *t, metrics *m)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } g[] = {
        {"once_outbox_head", "The highest offset given on the topic.",
         offsetof(Once__V1__OutboxTopic, head)},
        {"once_outbox_low_water",
         "The topic's low-water mark: no event below it is delivered "
         "again.",
         offsetof(Once__V1__OutboxTopic, low_water)},
        {"once_outbox_retained_events", "Events the topic still stores.",
         offsetof(Once__V1__OutboxTopic, retained_events)},
        {"once_outbox_retained_bytes",
         "Bytes of the events the topic still stores (--outbox-max-bytes).",
         offsetof(Once__V1__OutboxTopic, retained_bytes)},
    };

    metrics_counter(t, "once_outbox_events_total",
                    "Outbox events appended (replays add none).",
                    atomic_load(&m->srv->stats.outbox_events));
    pthread_mutex_lock(&m->topics_mtx);
    for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
        prom_text_family(t, g[k].name, "gauge", g[k].help);
        for (size_t i = 0; i < m->topics.n_topics && i < METRICS_TOPICS_MAX;
             i++) {
            const Once__V1__OutboxTopic *tp = m->topics.topics[i];
            const char *labels[2] = {"topic", tp->name};
            prom_text_u64(t, g[k].name, labels, 1,
                          *(const uint64_t *)((const char *)tp + g[k].off));
        }
    }
    pthread_mutex_unlock(&m->topics_mtx);
}

/* once.v1.KV (svc_kv.c keeps these). */
static void
metrics_render_kv(prom_text *t, server_stats *ss)
{
    metrics_gauge(t, "once_kv_keys", "Keys stored in once.v1.KV.",
                  (double)atomic_load(&ss->kv_keys));
    metrics_gauge(t, "once_kv_bytes",
                  "Bytes of the keys and values stored in once.v1.KV.",
                  (double)atomic_load(&ss->kv_bytes));
    metrics_gauge(t, "once_kv_revision", "The KV store's revision.",
                  (double)atomic_load(&ss->kv_revision));
    metrics_counter(t, "once_kv_txns_total",
                    "KV Txns executed (replays not counted).",
                    atomic_load(&ss->kv_txns));
    metrics_counter(t, "once_kv_compares_failed_total",
                    "KV Txns whose compares did not all hold (the else "
                    "branch ran).",
                    atomic_load(&ss->kv_compares_failed));
    metrics_counter(t, "once_kv_lease_deleted_total",
                    "KV keys deleted because the lease they were bound to "
                    "ended.",
                    atomic_load(&ss->kv_lease_deleted));
}

/* The connection table's figures (conns.h, verify.h). */
static void
metrics_render_conns(prom_text *t, server_stats *ss)
{
    metrics_gauge(t, "once_connections_open", "Connections open now.",
                  (double)atomic_load(&ss->conns_open));
    metrics_counter(t, "once_connections_refused_total",
                    "Connections refused as they opened: --conn-max or "
                    "--conn-max-per-peer reached and none idle to close.",
                    atomic_load(&ss->conns_refused));
    metrics_counter(t, "once_connections_evicted_total",
                    "Idle connections closed to make room for a new one.",
                    atomic_load(&ss->conns_evicted));
    metrics_counter(t, "once_connections_idle_closed_total",
                    "Connections closed after --conn-idle-timeout without "
                    "a request.",
                    atomic_load(&ss->conns_idle_closed));
    metrics_counter(t, "once_peers_penalised_total",
                    "Peers held to one request per new connection for a "
                    "back-off window (did not read, or kept failing "
                    "authentication).",
                    atomic_load(&ss->peers_penalised));
    metrics_counter(t, "once_auth_disconnects_total",
                    "Connections closed after 32 requests in a row failed "
                    "authentication.",
                    atomic_load(&ss->auth_disconnects));
}

/* The HTTP listeners' own figures (http_stats.h). */
static void
metrics_render_http(prom_text *t, http_stats *hs)
{
    const char *name = "once_http_refusals_total";

    metrics_gauge(t, "once_http_connections_open",
                  "HTTP connections open now (--http-listen and "
                  "--metrics-listen together, those being refused "
                  "included).",
                  (double)atomic_load(&hs->open));
    metrics_counter(t, "once_http_connections_evicted_total",
                    "HTTP connections closed unanswered to make room for "
                    "a new one (--http-conn-max): each had waited 1s or "
                    "more for a request.",
                    atomic_load(&hs->evicted));
    prom_text_family(t, name, "counter",
                     "Requests and connections the HTTP front door refused "
                     "before or instead of a call, by status reason and "
                     "HTTP status (OTHER: any other pair).");
    for (size_t i = 0; i < HTTP_STATS_ROWS; i++) {
        const char *reason;
        unsigned status;
        char st[8];
        const char *labels[4] = {"reason", NULL, "status", st};

        http_stats_row(i, &reason, &status);
        labels[1] = reason;
        snprintf(st, sizeof(st), "%u", status);
        prom_text_u64(t, name, labels, 2, atomic_load(&hs->refusals[i]));
    }
}

static void
metrics_render(metrics *m, prom_text *t)
{
    server_stats *ss = &m->srv->stats;
    store_counters sc;
    bool compacting;
    uint64_t compactions, summed = atomic_load(&m->lease_sum_us);
    const char *version[2] = {"version", ONCE_VERSION};

    store_counters_get(m->srv->env.st, &sc);
    store_compact_state(m->srv->env.st, &compacting, &compactions);

    prom_text_family(t, "once_build_info", "gauge",
                     "Always 1; the version of onced as a label.");
    prom_text_u64(t, "once_build_info", version, 1, 1);
    metrics_render_requests(t, &ss->calls);
    metrics_counter(t, "once_replays_total",
                    "Retries answered with the stored result of their rpc "
                    "id.",
                    atomic_load(&ss->replays));
    metrics_counter(t, "once_conflicts_total",
                    "Calls refused ALREADY_EXISTS/RPC_ID_CONFLICT: an rpc id "
                    "already used for another request.",
                    atomic_load(&ss->conflicts));
    metrics_counter(t, "once_rejected_total",
                    "Requests answered with a non-OK status before "
                    "execution, writing nothing.",
                    atomic_load(&ss->rejected));
    metrics_render_refusals(t, ss);
    metrics_counter(t, "once_leases_opened_total", "Leases opened.",
                    atomic_load(&ss->leases_opened));
    metrics_render_histograms(t, &ss->calls);
    metrics_counter(t, "once_commits_total",
                    "Transactions with writes made durable.", sc.commits);
    metrics_counter(t, "once_fsyncs_total",
                    "Synced LevelDB writes (one per group commit that "
                    "wrote).",
                    sc.fsyncs);
    metrics_gauge(t, "once_records_retained",
                  "Completion records stored (or staged) and not yet "
                  "reclaimed.",
                  (double)atomic_load(&m->records));
    metrics_gauge(t, "once_records_retained_bytes",
                  "Keys and values of the retained completion records.",
                  (double)atomic_load(&m->bytes));
    metrics_gauge(t, "once_oldest_record_age_seconds",
                  "Age of the oldest retained completion record; 0 when "
                  "none.",
                  (double)atomic_load(&m->oldest_age_ms) / 1e3);
    metrics_gauge(t, "once_leases_live", "Leases live now.",
                  (double)atomic_load(&m->leases_live));
    metrics_gauge(t, "once_leases_ended",
                  "Leases ended whose records are not yet all reclaimed.",
                  (double)atomic_load(&m->leases_ended));
    metrics_counter(t, "once_records_reclaimed_total",
                    "Completion records deleted by the collector.",
                    atomic_load(&m->gc_reclaimed));
    metrics_counter(t, "once_records_reclaimed_bytes_total",
                    "Bytes of the completion records the collector "
                    "deleted.",
                    atomic_load(&m->gc_reclaimed_bytes));
    metrics_counter(t, "once_gc_passes_total", "Collector passes.",
                    atomic_load(&m->gc_passes));
    metrics_counter(t, "once_gc_leases_expired_total",
                    "Leases the collector ended past their TTL.",
                    atomic_load(&m->gc_leases_expired));
    metrics_counter(t, "once_listener_restarts_total",
                    "ipc:// listeners started again after they stopped "
                    "accepting (--listen-check).",
                    atomic_load(&ss->listener_restarts));
    metrics_render_conns(t, ss);
    metrics_render_http(t, &ss->http);
    metrics_gauge(t, "once_disk_bytes",
                  "Size of the files in the LevelDB folder.",
                  (double)atomic_load(&m->disk_bytes));
    metrics_counter(t, "once_compactions_total",
                    "Full-range compactions finished (Admin.Compact).",
                    compactions);
    metrics_gauge(t, "once_compacting", "1 while a full-range compaction runs.",
                  compacting ? 1 : 0);
    metrics_render_kv(t, ss);
    metrics_render_outbox(t, m);
    if (summed != 0) {
        metrics_gauge(t, "once_metrics_published_age_seconds",
                      "Age of the published retention and disk figures "
                      "(refreshed every second).",
                      (double)(stats_now_us() - summed) / 1e6);
    }
}

/* An nng thread (http_srv.h): GET /metrics (and HEAD). */
static void
metrics_http_get(nng_aio *aio)
{
    metrics *m = nng_aio_get_input(aio, 1); /* the route's */
    prom_text t = {NULL, 0, 0, false};
    nng_http_res *res = NULL;
    char *text = NULL;
    size_t len;
    int rv;

    metrics_render(m, &t);
    if ((rv = prom_text_take(&t, &text, &len)) != 0 ||
        (rv = nng_http_res_alloc(&res)) != 0 ||
        (rv = nng_http_res_set_header(
             res, "Content-Type",
             "text/plain; version=0.0.4; charset=utf-8")) != 0 ||
        (rv = nng_http_res_copy_data(res, text, len)) != 0) {
        free(text);
        nng_http_res_free(res);
        nng_aio_finish(aio, NNG_ENOMEM); /* the connection is closed */
        return;
    }
    free(text);
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

/* ---- open and close -----------------------------------------------------
 */

const char *
metrics_url_problem(const char *url)
{
    nng_url *u;
    const char *why = NULL;

    if (nng_url_parse(&u, url) != 0) {
        return "not a URL (write it like http://127.0.0.1:9464)";
    }
    if (strcmp(u->u_scheme, "http") != 0) {
        why = "only http:// is served (put a TLS proxy in front for https)";
    } else if (u->u_hostname == NULL || u->u_hostname[0] == '\0') {
        why = "the URL needs a host (http://127.0.0.1:9464, or "
              "http://0.0.0.0:9464 for every address)";
    } else if (u->u_path != NULL && u->u_path[0] != '\0' &&
               strcmp(u->u_path, "/") != 0 &&
               strcmp(u->u_path, METRICS_PATH) != 0) {
        why = "the metrics are served at /metrics: give no other path";
    } else if ((u->u_query != NULL && u->u_query[0] != '\0') ||
               (u->u_fragment != NULL && u->u_fragment[0] != '\0')) {
        why = "the URL takes no query or fragment";
    }
    nng_url_free(u);
    return why;
}

int
metrics_open(metrics **mp, http_srv *hs, server *srv)
{
    metrics *m;
    int rv;

    if ((m = calloc(1, sizeof(*m))) == NULL) {
        return NNG_ENOMEM;
    }
    m->srv = srv;
    once__v1__outbox_topics_response__init(&m->topics);
    pthread_mutex_init(&m->topics_mtx, NULL);
    pthread_mutex_init(&m->mtx, NULL);
    pthread_cond_init(&m->cv, NULL);
    if ((rv = http_srv_handle(hs, "GET", METRICS_PATH, false, metrics_http_get,
                              m)) != 0) {
        goto fail;
    }
    if (periodic_start(&m->publisher, metrics_publish, m, METRICS_PUBLISH_MS,
                       PERIODIC_RUN_FIRST) != 0) {
        rv = NNG_ENOMEM;
        goto fail;
    }
    *mp = m;
    return 0;
fail:
    metrics_free(m);
    return rv;
}

void
metrics_stop(metrics *m)
{
    if (m == NULL) {
        return;
    }
    periodic_stop(&m->publisher);
    /* A publication already queued runs on the executor, which still
     * runs: wait for it, as it reads m. */
    pthread_mutex_lock(&m->mtx);
    while (m->pending) {
        pthread_cond_wait(&m->cv, &m->mtx);
    }
    pthread_mutex_unlock(&m->mtx);
}

void
metrics_free(metrics *m)
{
    if (m == NULL) {
        return;
    }
    outbox_topics_fini(&m->topics);
    pthread_mutex_destroy(&m->topics_mtx);
    pthread_mutex_destroy(&m->mtx);
    pthread_cond_destroy(&m->cv);
    free(m);
}
