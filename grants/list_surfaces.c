/*
 * list_surfaces.c — ListSurfaces: the surfaces that need an operator's
 * eye (an open grant or a legacy holder, a pending queued row, recorded
 * rejections), in name order, a page at a time.
 *
 * Owns the page: the candidate names come from three prefix scans (g/s/,
 * g/j/, g/q/ of keys.h), each cut after a bounded number of names, merged
 * and read up to the first cut ("the horizon"), so a page never looks at
 * more than GRANTS_LIST_SCAN_PER_PAGE times page_size names per prefix;
 * and the page token: "ls1." and the hex of the last name looked at.
 * Invariant: stages nothing (a read: no rpc id, no record, no write).
 * Never: lists a surface twice across the pages of one walk; returns a
 * token that does not name a valid surface.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "proto/names.h"
#include "proto/reasons.h"
#include "grants/rules_impl.h"

#define TOKEN_PREFIX     "ls1."
#define TOKEN_PREFIX_LEN 4
#define SCAN_STOP        (-1) /* a scan callback's "enough": not an errno */

/* The surface name a page token carries into after (a C string). */
static bool
token_read(const char *token, char after[GRANTS_NAME_MAX + 1])
{
    size_t hexlen = strlen(token), n = 0, at;

    if (strncmp(token, TOKEN_PREFIX, TOKEN_PREFIX_LEN) != 0) {
        return false;
    }
    hexlen -= TOKEN_PREFIX_LEN;
    if (hexlen == 0 || hexlen % 2 != 0 || hexlen / 2 > GRANTS_NAME_MAX ||
        sodium_hex2bin((unsigned char *)after, GRANTS_NAME_MAX,
                       token + TOKEN_PREFIX_LEN, hexlen, NULL, &n, NULL) != 0 ||
        n != hexlen / 2) {
        return false;
    }
    after[n] = '\0';
    return strlen(after) == n && /* no NUL inside */
           name_check(after, GRANTS_NAME_MAX, &at) == NAME_OK;
}

bool
grants_check_list_surfaces(const Once__V1__ListSurfacesRequest *r,
                           char after[GRANTS_NAME_MAX + 1], grants_outcome *o)
{
    after[0] = '\0';
    if (r->page_size > GRANTS_LIST_PAGE_MAX) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_LIMIT,
                    "page_size is at most %d (0: %d), got %u",
                    GRANTS_LIST_PAGE_MAX, GRANTS_LIST_PAGE_DEFAULT,
                    r->page_size);
        return false;
    }
    if (r->page_token[0] != '\0' && !token_read(r->page_token, after)) {
        after[0] = '\0';
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_PAGE_TOKEN,
                    "page_token is not one a page returned: send "
                    "next_page_token back unchanged (empty: the first page)");
        return false;
    }
    return true;
}

/* ---- candidate names ----------------------------------------------------- */

typedef struct name_list {
    char **v;
    size_t n, cap; /* cap: the most names one scan takes */
    bool cut;      /* the scan stopped at cap: names may follow */
    const char *after;
} name_list;

static int
name_one(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
    name_list *l = arg;
    size_t n = klen - 4; /* "g/?/" */
    char *s;

    (void)val;
    (void)vlen;
    if (klen < 4 ||
        (strlen(l->after) == n && memcmp(key + 4, l->after, n) == 0)) {
        return 0; /* the token's own name: listed on the previous page */
    }
    if ((s = malloc(n + 1)) == NULL) {
        return ENOMEM;
    }
    memcpy(s, key + 4, n);
    s[n] = '\0';
    l->v[l->n++] = s;
    if (l->n == l->cap) {
        l->cut = true;
        return SCAN_STOP;
    }
    return 0;
}

