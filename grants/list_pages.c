/*
 * list_pages.c — the page machinery the operator's lists share
 * (ListSurfaces, ListMachines): the page_size and page_token check, the
 * candidate names of a page, reading its items through the list's
 * grants_page_spec, and the next page token.
 *
 * Owns the bounded work of a page: the candidate names come from prefix
 * scans of keys.h (g/s/, g/m/...), each cut after GRANTS_LIST_SCAN_PER_PAGE
 * times page_size names, merged and read up to the first cut ("the
 * horizon"); and the token form: the list's prefix ("ls1.", "lm1.") and
 * the hex of the last name looked at.
 * Invariant: stages nothing (the lists are reads).
 * Never: returns a token that does not name a valid name; accepts one
 * list's token for another (the prefixes differ).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "proto/names.h"
#include "proto/reasons.h"
#include "grants/rules_impl.h"

#define SCAN_STOP (-1) /* a scan callback's "enough": not an errno */
#define KEY_PFX   4    /* "g/?/" */

/* The name a page token of form tpfx carries into after (a C string). */
static bool
token_read(const char *token, const char *tpfx, char after[GRANTS_NAME_MAX + 1])
{
    size_t plen = strlen(tpfx), hexlen = strlen(token), n = 0, at;

    if (strncmp(token, tpfx, plen) != 0) {
        return false;
    }
    hexlen -= plen;
    if (hexlen == 0 || hexlen % 2 != 0 || hexlen / 2 > GRANTS_NAME_MAX ||
        sodium_hex2bin((unsigned char *)after, GRANTS_NAME_MAX, token + plen,
                       hexlen, NULL, &n, NULL) != 0 ||
        n != hexlen / 2) {
        return false;
    }
    after[n] = '\0';
    return strlen(after) == n && /* no NUL inside */
           name_check(after, GRANTS_NAME_MAX, &at) == NAME_OK;
}

bool
grants_page_check(uint32_t page_size, const char *page_token, const char *tpfx,
                  char after[GRANTS_NAME_MAX + 1], grants_outcome *o)
{
    after[0] = '\0';
    if (page_size > GRANTS_LIST_PAGE_MAX) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_LIMIT,
                    "page_size is at most %d (0: %d), got %u",
                    GRANTS_LIST_PAGE_MAX, GRANTS_LIST_PAGE_DEFAULT, page_size);
        return false;
    }
    if (page_token[0] != '\0' && !token_read(page_token, tpfx, after)) {
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
    size_t n = klen - KEY_PFX;
    char *s;

    (void)val;
    (void)vlen;
    if (klen < KEY_PFX ||
        (strlen(l->after) == n && memcmp(key + KEY_PFX, l->after, n) == 0)) {
        return 0; /* the token's own name: listed on the previous page */
    }
    if ((s = malloc(n + 1)) == NULL) {
        return ENOMEM;
    }
    memcpy(s, key + KEY_PFX, n);
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
    memcpy(start.b, prefix, KEY_PFX);
    memcpy(start.b + KEY_PFX, l->after, strlen(l->after));
    start.n = KEY_PFX + strlen(l->after);
    rv = store_txn_scan(t, start.b, start.n, prefix, KEY_PFX, name_one, l);
    return rv == SCAN_STOP ? 0 : rv;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lists merged into *out (sorted, each name once, none past the
 * horizon: the last name of a list that was cut). Takes the names; the
 * lists keep none. *anycut: a list was cut. */
static int
names_merge(name_list *l, size_t nl, char ***out, size_t *nout, bool *anycut)
{
    const char *horizon = NULL;
    size_t total = 0, n = 0;
    char **v;

    for (size_t i = 0; i < nl; i++) {
        total += l[i].n;
    }
    if ((v = calloc(total + 1, sizeof(*v))) == NULL) {
        return ENOMEM;
    }
    *anycut = false;
    for (size_t i = 0; i < nl; i++) {
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

/* The names after `after` under each prefix of s, at most
 * GRANTS_LIST_SCAN_PER_PAGE * page per prefix, merged up to the first cut.
 * 0 or a store error (pn empty). */
static int
page_names(store_txn *t, const grants_page_spec *s, const char *after,
           size_t page, grants_page_names *pn)
{
    name_list l[GRANTS_LIST_PREFIXES_MAX];
    int rv = 0;

    memset(pn, 0, sizeof(*pn));
    memset(l, 0, sizeof(l));
    if (s->np > GRANTS_LIST_PREFIXES_MAX) {
        return EINVAL;
    }
    for (size_t i = 0; i < s->np && rv == 0; i++) {
        l[i].cap = page * GRANTS_LIST_SCAN_PER_PAGE;
        l[i].after = after;
        rv = names_scan(t, s->prefixes[i], &l[i]);
    }
    if (rv == 0) {
        rv = names_merge(l, s->np, &pn->v, &pn->n, &pn->cut);
    }
    for (size_t i = 0; i < s->np; i++) {
        for (size_t j = 0; j < l[i].n; j++) {
            free(l[i].v[j]);
        }
        free(l[i].v);
    }
    return rv;
}

/* The token after the first `seen` names of pn (malloc'd), NULL when
 * nothing may follow. 0 or ENOMEM. */
static int
page_next(const grants_page_names *pn, size_t seen, const char *tpfx,
          char **token)
{
    size_t plen = strlen(tpfx), n;
    char *t;

    *token = NULL;
    if (seen == 0 || (seen >= pn->n && !pn->cut)) {
        return 0; /* the last page */
    }
    n = strlen(pn->v[seen - 1]);
    if ((t = malloc(plen + 2 * n + 1)) == NULL) {
        return ENOMEM;
    }
    memcpy(t, tpfx, plen);
    sodium_bin2hex(t + plen, 2 * n + 1, (const unsigned char *)pn->v[seen - 1],
                   n);
    *token = t;
    return 0;
}

/* Item i of p. */
static void *
item_at(const grants_page_spec *s, const grants_page *p, size_t i)
{
    return (char *)p->items + i * s->item_size;
}

int
grants_page_read(const grants_env *e, const grants_page_spec *s,
                 const char *after, uint32_t page_size, grants_page *p)
{
    size_t page = page_size != 0 ? page_size : GRANTS_LIST_PAGE_DEFAULT;
    size_t seen = 0;
    int rv;

    memset(p, 0, sizeof(*p));
    if ((rv = page_names(e->txn, s, after, page, &p->names)) != 0) {
        return rv;
    }
    if ((p->items = calloc(page, s->item_size)) == NULL ||
        (p->ptrs = calloc(page, sizeof(*p->ptrs))) == NULL) {
        return ENOMEM;
    }
    while (seen < p->names.n && p->n < page) {
        bool listed = false;
        void *x = item_at(s, p, p->n);
        rv = s->read(e, p->names.v[seen++], x, &listed);
        if (rv != 0 || !listed) {
            if (s->fini != NULL) {
                s->fini(x);
            }
            memset(x, 0, s->item_size);
            if (rv != 0) {
                return rv;
            }
            continue;
        }
        p->ptrs[p->n++] = x;
    }
    return page_next(&p->names, seen, s->tpfx, &p->next);
}

void
grants_page_free(const grants_page_spec *s, grants_page *p)
{
    for (size_t i = 0; i < p->n && s->fini != NULL; i++) {
        s->fini(item_at(s, p, i));
    }
    for (size_t i = 0; i < p->names.n; i++) {
        free(p->names.v[i]);
    }
    free(p->names.v);
    free(p->items);
    free(p->ptrs);
    free(p->next);
    memset(p, 0, sizeof(*p));
}
