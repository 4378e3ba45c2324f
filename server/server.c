/*
 * server.c — wiring the store, the executor and the listener together, and
 * taking them down in the order that keeps every commit: stop the network,
 * execute what was already received and sync it, close.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "auth.h"
#include "executor.h"
#include "gc.h"
#include "lease.h"
#include "listener.h"
#include "log.h"
#include "svc_grants.h"
#include "trust.h"

static uint64_t
server_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

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

int
server_open(server **sp, const server_config *cfg)
{
    server *s;
    char *err = NULL;
    uint64_t nrec = 0, nbytes = 0;
    size_t nleases;
    gc_config gcc;
    int rv;

    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return ENOMEM;
    }
    s->cfg = *cfg;
    s->now_ms = cfg->clock_ms != NULL ? cfg->clock_ms : server_wall_ms;
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
    if ((rv = store_open(&s->st, cfg->data_dir, &err)) != 0) {
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
    if (cfg->compact_hold_ms > 0) {
        store_compact_hold(s->st, cfg->compact_hold_ms);
    }
    if (cfg->append_fn != NULL) {
        store_set_appender(s->st, cfg->append_fn, cfg->append_arg);
    }
    if ((rv = svc_grants_open(s)) != 0 ||
        (rv = auth_open(&s->auth, cfg->data_dir, cfg->dev)) != 0) {
        goto fail;
    }
    if ((rv = lease_table_alloc(&s->leases)) != 0 ||
        (rv = lease_load(s->leases, s->st, s->now_ms(), &nrec, &nbytes)) != 0) {
        log_error("cannot load the leases and records in %s%s", cfg->data_dir,
                  rv == EBADMSG ? ": they are damaged (see the LevelDB line "
                                  "above). onced will not serve from damaged "
                                  "leases or records; restore the whole "
                                  "folder from a backup"
                                : "");
        goto fail;
    }
    /* The table belongs to the executor from the moment it starts. */
    nleases = lease_table_count(s->leases);
    if ((rv = executor_open(&s->ex, s)) != 0) {
        log_error("cannot start the executor thread");
        goto fail;
    }
    gcc.interval_ms = cfg->gc_interval_ms;
    gcc.budget = cfg->gc_budget;
    if ((rv = gc_open(&s->gc, s->st, s->leases, s->now_ms, executor_post, s->ex,
                      &gcc)) != 0) {
        log_error("cannot start the collector thread");
        goto fail;
    }
    if ((rv = listener_open(&s->ls, cfg, executor_submit, s->ex,
                            &s->stats)) != 0) {
        goto fail;
    }
    log_info("data %s: %llu completion records (%llu bytes), %zu leases "
             "(live ones get a fresh TTL after a restart)",
             cfg->data_dir, (unsigned long long)nrec,
             (unsigned long long)nbytes, nleases);
    *sp = s;
    return 0;
fail:
    gc_close(s->gc);
    executor_close(s->ex);
    store_close(s->st);
    lease_table_free(s->leases);
    svc_grants_close(s);
    auth_close(s->auth);
    free(s);
    return rv != 0 ? rv : EIO;
}

void
server_close(server *s)
{
    if (s == NULL) {
        return;
    }
    gc_close(s->gc); /* a pass in flight finishes first */
    listener_shutdown(s->ls);
    executor_close(s->ex);
    store_close(s->st);
    listener_free(s->ls);
    lease_table_free(s->leases);
    svc_grants_close(s);
    auth_close(s->auth);
    free(s);
}
