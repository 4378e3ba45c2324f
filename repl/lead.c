/*
 * lead.c — the leader's side: the keepalive of the leader key's lease, the
 * local lease deadline, the fenced log append, and the step-down.
 *
 * Owns: the keepalive thread and valid_until_ms; the log's next index.
 * Invariant: valid_until_ms only moves to (send time of a keepalive etcd
 * answered) + 2/3 of the TTL, so it is always before etcd could expire the
 * lease; every append is one Txn comparing our leader key's
 * create_revision and the absence of each key it writes.
 * Never: returns from repl_append without the entry being in the log under
 * our leader key; replies to anything (the gate) past valid_until_ms.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/wire.h"
#include "base/clock.h"
#include "base/log.h"
#include "store/fault.h"

extern char **environ;

void
repl_step_down(repl *r, const char *why)
{
    log_warn("repl: stepping down (%s): re-executing as a follower; "
             "calls not committed are not answered",
             why);
    repl_reexec(r, NULL);
}

void
repl_reexec(repl *r, const char *extra)
{
    size_t n = 0;
    char **envp;

    while (environ[n] != NULL) {
        n++;
    }
    if ((envp = calloc(n + 2, sizeof(*envp))) == NULL) {
        log_error("repl: cannot re-execute %s: out of memory; exiting",
                  r->self);
        _exit(3);
    }
    n = 0;
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, "ONCE_REPL_", 10) != 0) {
            envp[n++] = *e; /* the handover variable never twice */
        }
    }
    if (extra != NULL) {
        envp[n] = (char *)extra;
    }
    fflush(stderr);
    /* Every descriptor but stdio closes at exec: listeners, LevelDB's
     * files and lock, etcd connections. */
#ifdef SYS_close_range
    (void)syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
#endif
    execve(r->self, r->cfg.argv, envp);
    log_error("repl: cannot re-execute %s: %s; exiting", r->self,
              strerror(errno));
    _exit(3);
}

static void *
repl_keepalive_main(void *arg)
{
    repl *r = arg;
    uint64_t period = (uint64_t)r->cfg.ttl_s * 1000 / 4;

    while (!atomic_load(&r->stopping)) {
        uint64_t sent = clock_now_ms();
        int64_t ttl = 0;
        int rv;

        if (sent >= atomic_load(&r->valid_until_ms)) {
            repl_step_down(r, "the etcd lease was not renewed in time");
        }
        rv = etcd_lease_keepalive(r->ka, r->lease, &ttl);
        if (rv == 0) {
            uint64_t until = sent + (uint64_t)ttl * 1000 * 2 / 3;
            if (until > atomic_load(&r->valid_until_ms)) {
                atomic_store(&r->valid_until_ms, until);
            }
        } else if (rv == ENOENT) {
            repl_step_down(r, "the etcd lease expired");
        } else {
            log_error("repl: lease keepalive failed: %s",
                      etcd_last_error(r->ka));
        }
        /* Retry sooner after a failure, never past the deadline. */
        clock_sleep_ms(rv == 0 ? period : period / 4 + 1);
    }
    return NULL;
}

int
repl_keepalive_start(repl *r, uint64_t sent_ms)
{
    int rv;

    atomic_store(&r->valid_until_ms,
                 sent_ms + (uint64_t)r->cfg.ttl_s * 1000 * 2 / 3);
    if ((rv = pthread_create(&r->ka_thread, NULL, repl_keepalive_main, r)) !=
        0) {
        return rv;
    }
    r->ka_running = true;
    return 0;
}

/* Writes parts [first, first + nparts) of entry in one Txn under our
 * leader key. Returns only on success. */
static void
repl_write(repl *r, const uint8_t *entry, size_t len)
{
    size_t nparts = len == 0 ? 1 : (len + REPL_PART_MAX - 1) / REPL_PART_MAX;
    uint64_t first = r->next;
    size_t off = 0;

    /* One Txn per part: each part is under etcd's request limit. A run
     * cut short by a step-down is never applied (logkey.c). */
    for (size_t i = 0; i < nparts; i++) {
        size_t n = len - off < REPL_PART_MAX ? len - off : REPL_PART_MAX;
        char key[REPL_KEY_MAX];
        uint8_t *v = malloc(REPL_HDR_LEN + n);
        etcd_txn *t = etcd_txn_alloc();
        bool ok = false;
        int rv;

        if (v == NULL || t == NULL) {
            log_error("repl: out of memory appending");
            abort();
        }
        v[0] = nparts == 1       ? REPL_KIND_WHOLE
               : i + 1 == nparts ? REPL_KIND_LAST
                                 : REPL_KIND_PART;
        wire_put_be64(v + 1, first);
        memcpy(v + REPL_HDR_LEN, entry + off, n);
        repl_log_key(r, r->next, key, sizeof(key));
        etcd_txn_if_created(t, r->leader_key, strlen(r->leader_key),
                            r->leader_rev);
        etcd_txn_if_created(t, key, strlen(key), 0);
        etcd_txn_put(t, key, strlen(key), v, REPL_HDR_LEN + n, 0);
        rv = etcd_txn_run(r->kv, t, &ok, NULL);
        etcd_txn_free(t);
        free(v);
        if (rv != 0 || !ok) {
            char why[400];
            snprintf(why, sizeof(why), "append of log entry %" PRIu64 ": %s",
                     r->next,
                     rv != 0 ? etcd_last_error(r->kv)
                             : "refused: not the leader any more (or the "
                               "index is taken)");
            repl_step_down(r, why);
        }
        r->next++;
        off += n;
        if (i + 1 < nparts) {
            FAULT_POINT(FAULT_APPEND_PART); /* test build only */
        }
    }
}

int
repl_append(void *arg, const void *entry, size_t len, uint64_t *index)
{
    repl *r = arg;

    if (clock_now_ms() >= atomic_load(&r->valid_until_ms)) {
        repl_step_down(r, "the etcd lease deadline passed");
    }
    if (entry == NULL || len == 0) {
        *index = r->next - 1;
        return 0; /* a group without writes: may answer */
    }
    repl_write(r, entry, len);
    *index = r->next - 1;
    atomic_store(&r->last, *index); /* trim.c may delete up to it */
    return 0;
}

void
repl_close(repl *r)
{
    if (r == NULL) {
        return;
    }
    atomic_store(&r->stopping, true);
    repl_trim_stop(r);
    if (r->ka_running) {
        pthread_join(r->ka_thread, NULL);
    }
    if (etcd_lease_revoke(r->kv, r->lease) == 0) {
        log_info("repl: leadership released");
    }
    etcd_close(r->kv);
    etcd_close(r->ka);
    free(r);
}