/* The names under prefix ("g/s/") after l->after, at most l->cap. */
static int
names_scan(store_txn *t, const char *prefix, name_list *l)
{
    gkey start;
    int rv;

    if ((l->v = calloc(l->cap, sizeof(*l->v))) == NULL) {
        return ENOMEM;
    }
    memcpy(start.b, prefix, 4);
    memcpy(start.b + 4, l->after, strlen(l->after));
    start.n = 4 + strlen(l->after);
    rv = store_txn_scan(t, start.b, start.n, prefix, 4, name_one, l);
    return rv == SCAN_STOP ? 0 : rv;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The three lists merged into *out (sorted, each name once, none past the
 * horizon: the last name of a list that was cut). Takes the names; the
 * lists keep none. *anycut: a list was cut. */
static int
names_merge(name_list l[3], char ***out, size_t *nout, bool *anycut)
{
    const char *horizon = NULL;
    size_t total = l[0].n + l[1].n + l[2].n, n = 0;
    char **v = calloc(total + 1, sizeof(*v));

    if (v == NULL) {
        return ENOMEM;
    }
    *anycut = false;
    for (int i = 0; i < 3; i++) {
        memcpy(v + n, l[i].v, l[i].n * sizeof(*v));
        n += l[i].n;
        if (l[i].cut) {
            const char *last = l[i].v[l[i].n - 1];
            if (horizon == NULL || strcmp(last, horizon) < 0) {
                horizon = last;
            }
            *anycut = true;
        }
        l[i].n = 0;
    }
    qsort(v, n, sizeof(*v), name_cmp);
    *nout = 0;
    for (size_t i = 0; i < n; i++) {
        if ((*nout > 0 && strcmp(v[i], v[*nout - 1]) == 0) ||
            (horizon != NULL && strcmp(v[i], horizon) > 0)) {
            free(v[i]);
            continue;
        }
        v[(*nout)++] = v[i];
    }
    *out = v;
    return 0;
}

/* ---- one surface -------------------------------------------------------- */

typedef struct summary {
    Once__V1__SurfaceSummary m; /* points into the rows below */
    Once__Grants__V1__Placement *p;
    Once__Grants__V1__SurfaceRow *s;
    Once__Grants__V1__RejectionLog *log;
    Once__V1__Grant *open;
    Once__V1__WorkRow *pend;
    Once__V1__Rejection *last[GRANTS_LIST_LAST_REJECTIONS];
} summary;

static void
summary_fini(summary *x)
{
    ROW_FREE(x->p);
    ROW_FREE(x->s);
    ROW_FREE(x->log);
    ROW_FREE(x->open);
    ROW_FREE(x->pend);
    memset(x, 0, sizeof(*x));
}

/* Reads surface's rows into x; *listed: it has an open grant or holder, a
 * pending row or rejections. 0 or a store error. */
static int
summary_read(const grants_env *e, const char *surface, summary *x, bool *listed)
{
    uint64_t wid = 0;
    size_t nl;
    gkey k;
    int rv;

    once__v1__surface_summary__init(&x->m);
    gkey_placement(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__placement, &x->p)) != 0) {
        return rv;
    }
    gkey_surface(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__surface_row, &x->s)) !=
        0) {
        return rv;
    }
    gkey_rejections(&k, surface);
    if ((rv = ROW_GET0(e->txn, &k, once__grants__v1__rejection_log, &x->log)) !=
        0) {
        return rv;
    }
    if (x->s->open_grant != 0 &&
        (rv = grants_grant_load(e, x->s->open_grant, &x->open)) != 0) {
        return rv;
    }
    gkey_pending(&k, surface);
    if ((rv = rows_get_u64(e->txn, &k, &wid)) == 0) {
        if ((rv = grants_work_load(e, wid, &x->pend)) != 0) {
            return rv;
        }
    } else if (rv != ENOENT) {
        return rv;
    }
    if (x->pend != NULL &&
        x->pend->state != ONCE__V1__WORK_ROW__STATE__PENDING) {
        ROW_FREE(x->pend);
        x->pend = NULL;
    }
    x->m.surface = (char *)surface;
    x->m.open_grant = x->open;
    x->m.legacy_holder = x->s->legacy_holder;
    x->m.epoch = x->s->epoch;
    x->m.machine = x->p->machine;
    x->m.generation = x->p->generation;
    x->m.pending_work_id = x->pend != NULL ? x->pend->work_id : 0;
    x->m.pending_machine = x->pend != NULL ? x->pend->machine : "";
    x->m.rejections_kept = (uint32_t)x->log->n_rejections;
    nl = x->log->n_rejections < GRANTS_LIST_LAST_REJECTIONS
             ? x->log->n_rejections
             : GRANTS_LIST_LAST_REJECTIONS;
    for (size_t i = 0; i < nl; i++) { /* newest first */
        x->last[i] = x->log->rejections[x->log->n_rejections - 1 - i];
    }
    x->m.n_last_rejections = nl;
    x->m.last_rejections = x->last;
    *listed = x->open != NULL || x->s->legacy_holder[0] != '\0' ||
              x->pend != NULL || x->log->n_rejections > 0;
    return 0;
}

