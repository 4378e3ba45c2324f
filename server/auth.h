/*
 * auth.h — who is calling, and may they (docs/spec.md "Authorization is not
 * deduplication").
 *
 * Owns: the principals table (<data>/principals: name, role, key, revoked)
 * and the policy (<data>/policy, or the built-in default: which role may
 * call which full method name), both re-read off the request path: a
 * watcher thread (auth_watch.c) stats the files every AUTH_RECHECK_MS, or
 * re-reads them at once after auth_request_reload (onced's SIGHUP),
 * parses them with the file checks of trust.h, and hands the new tables
 * to the executor as a task (auth_post_fn); the check of a
 * request's tag over the envelope bytes as received (auth_tag.h); and the
 * scoping rules the handlers ask about: a lease belongs to the principal
 * that opened it, an agent acts only for its own machine.
 * Modes: with a principals file onced authenticates every request; without
 * one it runs OPEN — no tag checked, every method allowed, no scoping, the
 * principal a request names is a label only — and says so loudly at start.
 * Once authenticating, a principals file that disappears leaves an empty
 * table (every request UNAUTHENTICATED), never OPEN again.
 * Invariant: every check runs before the completion-record lookup, on
 * every attempt, so a stored result is never returned to a principal that
 * does not own the lease or has lost the permission since.
 * Concurrency: a request only reads the tables in force, on the executor
 * thread, and never stats or parses a file; new tables are put in force by
 * a task on that thread between two calls, so an auth_who handed out stays
 * valid until the executor's next call starts. auth_request_reload,
 * auth_watch_start and auth_watch_stop are what other threads call.
 * Never: compares a tag with memcmp; logs a key; records anything.
 */
#ifndef SERVER_AUTH_H
#define SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/once.pb-c.h"

#define AUTH_RECHECK_MS 100
#define AUTH_ANONYMOUS  "anonymous"

typedef struct auth auth;
typedef struct server_call server_call;

/* The authenticated caller of one request. */
typedef struct auth_who {
    const char *name;    /* the principal */
    const char *role;    /* "operator", "scheduler", "agent", ... */
    const char *machine; /* an agent's own machine; NULL: not bound */
    bool revoked;
    bool operator_; /* role "operator": sees every lease */
    bool open;      /* onced runs OPEN: nothing was checked */
} auth_who;

/*
 * Loads <data_dir>/principals and <data_dir>/policy. With dev and no
 * principals file, first creates one holding the operator "dev" and writes
 * its key to <data_dir>/dev.key (mode 0600). Logs the mode. 0 or an errno
 * (a principals or policy file that cannot be parsed at start is fatal).
 */
int auth_open(auth **ap, const char *data_dir, bool dev);
void auth_close(auth *a);

/* How the watcher hands a task to the executor (executor_post). */
typedef void (*auth_post_fn)(void *post_arg, void (*fn)(void *), void *arg);

/* Starts the watcher: from now on new tables reach the executor through
 * post(post_arg, ...). Call once the executor runs. 0 or an errno. */
int auth_watch_start(auth *a, auth_post_fn post, void *post_arg);

/* Stops and joins the watcher (a no-op when it does not run); call before
 * the executor stops. Tables it already handed over are put in force by
 * the executor's remaining tasks. */
void auth_watch_stop(auth *a);

/* Asks the watcher to re-read both files now (any thread; not from a
 * signal handler: onced calls it from its sigwait loop). */
void auth_request_reload(auth *a);

/*
 * Authenticates the request whose envelope is the len bytes at body, before
 * it is decoded: its tag trailer (auth_tag.h) over the bytes as received,
 * with the key of the principal named by the principal_len bytes at
 * principal (envelope_scan found them). Sets c->who and returns true, or
 * sets UNAUTHENTICATED on c and returns false. Reads the tables in force
 * only. verified: the generation auth_verify passed the tag under (0:
 * none); when those tables are still in force the tag is not hashed again.
 * Executor thread.
 */
