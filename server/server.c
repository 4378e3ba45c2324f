/*
 * server.c — wiring the store, the executor and the listener together, and
 * taking them down in the order that keeps every commit: stop the network,
 * execute what was already received and sync it, close.
 */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "server/auth.h"
#include "server/executor.h"
#include "server/http_srv.h"
#include "gc/gc.h"
#include "lease/lease.h"
#include "server/listener.h"
#include "server/stop_watch.h"
#include "server/test_seams.h"
#include "server/verify.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/trust.h"

/* Descriptors kept for the store, the listeners and the metrics endpoint
 * when --conn-max is fitted under the open-file limit. */
#define SERVER_FDS_SPARE 128

_Static_assert(SERVER_LISTEN_MAX == LISTENER_URLS_MAX,
               "server_config.listen and listener_config.listen differ");

/* What to do about a LevelDB that cannot be opened, from its error: only
 * a lock held suggests another onced, only EACCES the permissions. */
static const char *
server_open_hint(const char *err)
{
    if (err == NULL) {
        return "";
    }
    if (strstr(err, "No space left") != NULL) {
        return " (the disk is full: free space on it, then start onced "
               "again)";
    }
    if (strstr(err, "lock") != NULL &&
        strstr(err, "temporarily unavailable") != NULL) {
        return " (another onced is using this folder: stop it, or give this "
               "one another --data)";
    }
    if (strstr(err, "Permission denied") != NULL) {
        return " (onced's user may not write there: check the folder's "
               "owner and permissions)";
    }
    return "";
}

/* The executor's settings out of the server's configuration. */
static void
server_exec_config(const server_config *cfg, exec_config *x)
{
    x->data_dir = cfg->data_dir;
    x->window = cfg->window;
    x->lease_ttl_ms = cfg->lease_ttl_ms;
    x->lease_ttl_max_ms = cfg->lease_ttl_max_ms;
    x->lease_max = cfg->lease_max;
    x->lease_max_principal = cfg->lease_max_principal;
    x->recv_max = cfg->recv_max;
    x->kv = cfg->kv;
    x->outbox = cfg->outbox;
    x->park_max = cfg->contexts / 2;
}

/* --conn-max and --http-conn-max (*http, 0 without an HTTP listener),
 * lowered to what the descriptor limit leaves after SERVER_FDS_SPARE for
 * the store and the listeners: HTTP takes at most half of that room
 * (less the connections it answers 503 at once) and the nng listener the
 * rest, so a flood of HTTP peers never takes the descriptors an nng
 * client needs (a connection past the limit would fail every accept,
 * and with it every new client). Returns the nng listener's cap. */
static size_t
server_conn_max(size_t want, size_t *http)
{
    struct rlimit rl;
    size_t room, http_room;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur < 2 * SERVER_FDS_SPARE) {
        return want;
    }
    room = (size_t)rl.rlim_cur - SERVER_FDS_SPARE;
    http_room =
        room / 2 > 2 * HTTP_SRV_REFUSING ? room / 2 - 2 * HTTP_SRV_REFUSING : 1;
    if (*http > http_room) {
        log_warn("--http-conn-max %zu is above what the open-file limit "
                 "(%llu) leaves for HTTP connections; using %zu (raise the "
                 "limit, e.g. LimitNOFILE=, to allow more)",
                 *http, (unsigned long long)rl.rlim_cur, http_room);
        *http = http_room;
    }
    if (*http > 0) {
        room -= *http + 2 * HTTP_SRV_REFUSING;
    }
    if (want > room) {
        log_warn("--conn-max %zu is above what the open-file limit (%llu) "
                 "leaves for connections; using %zu (raise the limit, e.g. "
                 "LimitNOFILE=, to allow more)",
                 want, (unsigned long long)rl.rlim_cur, room);
        return room;
    }
    return want;
}

