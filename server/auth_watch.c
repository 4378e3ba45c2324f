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
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"
#include "server/auth_impl.h"
#include "base/log.h"
#include "base/periodic.h"

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
    if (auth_keyring_publish(a) != 0) {
        log_warn("out of memory copying the keys for the verifier: the "
                 "executor checks every tag itself until the next reload");
    }
    free(in);
}

/* Re-reads both files (forced by auth_request_reload, or when a stat shows
 * a change) and hands the result to the executor. Watcher thread, every
 * AUTH_RECHECK_MS. */
static void
auth_watch_pass(void *arg, unsigned why)
{
    auth *a = arg;
    bool forced = (why & PERIODIC_WOKEN) != 0;
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

int
auth_watch_start(auth *a, auth_post_fn post, void *post_arg)
{
    a->post = post;
    a->post_arg = post_arg;
    return periodic_start(&a->watch, auth_watch_pass, a, AUTH_RECHECK_MS, 0);
}

void
auth_watch_stop(auth *a)
{
    if (a != NULL) {
        periodic_stop(&a->watch);
    }
}

void
auth_request_reload(auth *a)
{
    if (a == NULL || a->watch == NULL) {
        return;
    }
    periodic_wakeup(a->watch);
}
