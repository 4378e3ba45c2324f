/*
 * rules.h — the rules of start grants (docs/grants.md), as functions
 * over one store_txn.
 *
 * Owns every decision: one open grant per surface (the surface index
 * g/s/<surface>, staged in the same transaction as the grant), the
 * (request_id, attempt) lock row, the digest check, the placement
 * generation check, attempt n+1 only after a retryable close, the queue
 * (destination written at Enqueue, Claim only for that machine, 12-hour
 * expiry on the machine's next claim, in-place replacement), the legacy
 * path on the same surface lock, deletions that keep open grants, and the
 * recorded rejections.
 *
 * Where each rule lives: checks.c (request checks), placement.c
 * (SetPlacement), start.c (RequestGrant and grants_start, step by step),
 * replay.c (replays that mint afresh), lifecycle.c (RenewCredential,
 * FinishGrant, CancelGrant), legacy.c, permissions.c, surface.c
 * (GetSurface), queue.c (Enqueue, Claim, deletions, ListQueue),
 * list_surfaces.c (ListSurfaces), list_machines.c (ListMachines), their
 * shared pages in list_pages.c, rejections.c (the surface's rejection
 * log), issue.c (the credential a grant may carry now), outcome.c; the
 * rows they share and the row macros are in rules_impl.h (grant_rows.c).
 *
 * Concurrency: none here. onced's executor runs one call at a time, so
 * "lock (request_id, attempt) first, then look" is the order of the reads
 * in grants_request: nothing else runs between them and the staged writes.
 * The lock is also explicit in LevelDB (g/r/...), written atomically with
 * the grant, so the rule does not depend on that single thread for
 * durability — only for mutual exclusion.
 *
 * Outcomes: every function fills a grants_outcome. code OK: the response
 * is packed into *resp. A business rejection (code != OK) stages nothing
 * but, when keep is set, the surface's rejection log entry — the handler
 * commits exactly that. err != 0: a store error; nothing must be kept.
 * Never: deletes a grant row or the surface mark of an open grant; moves a
 * grant or a queue row to another machine; decides by silence or by a
 * credential's expiry.
 */
#ifndef GRANTS_RULES_H
#define GRANTS_RULES_H

#include "outbox/outbox.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grants/credential.h"
#include "proto/grants.pb-c.h"
#include "proto/once.pb-c.h"
#include "store/store.h"
#include "proto/wire.h"

/* A pending queue row older than this expires on its machine's next
 * claim. */
#define GRANTS_PENDING_MAX_MS      (12ull * 3600 * 1000)
#define GRANTS_CRED_TTL_DEFAULT_MS 60000ull
#define GRANTS_CRED_TTL_MAX_MS     3600000ull
#define GRANTS_NAME_MAX            256
#define GRANTS_LOCATION_MAX        1024
#define GRANTS_HISTORY_MAX         64
#define GRANTS_REJECTIONS_MAX      64
#define GRANTS_EXPIRED_MAX         256
/* ListSurfaces and ListMachines: a page's default and largest size, the
 * rejections shown per surface, and how many names per page size one page
 * looks at under each of its prefixes at most. */
#define GRANTS_LIST_PAGE_DEFAULT    20
#define GRANTS_LIST_PAGE_MAX        100
#define GRANTS_LIST_LAST_REJECTIONS 5
#define GRANTS_LIST_SCAN_PER_PAGE   4

typedef struct grants_env {
    store_txn *txn;
    uint64_t now_ms;
    const char *principal; /* the caller's lease principal ("" if none) */
    const grants_signer *signer;
    const char *machine; /* the caller acts for this machine only (an
                            agent principal, server/auth.h); NULL: any */
    bool read_only;      /* a replay: refusals are not logged either */
} grants_env;

typedef struct grants_outcome {
    int code; /* once.v1.Code */
    char reason[64];
    char message[256];
    bool keep;     /* a recorded rejection: commit what was staged */
    int err;       /* a store error (errno): commit nothing, say nothing */
    uint8_t *resp; /* packed response on OK (malloc'd; the caller frees) */
    size_t resp_len;
} grants_outcome;

/* checks.c: request checks that need no state (names, lengths, enums). Returns
 * true when the request may run; otherwise o says why (INVALID_ARGUMENT). */
bool grants_check_placement(const Once__V1__SetPlacementRequest *r,
                            grants_outcome *o);
bool grants_check_request(const Once__V1__RequestGrantRequest *r,
                          grants_outcome *o);
bool grants_check_enqueue(const Once__V1__EnqueueRequest *r, grants_outcome *o);
bool grants_check_finish(const Once__V1__FinishGrantRequest *r,
                         grants_outcome *o);
bool grants_check_name(const char *what, const char *s, grants_outcome *o);

/* The methods of once.v1.Grants (placement.c, start.c, lifecycle.c,
 * legacy.c, permissions.c, surface.c). */
void grants_set_placement(const grants_env *e,
                          const Once__V1__SetPlacementRequest *r,
                          grants_outcome *o);
void grants_request(const grants_env *e, const Once__V1__RequestGrantRequest *r,
                    grants_outcome *o);
void grants_renew(const grants_env *e,
                  const Once__V1__RenewCredentialRequest *r, grants_outcome *o);
void grants_finish(const grants_env *e, const Once__V1__FinishGrantRequest *r,
                   grants_outcome *o);
