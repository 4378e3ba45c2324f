/*
 * compare.c — whether one compare of a Txn holds (kv_compare_holds).
 *
 * Owns the meaning of the targets and ops of KvCompare (kv.proto): VALUE
 * in bytewise order (an absent key fails it), VERSION with an absent key
 * at version 0, EXISTS and ABSENT.
 * Invariant: pure — the same compare and entry give the same answer.
 * Never: reads the store or accepts a target check.c would refuse.
 */
#include <string.h>

#include "kv/kv_impl.h"

/* Whether c — below 0, 0, above 0 as the key's side is below, equal to
 * or above the operand — is what op asks for. */
static bool
order(int c, Once__V1__KvCompare__Op op)
{
    switch (op) {
    case ONCE__V1__KV_COMPARE__OP__EQUAL:
        return c == 0;
    case ONCE__V1__KV_COMPARE__OP__LESS:
        return c < 0;
    case ONCE__V1__KV_COMPARE__OP__GREATER:
        return c > 0;
    default:
        return false;
    }
}

/* The bytewise order of two values (a shorter prefix first). */
static int
bytes_cmp(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n > 0 ? memcmp(a->data, b->data, n) : 0;

    if (c != 0) {
        return c;
    }
    return a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

bool
kv_compare_holds(const Once__V1__KvCompare *c, const kv_entry *e)
{
    uint64_t version = e != NULL ? e->version : 0;

    switch (c->target) {
    case ONCE__V1__KV_COMPARE__TARGET__VALUE:
        return e != NULL && order(bytes_cmp(&e->value, &c->value), c->op);
    case ONCE__V1__KV_COMPARE__TARGET__VERSION:
        return order(version < c->version   ? -1
                     : version > c->version ? 1
                                            : 0,
                     c->op);
    case ONCE__V1__KV_COMPARE__TARGET__EXISTS:
        return e != NULL;
    case ONCE__V1__KV_COMPARE__TARGET__ABSENT:
        return e == NULL;
    default:
        return false;
    }
}
