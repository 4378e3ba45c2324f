/*
 * watch.c — a follower's wake-up: one etcd watch (/v3/watch through the
 * JSON gateway, a streaming HTTP response) on the cluster's prefix, so a
 * new log entry or a change of the leader key wakes the follower at once
 * instead of at its next poll.
 *
 * Owns: the watch thread, its curl handle and the stream buffer; after
 * repl_watch_close the thread owns (and frees) the whole repl_watch.
 * Invariant: the watch only wakes; follow.c still reads the log with range
 * reads (follow_catch_up), so a lost, late or compacted watch costs time,
 * never an entry. Every watch established wakes the follower once (what
 * was appended before it is read then), every message with events wakes
 * it again.
 * Never: applies or interprets entries; blocks a caller of repl_watch_wait
 * longer than its timeout; waits more than 2 s of backoff between tries.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <curl/curl.h>
#include <sodium.h>

#include "base/clock.h"
#include "base/log.h"

/* Backoff between watch attempts after an error: doubles up to the max. */
#define WATCH_BACKOFF_MIN_MS 100
#define WATCH_BACKOFF_MAX_MS 2000
/* One JSON message of the stream is at most this long (events carry log
 * values of up to REPL_PART_MAX bytes, base64 and JSON around them). */
#define WATCH_MSG_MAX (4u * 1024u * 1024u)

#define WATCH_EP_MAX 8

struct repl_watch {
    char eps[WATCH_EP_MAX][256]; /* etcd endpoints, tried in turn */
    size_t neps;
    char prefix[REPL_KEY_MAX]; /* watched: every key under it */
    etcd_tls tls;              /* https:// endpoints; strings owned */
    pthread_t thread;
    pthread_mutex_t mtx; /* protects pending, up */
    pthread_cond_t cv;   /* monotonic (clock_cond_init) */
    bool pending;        /* something happened since the last wait */
    bool up;             /* a watch is established */
    _Atomic bool stopping;
    /* the watch thread's only */
    char *buf;
    size_t len;
    bool created; /* this attempt's watch was established */
};

static void
watch_wake(repl_watch *w, int up)
{
    pthread_mutex_lock(&w->mtx);
    w->pending = true;
    if (up >= 0) {
        w->up = up != 0;
    }
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mtx);
}

/* One message of the stream: a created watch or events wake the follower;
 * a canceled watch (e.g. compacted) ends this attempt. 0, or -1 to end. */
static int
watch_message(repl_watch *w, const char *msg)
{
    cJSON *j = cJSON_Parse(msg);
    cJSON *res = j != NULL ? cJSON_GetObjectItem(j, "result") : NULL;
    int rv = 0;

    if (res == NULL) {
        rv = -1; /* an error object, or not JSON */
    } else if (cJSON_IsTrue(cJSON_GetObjectItem(res, "canceled"))) {
        rv = -1;
    } else if (cJSON_IsTrue(cJSON_GetObjectItem(res, "created"))) {
        w->created = true;
        watch_wake(w, 1);
    } else if (cJSON_GetArraySize(cJSON_GetObjectItem(res, "events")) > 0) {
        watch_wake(w, -1);
    }
    cJSON_Delete(j);
    return rv;
}

/* curl's write callback: splits the stream into messages (the gateway
 * writes one JSON object per line). */
static size_t
watch_write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
    repl_watch *w = arg;
    size_t n = size * nmemb;
    char *nl;

    if (w->len + n + 1 > WATCH_MSG_MAX) {
        return 0; /* ends the transfer */
    }
    {
        char *b = realloc(w->buf, w->len + n + 1);
        if (b == NULL) {
            return 0;
        }
        w->buf = b;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    w->buf[w->len] = '\0';
    while ((nl = memchr(w->buf, '\n', w->len)) != NULL) {
        size_t used = (size_t)(nl - w->buf) + 1;
        *nl = '\0';
        if (nl != w->buf && watch_message(w, w->buf) != 0) {
            return 0;
        }
        memmove(w->buf, w->buf + used, w->len - used + 1);
        w->len -= used;
    }
    return n;
}

/* Called by curl about once a second even when nothing arrives. */
static int
watch_progress_cb(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                  curl_off_t un)
{
    repl_watch *w = arg;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return atomic_load(&w->stopping) ? 1 : 0;
}

static char *
watch_body(const repl_watch *w)
{
    size_t pl = strlen(w->prefix);
    char end[REPL_KEY_MAX];
    size_t kn = sodium_base64_ENCODED_LEN(pl, sodium_base64_VARIANT_ORIGINAL);
    char *k = malloc(kn), *e = malloc(kn), *body;

    memcpy(end, w->prefix, pl + 1);
    end[pl - 1]++; /* "/once/c/" -> "/once/c0": the prefix's end */
    if (k == NULL || e == NULL || (body = malloc(2 * kn + 128)) == NULL) {
        free(k);
        free(e);
        return NULL;
    }
    sodium_bin2base64(k, kn, (const unsigned char *)w->prefix, pl,
                      sodium_base64_VARIANT_ORIGINAL);
    sodium_bin2base64(e, kn, (const unsigned char *)end, pl,
                      sodium_base64_VARIANT_ORIGINAL);
    snprintf(body, 2 * kn + 128,
             "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\"}}", k,
             e);
    free(k);
    free(e);
    return body;
}

