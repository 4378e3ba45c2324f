/*
 * server.c — wiring the store, the executor and the listener together, and
 * taking them down in the order that keeps every commit: stop the network,
 * execute what was already received and sync it, close.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include "auth.h"
#include "executor.h"
#include "fault.h"
#include "gc.h"
#include "lease.h"
#include "listener.h"
#include "log.h"
#include "svc_grants.h"

static uint64_t
server_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/*
 * A test-only clock: when onced starts with ONCED_CLOCK_OFFSET_FILE set,
 * the wall clock is shifted by the signed number of milliseconds in that
 * file, read on every reading (so a test can move time forward — e.g. past
 * the 12-hour queue expiry — while onced runs). Unset, the clock is the
 * plain wall clock and the file is never looked at.
 */
static const char *server_clock_file;

static uint64_t
server_offset_ms(void)
{
    FILE *f = fopen(server_clock_file, "r");
    long long off = 0;

    if (f != NULL) {
        if (fscanf(f, "%lld", &off) != 1) {
            off = 0;
        }
        fclose(f);
    }
    return server_wall_ms() + (uint64_t)off;
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
    s->now_ms = server_wall_ms;
    if ((server_clock_file = getenv("ONCED_CLOCK_OFFSET_FILE")) != NULL &&
        server_clock_file[0] != '\0') {
        s->now_ms = server_offset_ms;
        log_info("test clock: offset read from %s", server_clock_file);
    }
    fault_init();
    if ((rv = store_open(&s->st, cfg->data_dir, &err)) != 0) {
        log_error("cannot open the LevelDB in %s: %s (is another onced using "
                  "it? check the folder's permissions)",
                  cfg->data_dir, err != NULL ? err : "error");
        free(err);
        free(s);
        return rv;
    }
    if ((rv = svc_grants_open(s)) != 0 ||
        (rv = auth_open(&s->auth, cfg->data_dir, cfg->dev)) != 0) {
        goto fail;
    }
    if ((rv = lease_table_alloc(&s->leases)) != 0 ||
        (rv = lease_load(s->leases, s->st, s->now_ms(), &nrec, &nbytes)) != 0) {
        log_error("cannot load the leases and records in %s", cfg->data_dir);
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
                            &s->stats.listener_restarts)) != 0) {
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
