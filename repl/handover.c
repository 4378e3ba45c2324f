/*
 * handover.c — a follower that wins the election leads from a fresh
 * process: it re-executes onced with its lease in the environment, and the
 * new process takes the lease back before it serves.
 *
 * Why: leading needs the follower's listen URLs, so the follower's answering
 * socket (notleader.c) must be gone first, and nng 1.5.2's nng_close can
 * wait forever for a pipe it never releases (seen here: a winner stuck in
 * notleader_close with its leader key alive, so nobody served until the
 * process was killed). At exec the kernel closes every descriptor, as it
 * does for a step-down; nothing of nng's is left to wait for.
 *
 * Owns: the variable REPL_HANDOVER_ENV (given to the new process only;
 * read and removed by it before it starts any thread).
 * Invariant: the new process leads only if etcd renews the lease and the
 * leader key is still ours (the same lease, created at the same revision,
 * naming our advertised URL); its local deadline starts from that renewal,
 * so it is never later than the old process's would have been.
 * Never: serves or appends before repl_handover_take said yes; trusts the
 * variable beyond what etcd confirms.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "store/fault.h"

#define REPL_HANDOVER_ENV "ONCE_REPL_HANDOVER"

void
repl_handover_exec(repl *r)
{
    char v[96];

    /* Not setenv: other threads (libcurl's) may read the environment
     * meanwhile; the variable goes into the new process's only. */
    snprintf(v, sizeof(v), REPL_HANDOVER_ENV "=%" PRId64 ":%" PRId64, r->lease,
             r->leader_rev);
    log_info("repl: won the election: re-executing to lead from a fresh "
             "process (the follower's sockets close with this one)");
    repl_reexec(r, v);
}

int
repl_handover_take(repl *r, bool *ours)
{
    const char *v = getenv(REPL_HANDOVER_ENV);
    int64_t lease = 0, rev = 0, ttl = 0;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    uint64_t sent;
    int rv;

    *ours = false;
    if (v == NULL) {
        return 0;
    }
    if (sscanf(v, "%" SCNd64 ":%" SCNd64, &lease, &rev) != 2 || lease == 0 ||
        rev <= 0) {
        log_warn("repl: ignoring %s=\"%s\" (not LEASE:REVISION)",
                 REPL_HANDOVER_ENV, v);
        lease = 0;
    }
    unsetenv(REPL_HANDOVER_ENV); /* v is gone now; a step-down starts afresh */
    if (lease == 0) {
        return 0;
    }
    sent = clock_now_ms();
    if ((rv = etcd_lease_keepalive(r->ka, lease, &ttl)) != 0) {
        log_warn("repl: the lease won before the re-exec is %s; following",
                 rv == ENOENT ? "gone" : etcd_last_error(r->ka));
        return 0;
    }
    if ((rv = etcd_range(r->kv, r->leader_key, strlen(r->leader_key), NULL, 0,
                         1, &kvs, &n, NULL, NULL)) != 0) {
        log_warn("repl: cannot read the leader key after the re-exec (%s); "
                 "following",
                 etcd_last_error(r->kv));
        return 0;
    }
    *ours = n == 1 && kvs[0].lease == lease && kvs[0].create_rev == rev &&
            kvs[0].vlen == strlen(r->cfg.advertise) &&
            memcmp(kvs[0].val, r->cfg.advertise, kvs[0].vlen) == 0;
    etcd_kvs_free(kvs, n);
    if (!*ours) {
        log_warn("repl: the leader key is no longer ours after the "
                 "re-exec; following");
        (void)etcd_lease_revoke(r->kv, lease);
        return 0;
    }
    r->lease = lease;
    r->leader_rev = rev;
    if ((rv = repl_keepalive_start(r, sent)) != 0) {
        *ours = false;
        r->lease = 0;
        (void)etcd_lease_revoke(r->kv, lease);
        return rv;
    }
    FAULT_POINT(FAULT_HANDOVER_TAKEN); /* test build only */
    return 0;
}
