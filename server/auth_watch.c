/*
 * auth_watch.c — re-reading the principals and the policy off the request
 * path (auth.h).
 *
 * Owns the watcher thread: every AUTH_RECHECK_MS it stats both files, and
 * when one changed (or auth_request_reload asked) it loads and checks them
 * (auth_tables_load: the file-permission and symlink checks of trust.h,
 * the policy's parse rules), then hands the new tables to the executor as
 * a task that puts them in force between two calls.
 * Invariant: tables that do not load are never handed over — the ones in
 * force stay, with a log line saying why; once authenticating, a principals
 * file that disappears hands over an empty table, never OPEN again.
 * Never: touches the tables in force (only the executor's install task
 * does); blocks the executor (the parse runs here).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"
#include "server/auth_impl.h"
#include "proto/duration.h"
#include "proto/log.h"

/* New tables on their way to the executor. */
typedef struct auth_install {
    auth *a;
    auth_tables t;
    bool enabled;
} auth_install;

static bool
auth_file_changed(const file_sig *a, const file_sig *b)
{
    return a->exists != b->exists || a->dev != b->dev || a->ino != b->ino ||
           a->size != b->size || a->mtim.tv_sec != b->mtim.tv_sec ||
           a->mtim.tv_nsec != b->mtim.tv_nsec ||
           a->ctim.tv_sec != b->ctim.tv_sec ||
           a->ctim.tv_nsec != b->ctim.tv_nsec;
}

/* On the executor thread, between two calls: the new tables go in force
 * and the old ones, which no call holds any more, are freed. */
static void
auth_install_run(void *arg)
{
    auth_install *in = arg;
    auth *a = in->a;

    auth_tables_fini(&a->t);
    a->t = in->t;
    a->enabled = in->enabled;
    free(in);
}

/* Re-reads both files (forced, or when a stat shows a change) and hands
 * the result to the executor. Watcher thread. */
static void
auth_watch_pass(auth *a, bool forced)
{
    file_sig p = auth_file_stat(a->principals_path);
    file_sig q = auth_file_stat(a->policy_path);
    auth_install *in;
    bool present;
    char err[512] = "";
    int rv;

    if (!forced && !auth_file_changed(&p, &a->psig) &&
        !auth_file_changed(&q, &a->polsig)) {
        return;
    }
    a->psig = p;
    a->polsig = q;
    if ((in = calloc(1, sizeof(*in))) == NULL) {
        log_error("not reloaded, the previous principals and policy stay in "
                  "force: out of memory");
        return;
    }
    if ((rv = auth_tables_load(a, &in->t, &present, err, sizeof(err))) != 0) {
        log_error("not reloaded, the previous principals and policy stay in "
                  "force: %s",
                  err[0] != '\0' ? err : strerror(rv));
        free(in);
        return;
    }
    if (!present && a->w_enabled) {
        log_error("%s disappeared: no principal is accepted until it is "
                  "back (onced never falls back to OPEN)",
                  a->principals_path);
    }
    in->a = a;
    in->enabled = a->w_enabled || present;
    a->w_enabled = in->enabled;
    auth_log_mode(a, &in->t, in->enabled, "reloaded: ");
    a->post(a->post_arg, auth_install_run, in);
}

static void *
auth_watch_main(void *arg)
{
    auth *a = arg;

    pthread_mutex_lock(&a->wmtx);
    while (!a->wstop) {
        bool forced;

        if (!a->wkick) {
            struct timespec dl = duration_deadline(AUTH_RECHECK_MS);
            pthread_cond_timedwait(&a->wcv, &a->wmtx, &dl);
        }
        if (a->wstop) {
            break;
        }
        forced = a->wkick;
        a->wkick = false;
        pthread_mutex_unlock(&a->wmtx);
        auth_watch_pass(a, forced);
        pthread_mutex_lock(&a->wmtx);
    }
    pthread_mutex_unlock(&a->wmtx);
    return NULL;
}

int
auth_watch_start(auth *a, auth_post_fn post, void *post_arg)
{
    int rv;

    a->post = post;
    a->post_arg = post_arg;
    a->wstop = false;
    if ((rv = pthread_create(&a->wthread, NULL, auth_watch_main, a)) != 0) {
        return rv;
    }
    a->wstarted = true;
    return 0;
}

void
auth_watch_stop(auth *a)
{
    if (a == NULL || !a->wstarted) {
        return;
    }
    pthread_mutex_lock(&a->wmtx);
    a->wstop = true;
    pthread_cond_signal(&a->wcv);
    pthread_mutex_unlock(&a->wmtx);
    pthread_join(a->wthread, NULL);
    a->wstarted = false;
}

void
auth_request_reload(auth *a)
{
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->wmtx);
    a->wkick = true;
    pthread_cond_signal(&a->wcv);
    pthread_mutex_unlock(&a->wmtx);
}