/* The listener's settings out of the server's configuration. */
static void
server_listener_config(server_config *cfg, listener_config *l)
{
    memset(l, 0, sizeof(*l));
    for (size_t i = 0; i < cfg->nlisten; i++) {
        l->listen[i] = cfg->listen[i];
    }
    l->nlisten = cfg->nlisten;
    l->contexts = cfg->contexts;
    l->recv_max = cfg->recv_max;
    l->tls_cert = cfg->tls_cert;
    l->tls_key = cfg->tls_key;
    l->listen_check_ms = cfg->listen_check_ms;
    l->conn_inflight = cfg->conn_inflight;
    l->send_timeout_ms = cfg->send_timeout_ms;
    l->conn_max = server_conn_max(cfg->conn_max, &cfg->http_conn_max);
    l->conn_max_per_peer = cfg->conn_max_per_peer;
    l->conn_idle_ms = cfg->conn_idle_ms;
}

int
server_open(server **sp, const server_config *cfg)
{
    server *s;
    exec_env *env;
    char *err = NULL;
    uint64_t nrec = 0, nbytes = 0;
    size_t nleases;
    listener_config lc;
    gc_config gcc;
    int rv;

    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return ENOMEM;
    }
    s->cfg = *cfg;
    env = &s->env;
    /* The wall clock; onced_test's may be shifted (test_seams.h). */
    env->now_ms = TEST_SEAMS_CLOCK(clock_wall_ms);
    env->stats = &s->stats;
    env->disk = &s->disk;
    server_exec_config(cfg, &env->cfg);
    {
        /* The folder holds the principals and policy: checked like them,
         * before anything in it is opened (a missing one is created by
         * store_open, mode 0700). */
        char terr[1024] = "";

        if ((rv = trust_dir(cfg->data_dir, terr, sizeof(terr))) != 0 &&
            rv != ENOENT) {
            log_error("%s", terr);
            free(s);
            return rv;
        }
    }
    if ((rv = store_open(&env->st, cfg->data_dir, &err)) != 0) {
        if (rv == EIO) { /* LevelDB's own error: hint what its text says */
            log_error("cannot open the LevelDB in %s: %s%s", cfg->data_dir,
                      err != NULL ? err : "error", server_open_hint(err));
        } else { /* datadir.c's refusal says what and what to do */
            log_error("%s", err != NULL ? err : strerror(rv));
        }
        free(err);
        free(s);
        return rv;
    }
    disk_floor_init(&s->disk, cfg->data_dir, cfg->disk_free_min);
    if (cfg->append_fn != NULL) {
        store_set_appender(env->st, cfg->append_fn, cfg->append_arg);
        store_set_log_durable(env->st);
    } else if ((rv = store_commits_verify(env->st, &err)) != 0) {
        log_error("%s", err != NULL ? err : strerror(rv));
        free(err);
        goto fail;
    }
    if ((rv = auth_open(&env->auth, cfg->data_dir, cfg->dev)) != 0) {
        goto fail;
    }
    if ((rv = lease_table_alloc(&env->leases)) != 0 ||
        (rv = lease_load(env->leases, env->st, env->now_ms(), &nrec,
                         &nbytes)) != 0) {
        log_error("cannot load the leases and records in %s%s", cfg->data_dir,
                  rv == EBADMSG ? ": they are damaged (see the LevelDB line "
                                  "above). onced will not serve from damaged "
                                  "leases or records; restore the whole "
                                  "folder from a backup"
                                : "");
        goto fail;
    }
    /* The table belongs to the executor from the moment it starts. */
    nleases = lease_table_count(env->leases);
    if ((rv = executor_open(&s->ex, env)) != 0) {
        log_error("cannot start the executor (error %d)", rv);
        goto fail;
    }
    /* The principals and policy are re-read off the request path from
     * now on, new tables reaching the executor as tasks. */
    if ((rv = auth_watch_start(env->auth, executor_post, s->ex)) != 0) {
        log_error("cannot start the principals watcher thread");
        goto fail;
    }
    gcc.interval_ms = cfg->gc_interval_ms;
    gcc.budget = cfg->gc_budget;
    gcc.compact_after = cfg->compact_after;
    if ((rv = gc_open(&env->gc, env->st, env->leases, env->now_ms,
                      executor_post, s->ex, &gcc)) != 0) {
        log_error("cannot start the collector thread");
        goto fail;
    }
    server_listener_config(&s->cfg, &lc);
    if ((rv = verifier_open(&s->vf, env->auth, &s->stats, executor_submit,
                            s->ex)) != 0) {
        log_error("cannot start the verifier thread");
        goto fail;
    }
    if ((rv = listener_open(&s->ls, &lc, verifier_submit, s->vf, &s->stats)) !=
        0) {
        goto fail;
    }
    verifier_set_listener(s->vf, s->ls);
    log_info("data %s: %llu completion records (%llu bytes), %zu leases "
             "(live ones get a fresh TTL after a restart)",
             cfg->data_dir, (unsigned long long)nrec,
             (unsigned long long)nbytes, nleases);
    *sp = s;
    return 0;
