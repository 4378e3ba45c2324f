/*
 * call_kind.h — what kind of call the engine is asked to make: a read, or
 * a mutating call with a new or a known rpc id.
 *
 * Owns: enum call_kind, shared by the engine's face (call.h) and its
 * insides (call_impl.h) so that neither includes the other.
 * Invariant: adding a kind means teaching rpc_id_settle about it.
 * Never: includes anything.
 */
#ifndef CLIENT_CALL_KIND_H
#define CLIENT_CALL_KIND_H

/* What kind of call: read-only, or mutating with a new or a known id. */
typedef enum call_kind {
    CALL_READ,   /* not mutating: no rpc id */
    CALL_NEW,    /* a fresh seq of the handle's id, written to *id */
    CALL_RETRY,  /* exactly *id */
    CALL_EITHER, /* once_call's rule: id NULL or seq 0 is NEW, else RETRY,
                    refusing an own id whose reply was delivered */
    CALL_HELD,   /* exactly *id, as RETRY, but its seq is left incomplete
                    at the end: the caller (the journal) completes it once
                    the reply is durable, so no later call acknowledges
                    away a record whose reply could still be lost */
} call_kind;

#endif /* CLIENT_CALL_KIND_H */
