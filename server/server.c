/*
 * server.c — wiring the store, the executor and the listener together, and
 * taking them down in the order that keeps every commit: stop the network,
 * execute what was already received, let the committer sync it, close.
 */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/time.h>

#include "executor.h"
#include "listener.h"
#include "log.h"
#include "records.h"

static uint64_t
server_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

int
server_open(server **sp, const server_config *cfg)
{
    server *s;
    char *err = NULL;
    uint64_t nrec = 0;
    int rv;

    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return ENOMEM;
    }
    s->cfg = *cfg;
    s->now_ms = server_wall_ms;
    if ((rv = store_open(&s->st, cfg->data_dir, &err)) != 0) {
        log_error("cannot open the LevelDB in %s: %s (is another onced using "
                  "it? check the folder's permissions)",
                  cfg->data_dir, err != NULL ? err : "error");
        free(err);
        free(s);
        return rv;
    }
    if ((rv = records_count(s->st, &nrec)) != 0) {
        log_error("cannot scan the completion records in %s", cfg->data_dir);
        goto fail;
    }
    atomic_store(&s->stats.records_stored, nrec);
    if ((rv = executor_open(&s->ex, s)) != 0) {
        log_error("cannot start the executor thread");
        goto fail;
    }
    if ((rv = listener_open(&s->ls, cfg, executor_submit, s->ex)) != 0) {
        goto fail;
    }
    log_info("data %s: %llu completion records", cfg->data_dir,
             (unsigned long long)nrec);
    *sp = s;
    return 0;
fail:
    executor_close(s->ex);
    store_close(s->st);
    free(s);
    return rv != 0 ? rv : EIO;
}

void
server_close(server *s)
{
    if (s == NULL) {
        return;
    }
    listener_shutdown(s->ls);
    executor_close(s->ex);
    store_close(s->st);
    listener_free(s->ls);
    free(s);
}
