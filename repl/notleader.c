/*
 * notleader.c — a follower's answer to every call: UNAVAILABLE, reason
 * NOT_LEADER and the leader's advertised URL in the message (or, with no
 * leader known, NO_LEADER / ETCD_UNAVAILABLE), on onced's own listen URLs
 * until the replica leads.
 *
 * Owns: one REP socket with its listeners and the thread that answers.
 * Invariant: nothing received is decoded or executed; every request gets
 * the same refusal, which libonce retries under the same rpc id.
 * Never: blocks a caller of notleader_set beyond a short mutex; sets a
 * receive timeout (see notleader_main).
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "proto/once.pb-c.h"
#include "proto/wire.h"
#include "proto/log.h"

struct notleader {
    nng_socket sock;
    pthread_t thread;
    pthread_mutex_t mtx; /* protects reason and message */
    char reason[32];
    char message[512];
    _Atomic bool stopping;
};

/*
 * Blocks in nng_recvmsg until notleader_close's nng_close ends it with
 * NNG_ECLOSED. No receive timeout: in nng 1.5.2 a timed-out receive is
 * cancelled by nng's expire thread, which calls the REP socket's cancel
 * function *after* dropping its own lock; if nng_close destroys the socket
 * in that window, the cancel locks a destroyed mutex and nng aborts
 * ("panic: pthread_mutex_lock: Invalid argument", seen at role changes and
 * on SIGTERM while following). Without a timeout nothing but our own close
 * cancels the receive.
 */
static void *
notleader_main(void *arg)
{
    notleader *nl = arg;

    while (!atomic_load(&nl->stopping)) {
        nng_msg *m = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        int rv;

        if ((rv = nng_recvmsg(nl->sock, &m, 0)) != 0) {
            if (rv == NNG_ECLOSED) {
                break;
            }
            continue;
        }
        nng_msg_clear(m);
        pthread_mutex_lock(&nl->mtx);
        rv = wire_response_pack(ONCE__V1__CODE__UNAVAILABLE, nl->reason,
                                nl->message, NULL, 0, false, &buf, &len);
        pthread_mutex_unlock(&nl->mtx);
        if (rv != 0 || nng_msg_append(m, buf, len) != 0 ||
            nng_sendmsg(nl->sock, m, 0) != 0) {
            nng_msg_free(m);
        }
        free(buf);
    }
    return NULL;
}

int
notleader_open(notleader **np, const char *const *urls, size_t n)
{
    notleader *nl = calloc(1, sizeof(*nl));
    int rv;

    if (nl == NULL) {
        return ENOMEM;
    }
    pthread_mutex_init(&nl->mtx, NULL);
    snprintf(nl->reason, sizeof(nl->reason), "NO_LEADER");
    snprintf(nl->message, sizeof(nl->message),
             "this replica is not the leader and none is known yet");
    if ((rv = nng_rep0_open(&nl->sock)) != 0 ||
        (rv = nng_socket_set_size(nl->sock, NNG_OPT_RECVMAXSZ, 1u << 20)) !=
            0) {
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(urls[i], "tls+", 4) == 0) {
            /* Not built: the follower's answer over TLS. Clients of that
             * URL time out and try another replica. */
            log_warn("repl: %s: followers do not answer on TLS "
                     "URLs",
                     urls[i]);
            continue;
        }
        if ((rv = nng_listen(nl->sock, urls[i], NULL, 0)) != 0) {
            log_error("repl: cannot listen on %s: %s", urls[i],
                      nng_strerror(rv));
            goto fail;
        }
    }
    if ((rv = pthread_create(&nl->thread, NULL, notleader_main, nl)) != 0) {
        goto fail;
    }
    *np = nl;
    return 0;
fail:
    nng_close(nl->sock);
    pthread_mutex_destroy(&nl->mtx);
    free(nl);
    return rv;
}

void
notleader_set(notleader *nl, const char *leader_url, const char *reason)
{
    pthread_mutex_lock(&nl->mtx);
    if (leader_url != NULL) {
        snprintf(nl->reason, sizeof(nl->reason), "NOT_LEADER");
        snprintf(nl->message, sizeof(nl->message),
                 "this replica is a follower; the leader is %s", leader_url);
    } else {
        snprintf(nl->reason, sizeof(nl->reason), "%s", reason);
        snprintf(nl->message, sizeof(nl->message),
                 "this replica is a follower and no leader is known (%s)",
                 reason);
    }
    pthread_mutex_unlock(&nl->mtx);
}

void
notleader_close(notleader *nl)
{
    if (nl == NULL) {
        return;
    }
    atomic_store(&nl->stopping, true);
    nng_close(nl->sock);
    pthread_join(nl->thread, NULL);
    pthread_mutex_destroy(&nl->mtx);
    free(nl);
}