void grants_cancel(const grants_env *e, const Once__V1__CancelGrantRequest *r,
                   grants_outcome *o);
void grants_legacy_claim(const grants_env *e,
                         const Once__V1__LegacyClaimRequest *r,
                         grants_outcome *o);
void grants_legacy_release(const grants_env *e,
                           const Once__V1__LegacyReleaseRequest *r,
                           grants_outcome *o);
void grants_set_permission(const grants_env *e,
                           const Once__V1__SetPermissionRequest *r,
                           grants_outcome *o);
void grants_get_surface(const grants_env *e,
                        const Once__V1__GetSurfaceRequest *r,
                        grants_outcome *o);

/*
 * replay.c: replays of a recorded OK result whose reply carries credentials
 * (docs/spec.md, docs/grants.md: each accept, first or retried, mints a fresh
 * credential after re-evaluating permission; a stored record never stands in
 * for a permission since withdrawn). stored/len: the recorded reply. On OK,
 * o->resp is that reply with every credential minted afresh, or withheld
 * with its reason when the grant can no longer start; a principal denied
 * since fails o with PERMISSION_DENIED/PRINCIPAL_DENIED. Reads only:
 * stages nothing. RenewCredential needs no replay of its own: grants_renew
 * only reads, so it is run again.
 */
void grants_replay_request(const grants_env *e,
                           const Once__V1__RequestGrantRequest *r,
                           const uint8_t *stored, size_t len,
                           grants_outcome *o);
void grants_replay_claim(const grants_env *e, const Once__V1__ClaimRequest *r,
                         const uint8_t *stored, size_t len, grants_outcome *o);

/* list_surfaces.c: ListSurfaces, a read. The check refuses a page_size
 * above GRANTS_LIST_PAGE_MAX (BAD_LIMIT) and a page_token no page returned
 * (BAD_PAGE_TOKEN), and puts the surface the token names in after ("" for
 * the first page). */
bool grants_check_list_surfaces(const Once__V1__ListSurfacesRequest *r,
                                char after[GRANTS_NAME_MAX + 1],
                                grants_outcome *o);
void grants_list_surfaces(const grants_env *e,
                          const Once__V1__ListSurfacesRequest *r,
                          grants_outcome *o);

/* list_machines.c: ListMachines, a read, with the same check and bounds
 * as ListSurfaces (its tokens: "lm1."; the token names a machine). */
bool grants_check_list_machines(const Once__V1__ListMachinesRequest *r,
                                char after[GRANTS_NAME_MAX + 1],
                                grants_outcome *o);
void grants_list_machines(const grants_env *e,
                          const Once__V1__ListMachinesRequest *r,
                          grants_outcome *o);

/* queue.c: the work queue. */
void grants_enqueue(const grants_env *e, const Once__V1__EnqueueRequest *r,
                    grants_outcome *o);
void grants_claim(const grants_env *e, const Once__V1__ClaimRequest *r,
                  grants_outcome *o);
void grants_delete_machine(const grants_env *e,
                           const Once__V1__DeleteMachineRequest *r,
                           grants_outcome *o);
void grants_delete_work(const grants_env *e,
                        const Once__V1__DeleteWorkRequest *r,
                        grants_outcome *o);
void grants_list_queue(const grants_env *e, const Once__V1__ListQueueRequest *r,
                       grants_outcome *o);

/* ---- shared by start.c and queue.c --------------------------------------- */

/* The decision of one start, for RequestGrant and for each claimed row.
 * On OK *grantp (unpacked, free_unpacked) and *credp (may be NULL when
 * withheld; free with grants_credential_free) are set. */
void grants_start(const grants_env *e, const Once__V1__RequestGrantRequest *r,
                  const char *via, Once__V1__Grant **grantp,
                  Once__V1__Credential **credp, bool *existing, char *withheld,
                  size_t withheld_len, grants_outcome *o);

/* Step 1 of grants_start alone, for Enqueue: 1 when (request_id, attempt)
 * is unused; 0 with *grant_id when it was accepted for the same content; 0
 * with o refused (GRANT_CONFLICT, logged on the surface) when for other
 * content; else a store error. Mints nothing. */
int grants_start_lock(const grants_env *e,
                      const Once__V1__RequestGrantRequest *r, const char *via,
                      uint64_t *grant_id, grants_outcome *o);

void grants_credential_free(Once__V1__Credential *c);

void grants_fail(grants_outcome *o, int code, const char *reason,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Packs m as o's OK response. */
void grants_ok(grants_outcome *o, const ProtobufCMessage *m);

/* The end of a handler that jumps to its err label on a failed step:
 * o->err = rv when rv is not 0, else m as o's OK response (grants_ok). */
void grants_end(grants_outcome *o, int rv, const ProtobufCMessage *m);

/* events.c: after method's rule succeeded with the packed reply resp,
 * appends its lifecycle events to the outbox's system topic in txn (none
 * for methods without any). 0 or a store error; a refusal (OUTBOX_FULL)
 * in o, and then the call must be refused with nothing kept. */
int grants_emit(store_txn *txn, const outbox_limits *l, outbox_producer *p,
                const char *method, const uint8_t *resp, size_t len,
                outbox_outcome *o);

#endif /* GRANTS_RULES_H */
