/*
 * rules_impl.h — what the files of the grant rules share and nothing
 * outside grants/ sees: the row macros, the rows every rule reads (a
 * grant, a work row, a machine's queue, the denied and deleted flags), the
 * credential an accepted grant may carry now, and the rejection log.
 *
 * Owns no state: each helper reads or stages through e->txn only.
 * Invariant: a helper that hands out a row hands out protobuf-c's unpacked
 * form, freed by the caller with ROW_FREE; store errors come back as the
 * errno of rows.h and are never turned into a business outcome here.
 * Never: commits, or decides a rule; the decisions stay in the file of
 * their method (placement.c, start.c, replay.c, lifecycle.c, legacy.c,
 * permissions.c, surface.c, queue.c, list_surfaces.c, list_machines.c).
 */
#ifndef GRANTS_RULES_IMPL_H
#define GRANTS_RULES_IMPL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grants/keys.h"
#include "grants/rows.h"
#include "grants/rows.pb-c.h"
#include "grants/rules.h"

#define CODE(x) ONCE__V1__CODE__##x

/* rows_get of a row of type lower (e.g. once__v1__grant), ENOENT when
 * absent; ROW_GET0: an absent row is the empty message. */
#define ROW_GET(t, k, lower, out)                                              \
    rows_get((t), (k), &lower##__descriptor, (ProtobufCMessage **)(out))
#define ROW_GET0(t, k, lower, out)                                             \
    rows_get_or_empty((t), (k), &lower##__descriptor,                          \
                      (ProtobufCMessage **)(out))
#define ROW_FREE(m)                                                            \
    do {                                                                       \
        if ((m) != NULL) {                                                     \
            protobuf_c_message_free_unpacked(&(m)->base, NULL);                \
        }                                                                      \
    } while (0)

/* ---- outcome.c ----------------------------------------------------------- */

/* grants_fail (rules.h) over a va_list. */
void grants_vfail(grants_outcome *o, int code, const char *reason,
                  const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* ---- grant_rows.c: the rows the rules share ------------------------------ */

/* Whether the caller's principal ("anonymous" when none) is denied
 * (SetPermission). 0 or a store error. */
int grants_principal_denied(const grants_env *e, bool *denied);

/* Whether machine was deleted (DeleteMachine, undone by a placement). */
int grants_machine_deleted(const grants_env *e, const char *machine,
                           bool *deleted);

/* g/g/<id>: 0 and *g, ENOENT, or a store error. */
int grants_grant_load(const grants_env *e, uint64_t id, Once__V1__Grant **g);
int grants_grant_store(const grants_env *e, const Once__V1__Grant *g);

/* Loads the grant a request names. Returns true with *g (freed by the
 * caller with ROW_FREE) when it exists; otherwise false with o failed
 * NOT_FOUND/NO_GRANT, or o->err set on a store error. */
bool grants_grant_named(const grants_env *e, uint64_t id, Once__V1__Grant **g,
                        grants_outcome *o);

/* g/w/<id>: 0 and *w, ENOENT, or a store error. */
int grants_work_load(const grants_env *e, uint64_t id, Once__V1__WorkRow **w);
int grants_work_store(const grants_env *e, const Once__V1__WorkRow *w);

/* g/m/<machine>, the empty queue when absent. */
int grants_machine_queue_load(const grants_env *e, const char *machine,
                              Once__Grants__V1__MachineQueue **q);
int grants_machine_queue_store(const grants_env *e, const char *machine,
                               const Once__Grants__V1__MachineQueue *q);

/* Adds id to, or drops it from, the machine's list of open grants. */
int grants_machine_open_add(const grants_env *e, const char *machine,
                            uint64_t id);
int grants_machine_open_drop(const grants_env *e, const char *machine,
                             uint64_t id);

/* ---- list_pages.c: the pages of the operator's lists --------------------- */

/* How many key prefixes one list's page may scan at most. */
#define GRANTS_LIST_PREFIXES_MAX 3

/* Refuses a page_size above GRANTS_LIST_PAGE_MAX (BAD_LIMIT) and a
 * page_token that is not tpfx ("ls1.", "lm1.") and the hex of a valid name
 * (BAD_PAGE_TOKEN); puts the name in after ("" for the first page). */
bool grants_page_check(uint32_t page_size, const char *page_token,
                       const char *tpfx, char after[GRANTS_NAME_MAX + 1],
                       grants_outcome *o);

/* A page's candidate names, sorted, each once; cut: a scan stopped at its
 * bound, so names may follow the last. */
typedef struct grants_page_names {
    char **v;
    size_t n;
    bool cut;
} grants_page_names;

/* What one list reads: its key prefixes (the candidate names are the
 * bytes after "g/?/"), its token form, and its items (item_size bytes
 * each): read fills one for a name (*listed: it belongs on the list; 0
 * or a store error), fini frees what read took (NULL: nothing). */
typedef struct grants_page_spec {
    const char *const *prefixes;
    size_t np;
    const char *tpfx;
    size_t item_size;
    int (*read)(const grants_env *e, const char *name, void *item,
                bool *listed);
    void (*fini)(void *item);
} grants_page_spec;

/* A page read: its n listed items (they may point into names), ptrs to
 * each (an item starts with its message: ptrs is the response's repeated
 * field), and the next page token (NULL: the last page). */
typedef struct grants_page {
    void *items;
    void **ptrs;
    size_t n;
    char *next;
    grants_page_names names;
} grants_page;

/* Reads the page after `after` of at most page_size items (0: the
 * default): the names under each prefix of s, at most
 * GRANTS_LIST_SCAN_PER_PAGE * page_size per prefix, merged up to the
 * first cut, read in order until the page is full. 0 or a store error;
 * free p with grants_page_free either way. */
int grants_page_read(const grants_env *e, const grants_page_spec *s,
                     const char *after, uint32_t page_size, grants_page *p);
void grants_page_free(const grants_page_spec *s, grants_page *p);

/* ---- issue.c: the credential of an accepted grant ------------------------ */

/* Mints a credential for g valid for ttl ms (0: the default) into *credp
 * (free with grants_credential_free). 0 or an error (*credp NULL). */
int grants_issue(const grants_env *e, const Once__V1__Grant *g, uint64_t ttl,
                 Once__V1__Credential **credp);

/*
 * The credential accepted grant g may carry now: minted afresh into *credp
 * (ttl 0: the default), or withheld, with the reason in withheld, when the
 * grant is closed or cancelled, its machine deleted or its surface placed
 * again. A mint failure fails o (MINT_FAILED). The caller has checked the
 * principal's permission. Reads only. Returns a store error or 0.
 */
int grants_credential_now(const grants_env *e, const Once__V1__Grant *g,
                          uint64_t ttl, Once__V1__Credential **credp,
                          char *withheld, size_t withheld_len,
                          grants_outcome *o);

/* ---- rejections.c ---------------------------------------------------------
 */

/* Fails o with code, reason and the message, appends the rejection to the
 * surface's log (a repeat of the last one counts up instead) and marks the
 * outcome kept, so the reason is on the server while the machine is
 * silent. A replay (e->read_only) logs nothing. A store error sets
 * o->err. */
void grants_reject(const grants_env *e, grants_outcome *o, const char *surface,
                   const char *request_id, uint32_t attempt,
                   const char *machine, const char *via, int code,
                   const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));

#endif /* GRANTS_RULES_IMPL_H */