bool auth_check(auth *a, server_call *c, const uint8_t *body, size_t len,
                const uint8_t *principal, size_t principal_len,
                uint64_t verified);

/*
 * The tag check of auth_check, on any thread (the verifier's): against a
 * copy of the keys in force (auth_verify.c). True when the tag verifies,
 * or onced runs OPEN; *gen is then the generation of the tables it used.
 * Otherwise sets UNAUTHENTICATED on c as auth_check would and returns
 * false. Never looks at the policy or revocation: auth_check and
 * auth_permit still run on the executor.
 */
bool auth_verify(auth *a, server_call *c, const uint8_t *body, size_t len,
                 const uint8_t *principal, size_t principal_len, uint64_t *gen);

/* For a front door that checks its own tag before it builds the envelope
 * (http_api.h), on any thread: *enabled says whether onced authenticates
 * (false: OPEN); when it does and name (NUL-terminated) is a principal of
 * the tables in force, its key is copied to key (wipe it with
 * sodium_memzero after use) and true returned; *operator_ (unless
 * NULL) then says whether its role is "operator" (false otherwise). */
bool auth_key_copy(auth *a, const char *name, uint8_t key[32], bool *enabled,
                   bool *operator_);

/* The policy: may c->who call method (a full name)? Otherwise sets
 * PERMISSION_DENIED on c and returns false. */
bool auth_permit(const auth *a, server_call *c, const char *method);

/* May c->who read (write false) or write the klen bytes at key — a key,
 * or for a prefix op every key under that prefix (auth_kv.c)? Always in
 * OPEN mode; an operator reads every key; otherwise a kv-read/kv-write
 * rule of its role or name must cover it. Else sets
 * PERMISSION_DENIED/KV_PREFIX_DENIED on c naming what ("key", "prefix")
 * and returns false. */
bool auth_kv_permit(const auth *a, server_call *c, const uint8_t *key,
                    size_t klen, bool write, const char *what);

/* May w read (emit false: Subscribe, Read, Ack, Unsubscribe, its line in
 * Topics) or emit to topic (auth_outbox.c)? Always in OPEN mode (or w
 * NULL); an operator reads every topic; otherwise an outbox-read or
 * outbox-emit rule of its role or name must cover it ("*" covers no
 * once.* topic). Sets nothing. */
bool auth_topic_may(const auth *a, const auth_who *w, const char *topic,
                    bool emit);

/* auth_topic_may, or PERMISSION_DENIED/OUTBOX_TOPIC_DENIED on c naming
 * the topic and the rule that would allow it. */
bool auth_topic_permit(const auth *a, server_call *c, const char *topic,
                       bool emit);

/* Whether c->who owns a lease opened by principal (always in OPEN mode);
 * otherwise sets PERMISSION_DENIED/NOT_YOUR_LEASE on c. */
bool auth_owns(server_call *c, uint64_t client_id, const char *principal);

/* Whether c->who may act on the lease of client_id: always in OPEN mode;
 * authenticated, only when the lease exists (exists) and principal opened
 * it, or — with operator_sees — when c->who is an operator. Sets nothing. */
bool auth_lease_mine(const server_call *c, bool exists, const char *principal,
                     bool operator_sees);

/* auth_lease_mine, or PERMISSION_DENIED/NOT_YOUR_LEASE on c with one
 * message for another principal's id, a never-issued one and a collected
 * one (no lease oracle). */
bool auth_lease_scope(server_call *c, uint64_t client_id, bool exists,
                      const char *principal, bool operator_sees);

/* Whether c->who may act for machine (an agent only for its own); sets
 * PERMISSION_DENIED/WRONG_MACHINE on c otherwise. */
bool auth_machine(server_call *c, const char *machine);

/* The principal a new lease belongs to: the authenticated one, or in OPEN
 * mode the one the request names (a label). */
const char *auth_lease_principal(const server_call *c, const char *requested);

#endif /* SERVER_AUTH_H */
