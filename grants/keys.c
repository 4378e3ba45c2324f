/*
 * keys.c — building the keys of keys.h. Names longer than the key buffer
 * are cut (rules.c admits names of at most 256 bytes, well within it).
 */
#include "grants/keys.h"

#include <string.h>

#include "proto/wire.h"

static void
gkey_str(gkey *k, const char *prefix, const char *s)
{
    size_t p = strlen(prefix);
    size_t n = strlen(s);

    if (n > GRANTS_KEY_MAX - p) {
        n = GRANTS_KEY_MAX - p;
    }
    memcpy(k->b, prefix, p);
    memcpy(k->b + p, s, n);
    k->n = p + n;
}

static void
gkey_u64(gkey *k, const char *prefix, uint64_t v)
{
    size_t p = strlen(prefix);

    memcpy(k->b, prefix, p);
    wire_put_be64((uint8_t *)k->b + p, v);
    k->n = p + 8;
}

void
gkey_placement(gkey *k, const char *surface)
{
    gkey_str(k, "g/p/", surface);
}

void
gkey_surface(gkey *k, const char *surface)
{
    gkey_str(k, "g/s/", surface);
}

void
gkey_rejections(gkey *k, const char *surface)
{
    gkey_str(k, "g/j/", surface);
}

void
gkey_lock(gkey *k, const char *request_id, uint32_t attempt)
{
    size_t n = strlen(request_id);

    if (n > GRANTS_KEY_MAX - 8) {
        n = GRANTS_KEY_MAX - 8;
    }
    memcpy(k->b, "g/r/", 4);
    k->b[4] = (char)(attempt >> 24);
    k->b[5] = (char)(attempt >> 16);
    k->b[6] = (char)(attempt >> 8);
    k->b[7] = (char)attempt;
    memcpy(k->b + 8, request_id, n);
    k->n = 8 + n;
}

void
gkey_latest(gkey *k, const char *request_id)
{
    gkey_str(k, "g/l/", request_id);
}

void
gkey_grant(gkey *k, uint64_t grant_id)
{
    gkey_u64(k, "g/g/", grant_id);
}

void
gkey_work(gkey *k, uint64_t work_id)
{
    gkey_u64(k, "g/w/", work_id);
}

void
gkey_pending(gkey *k, const char *surface)
{
    gkey_str(k, "g/q/", surface);
}

void
gkey_machine(gkey *k, const char *machine)
{
    gkey_str(k, "g/m/", machine);
}

void
gkey_machine_deleted(gkey *k, const char *machine)
{
    gkey_str(k, "g/d/", machine);
}

void
gkey_denied(gkey *k, const char *principal)
{
    gkey_str(k, "g/a/", principal);
}

void
gkey_next_grant(gkey *k)
{
    gkey_str(k, "g/n/grant", "");
}

void
gkey_next_work(gkey *k)
{
    gkey_str(k, "g/n/work", "");
}