fail:
    gc_close(env->gc);
    auth_watch_stop(env->auth);
    verifier_close(s->vf);
    executor_close(s->ex);
    store_close(env->st);
    lease_table_free(env->leases);
    auth_close(env->auth);
    free(s);
    return rv != 0 ? rv : EIO;
}

void
server_close(server *s)
{
    if (s == NULL) {
        return;
    }
    stop_watch_step("the collector's pass in flight");
    gc_stop(s->env.gc); /* a pass in flight finishes first */
    stop_watch_step("the principals file watch");
    auth_watch_stop(s->env.auth); /* posts nothing after this */
    listener_shutdown(s->ls);     /* names its own steps */
    stop_watch_step("the verifier to hand on the calls it holds");
    verifier_close(s->vf); /* hands what it holds to the executor */
    stop_watch_step("the executor's last calls and their sync");
    executor_close(s->ex); /* closes the services after the last call */
    gc_close(s->env.gc);   /* after the last Admin.Stats that reads it */
    stop_watch_step("the store's close (LevelDB)");
    store_close(s->env.st);
    stop_watch_step("the listener's contexts to be freed");
    listener_free(s->ls);
    lease_table_free(s->env.leases);
    auth_close(s->env.auth);
    free(s);
}

/* The reloadable settings, carried to the executor thread (the only one
 * that reads env.cfg). */
typedef struct server_limits {
    exec_env *env;
    uint64_t window;
    uint64_t lease_ttl_ms;
    uint64_t lease_ttl_max_ms;
} server_limits;

static void
server_limits_apply(void *arg)
{
    server_limits *t = arg;

    t->env->cfg.window = t->window;
    t->env->cfg.lease_ttl_ms = t->lease_ttl_ms;
    t->env->cfg.lease_ttl_max_ms = t->lease_ttl_max_ms;
    log_info("SIGHUP: window %llu, lease-ttl %llums, lease-ttl-max %llums "
             "in force",
             (unsigned long long)t->window, (unsigned long long)t->lease_ttl_ms,
             (unsigned long long)t->lease_ttl_max_ms);
    free(t);
}

void
server_reload_auth(server *s)
{
    auth_request_reload(s->env.auth);
}

void
server_set_limits(server *s, const server_config *cfg)
{
    server_limits *t;

    if ((t = malloc(sizeof(*t))) == NULL) {
        log_error("SIGHUP: out of memory; the window and TTLs in force "
                  "stay");
        return;
    }
    t->env = &s->env;
    t->window = cfg->window;
    t->lease_ttl_ms = cfg->lease_ttl_ms;
    t->lease_ttl_max_ms = cfg->lease_ttl_max_ms;
    executor_post(s->ex, server_limits_apply, t);
}
