/*
 * trim.c — the leader's trimming of the log: entries every replica has
 * applied are deleted, and etcd's history below that delete is compacted,
 * so etcd holds a bounded log instead of every commit ever made.
 *
 * Each replica publishes its applied index under
 * /once/<cluster>/applied/<its advertise URL> (follow.c). Every
 * TRIM_PERIOD_MS the leader reads them and keeps the log from
 *   keep = min(the published applied indexes of the others, last)
 * raised to last + 1 - retain when that is higher, so a replica that is
 * gone (or far behind) holds at most `retain` entries back; such a replica
 * reseeds itself from a snapshot (seed.c). The entry at `keep` itself
 * stays: a replica that applied it finds it when it restarts (the check
 * that it follows the same log). One Txn under the leader key's compare
 * puts /once/<cluster>/first = keep and deletes every log key below it;
 * then etcd is compacted at that Txn's revision.
 * Owns: the trim thread (base/periodic.h) and its etcd handle.
 * Invariant: never deletes an entry at or above min(applied of the other
 * replicas, last) unless the retain bound says so; never deletes the last
 * entry; a deposed leader's trim fails its compare.
 * Never: blocks the executor (a thread of its own); decides anything from
 * a failed read (the pass is skipped).
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/periodic.h"
#include "store/fault.h"

#define TRIM_PERIOD_MS 1000

int
repl_first_read(repl *r, etcd *e, uint64_t *first)
{
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int rv;

    *first = 1;
    if ((rv = etcd_range(e, r->first_key, strlen(r->first_key), NULL, 0, 1,
                         &kvs, &n, NULL, NULL)) != 0) {
        return rv;
    }
    if (n == 1 && repl_parse_u64(kvs[0].val, kvs[0].vlen, first) != 0) {
        rv = EPROTO;
    }
    etcd_kvs_free(kvs, n);
    return rv;
}

/* min(last, every other replica's published applied index). */
static int
trim_min_applied(repl *r, uint64_t last, uint64_t *keep)
{
    char end[REPL_KEY_MAX];
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int rv;

    *keep = last;
    snprintf(end, sizeof(end), "%s", r->applied_prefix);
    end[strlen(end) - 1]++;
    if ((rv = etcd_range(r->tr, r->applied_prefix, strlen(r->applied_prefix),
                         end, strlen(end), 0, &kvs, &n, NULL, NULL)) != 0) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (kvs[i].klen == strlen(r->applied_key) &&
            memcmp(kvs[i].key, r->applied_key, kvs[i].klen) == 0) {
            continue; /* ours, from when this replica followed */
        }
        if (repl_parse_u64(kvs[i].val, kvs[i].vlen, &v) == 0 && v < *keep) {
            *keep = v;
        }
    }
    etcd_kvs_free(kvs, n);
    return 0;
}

static void
trim_pass(repl *r, uint64_t *first)
{
    uint64_t last = atomic_load(&r->last), keep;
    char from[REPL_KEY_MAX], to[REPL_KEY_MAX], val[24];
    etcd_txn *t;
    int64_t rev = 0;
    bool ok = false;
    int rv;

    if (last == 0 || (*first == 0 && repl_first_read(r, r->tr, first) != 0) ||
        trim_min_applied(r, last, &keep) != 0) {
        return; /* nothing yet, or etcd did not answer: next pass */
    }
    if (last >= r->cfg.retain && keep < last + 1 - r->cfg.retain) {
        keep = last + 1 - r->cfg.retain;
    }
    if (keep <= *first) {
        return;
    }
    if ((t = etcd_txn_alloc()) == NULL) {
        return;
    }
    repl_log_key(r, 0, from, sizeof(from));
    repl_log_key(r, keep, to, sizeof(to));
    snprintf(val, sizeof(val), "%" PRIu64, keep);
    etcd_txn_if_created(t, r->leader_key, strlen(r->leader_key), r->leader_rev);
    etcd_txn_put(t, r->first_key, strlen(r->first_key), val, strlen(val), 0);
    etcd_txn_delete(t, from, strlen(from), to, strlen(to));
    rv = etcd_txn_run(r->tr, t, &ok, &rev);
    etcd_txn_free(t);
    if (rv != 0 || !ok) {
        /* Unknown or refused (deposed: the keepalive steps down): read
         * the first index again next time. */
        *first = 0;
        return;
    }
    FAULT_POINT(FAULT_TRIM_DELETED); /* test build only */
    if ((rv = etcd_compact(r->tr, rev)) != 0) {
        log_warn("repl: etcd compaction at revision %" PRId64 " failed: %s",
                 rev, etcd_last_error(r->tr));
    }
    log_info("repl: log trimmed: entries below %" PRIu64 " deleted (were "
             "from %" PRIu64 "), etcd compacted at revision %" PRId64,
             keep, *first, rev);
    *first = keep;
}

static void
trim_tick(void *arg, unsigned why)
{
    repl *r = arg;

    (void)why;
    trim_pass(r, &r->tr_first);
}

int
repl_trim_start(repl *r)
{
    int rv;

    atomic_store(&r->last, r->next - 1);
    r->tr_first = 0; /* not known: read it */
    if ((rv = etcd_open_tls(&r->tr, r->cfg.endpoints, &r->cfg.etcd_tls,
                            r->cfg.timeout_ms)) != 0) {
        return rv;
    }
    if ((rv = periodic_start(&r->tr_thread, trim_tick, r, TRIM_PERIOD_MS, 0)) !=
        0) {
        etcd_close(r->tr);
        r->tr = NULL;
    }
    return rv;
}

void
repl_trim_stop(repl *r)
{
    periodic_stop(&r->tr_thread);
    etcd_close(r->tr);
    r->tr = NULL;
}
