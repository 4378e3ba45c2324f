/*
 * call_impl.h — what the files of the call engine share: one call as
 * they hand it to each other, and the steps of call.c that call_group.c
 * runs too. Layers above the engine include call.h, never this.
 *
 * Owns: call_spec (what a call is about, fixed before its first attempt),
 * call_state (what its attempts have learned), call_pre (a first attempt
 * made by call_group for several calls at once) and the declarations of
 * call.c's prepare / run / conclude.
 * Invariant: a call_spec is written only while the call is prepared
 * (call_prepare, rpc_id_settle) and read-only from its first attempt on;
 * a call_state belongs to one call on one thread. The engine's files,
 * bottom up: classify (pure), envelope, exchange, coalesce, attempt,
 * rpc_id, call, call_group; each includes only those before it.
 * Never: holds a lock or an nng object; never included by conn, slot,
 * batch or lease_gate (the layers below the engine).
 */
#ifndef CLIENT_CALL_IMPL_H
#define CLIENT_CALL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "once/client.h"
#include "client/call_kind.h"
#include "proto/once.pb-c.h"

/* What one call is about; filled once, read by every attempt. */
typedef struct call_spec {
    const char *method;
    bool mutating;
    uint64_t client_id; /* 0 on non-mutating calls */
    uint64_t seq;       /* 0 on non-mutating calls */
    const void *req;
    size_t req_len;
    bool tracked; /* mutating under the handle's own lease (lease_gate.h) */
    bool held;    /* CALL_HELD: the engine never completes the seq */
} call_spec;

/* The state of one call across attempts. */
typedef struct call_state {
    uint32_t sent;           /* attempts nng accepted for sending */
    char last_err[160];      /* why the last attempt did not finish */
    bool last_unavailable;   /* the last attempt got an UNAVAILABLE reply */
    once_status unavailable; /* that reply's status */
    bool last_window_full;   /* the last attempt got WINDOW_FULL */
    once_status window_full; /* that reply's status */
    bool maybe_executed;     /* an attempt was sent and not answered, or
                                answered UNAVAILABLE: it may have run */
    uint32_t not_leader;     /* NOT_LEADER refusals in a row (followers) */
    bool lost;               /* stopped because the lease was lost */
    once_status tls;         /* a TLS verdict (conn_tls_verdict) that
                                ended the call unsent; code 0: none */
} call_state;

/* The outcome of a first attempt made elsewhere (call_group): what
 * attempt_make would have returned, and the call's state after it. */
typedef struct call_pre {
    int rv;                /* 0: r holds the reply */
    Once__V1__Response *r; /* handed over to call_run */
    call_state cst;
    uint64_t start_ms; /* clock_now_ms when the attempt began (steer.h) */
} call_pre;

/* The start of every call: arguments, the rpc id (rpc_id.h), the size
 * check. Fills cs. ONCE_OK, or the refusal (st says why; nothing was
 * sent). st is never NULL. */
int call_prepare(once_client *c, const char *method, call_kind kind,
                 once_rpc_id *id, const void *req, size_t req_len, void **resp,
                 size_t *resp_len, once_status *st, call_spec *cs,
                 bool *assigned);

/* Whether pre, a first attempt made by call_group, ends its call: a reply
 * that is final (no retry follows). */
bool call_pre_final(const call_spec *cs, const call_pre *pre);

/* The call's attempts until the absolute deadline (clock_now_ms clock):
 * attempt, decide, then final, retry, back off or give up. With pre, its
 * first attempt was made already (call_group): the loop goes on from that
 * outcome, exactly as after an attempt of its own; a final outcome takes
 * no nng context and never blocks. Returns the code; st (never NULL)
 * filled, *resp as once_call. */
int call_run(once_client *c, const call_spec *cs, uint64_t deadline,
             call_pre *pre, void **resp, size_t *resp_len, once_status *st);

/* The end of every call that call_prepare began: rv as the caller sees it
 * (a stale id of this handle said so; a fresh seq that never left
 * released). */
int call_conclude(once_client *c, const call_spec *cs, bool assigned, int rv,
                  once_status *st);

#endif /* CLIENT_CALL_IMPL_H */