static void
watch_sleep_ms(repl_watch *w, uint64_t ms)
{
    while (ms > 0 && !atomic_load(&w->stopping)) {
        uint64_t step = ms < 50 ? ms : 50;
        clock_sleep_ms(step);
        ms -= step;
    }
}

/* Frees w and what it owns (its thread has ended, or never started). */
static void
watch_free(repl_watch *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mtx);
    etcd_tls_clear(&w->tls);
    free(w->buf);
    free(w);
}

static void *
watch_main(void *arg)
{
    repl_watch *w = arg;
    CURL *curl = curl_easy_init();
    struct curl_slist *hdr =
        curl_slist_append(NULL, "Content-Type: application/json");
    char *body = watch_body(w);
    uint64_t backoff = WATCH_BACKOFF_MIN_MS;
    size_t ep = 0;

    if (curl == NULL || hdr == NULL || body == NULL) {
        log_warn("repl: cannot start the log watch; polling instead");
        while (!atomic_load(&w->stopping)) {
            watch_sleep_ms(w, 1000);
        }
        goto out;
    }
    while (!atomic_load(&w->stopping)) {
        char url[300];

        snprintf(url, sizeof(url), "%s/v3/watch", w->eps[ep % w->neps]);
        w->len = 0;
        w->created = false;
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, watch_write_cb);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, watch_progress_cb);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, w);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        /* A member that vanished without a FIN: TCP keepalive ends the
         * stream within a few seconds; the follower polls meanwhile. */
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 2L);
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 1L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
        etcd_tls_apply(curl, &w->tls);
        (void)curl_easy_perform(curl);
        watch_wake(w, 0); /* down: the follower polls until it is back */
        if (atomic_load(&w->stopping)) {
            break;
        }
        if (w->created) {
            backoff = WATCH_BACKOFF_MIN_MS; /* it worked for a while */
        }
        ep++;
        watch_sleep_ms(w, backoff);
        backoff = backoff * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS
                                                     : backoff * 2;
    }
out:
    free(body);
    curl_slist_free_all(hdr);
    if (curl != NULL) {
        curl_easy_cleanup(curl);
    }
    /* repl_watch_close handed w to this thread (it is detached). */
    watch_free(w);
    return NULL;
}

int
repl_watch_open(repl_watch **wp, const char *endpoints, const etcd_tls *tls,
                const char *prefix)
{
    repl_watch *w = calloc(1, sizeof(*w));
    int rv;

    if (w == NULL) {
        return ENOMEM;
    }
    pthread_mutex_init(&w->mtx, NULL);
    clock_cond_init(&w->cv); /* repl_watch_wait's clock_deadline */
    if (etcd_tls_copy(&w->tls, tls) != 0) {
        watch_free(w);
        return ENOMEM;
    }
    for (const char *p = endpoints; *p != '\0' && w->neps < WATCH_EP_MAX;) {
        size_t n = strcspn(p, ",");
        if (n > 0 && n < sizeof(w->eps[0])) {
            memcpy(w->eps[w->neps], p, n);
            w->eps[w->neps++][n] = '\0';
        }
        p += n + (p[n] == ',');
    }
    if (w->neps == 0) {
        watch_free(w);
        return EINVAL;
    }
    snprintf(w->prefix, sizeof(w->prefix), "%s", prefix);
    if ((rv = pthread_create(&w->thread, NULL, watch_main, w)) != 0) {
        watch_free(w);
        return rv;
    }
    *wp = w;
    return 0;
}

bool
repl_watch_wait(repl_watch *w, uint64_t poll_ms, uint64_t idle_ms)
{
    struct timespec until;
    bool woken;

    pthread_mutex_lock(&w->mtx);
    until = clock_deadline(w->up ? idle_ms : poll_ms);
    while (!w->pending) {
        if (pthread_cond_timedwait(&w->cv, &w->mtx, &until) == ETIMEDOUT) {
            break;
        }
    }
    woken = w->pending;
    w->pending = false;
    pthread_mutex_unlock(&w->mtx);
    return woken;
}

void
repl_watch_close(repl_watch *w)
{
    if (w == NULL) {
        return;
    }
    /* Without waiting: curl notices within about a second (its progress
     * callback), and a replica that just won must not wait that long
     * before it serves. The thread frees w. */
    atomic_store(&w->stopping, true);
    pthread_detach(w->thread);
}