/* ---- the page ------------------------------------------------------------ */

/* "ls1." and the hex of name, malloc'd. */
static char *
token_make(const char *name)
{
    size_t n = strlen(name);
    char *t = malloc(TOKEN_PREFIX_LEN + 2 * n + 1);

    if (t != NULL) {
        memcpy(t, TOKEN_PREFIX, TOKEN_PREFIX_LEN);
        sodium_bin2hex(t + TOKEN_PREFIX_LEN, 2 * n + 1,
                       (const unsigned char *)name, n);
    }
    return t;
}

void
grants_list_surfaces(const grants_env *e,
                     const Once__V1__ListSurfacesRequest *r, grants_outcome *o)
{
    Once__V1__ListSurfacesResponse resp =
        ONCE__V1__LIST_SURFACES_RESPONSE__INIT;
    static const char *const prefixes[3] = {"g/s/", "g/j/", "g/q/"};
    size_t page = r->page_size != 0 ? r->page_size : GRANTS_LIST_PAGE_DEFAULT;
    char after[GRANTS_NAME_MAX + 1];
    name_list l[3];
    char **names = NULL;
    size_t nnames = 0, seen = 0, nsum = 0;
    summary *sums = NULL;
    Once__V1__SurfaceSummary **ptrs = NULL;
    char *next = NULL;
    bool anycut = false;
    int rv = 0;

    memset(l, 0, sizeof(l));
    if (!grants_check_list_surfaces(r, after, o)) {
        return; /* validate refused it already; stays a refusal here */
    }
    for (int i = 0; i < 3 && rv == 0; i++) {
        l[i].cap = page * GRANTS_LIST_SCAN_PER_PAGE;
        l[i].after = after;
        rv = names_scan(e->txn, prefixes[i], &l[i]);
    }
    if (rv != 0 || (rv = names_merge(l, &names, &nnames, &anycut)) != 0) {
        goto err;
    }
    if ((sums = calloc(page, sizeof(*sums))) == NULL ||
        (ptrs = calloc(page, sizeof(*ptrs))) == NULL) {
        rv = ENOMEM;
        goto err;
    }
    while (seen < nnames && nsum < page) {
        bool listed = false;
        if ((rv = summary_read(e, names[seen++], &sums[nsum], &listed)) != 0) {
            summary_fini(&sums[nsum]);
            goto err;
        }
        if (!listed) {
            summary_fini(&sums[nsum]);
            continue;
        }
        ptrs[nsum] = &sums[nsum].m;
        nsum++;
    }
    if (seen > 0 && (seen < nnames || anycut)) {
        if ((next = token_make(names[seen - 1])) == NULL) {
            rv = ENOMEM;
            goto err;
        }
        resp.next_page_token = next;
    }
    resp.n_surfaces = nsum;
    resp.surfaces = ptrs;
    resp.read_unix_ms = e->now_ms;
err:
    grants_end(o, rv, &resp.base);
    free(next);
    for (size_t i = 0; i < nsum; i++) {
        summary_fini(&sums[i]);
    }
    for (size_t i = 0; i < nnames; i++) {
        free(names[i]);
    }
    for (int i = 0; i < 3; i++) {
        for (size_t j = 0; j < l[i].n; j++) {
            free(l[i].v[j]);
        }
        free(l[i].v);
    }
    free(names);
    free(sums);
    free(ptrs);
}
