/*
 * rows.c — protobuf rows over a store_txn, and the id lists inside them.
 */
#include "grants/rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"

int
rows_get(store_txn *t, const gkey *k, const ProtobufCMessageDescriptor *d,
         ProtobufCMessage **out)
{
    char *val;
    size_t vlen;
    int rv;

    *out = NULL;
    if ((rv = store_txn_get(t, k->b, k->n, &val, &vlen)) != 0) {
        return rv;
    }
    *out = protobuf_c_message_unpack(d, NULL, vlen, (const uint8_t *)val);
    free(val);
    return *out != NULL ? 0 : EBADMSG;
}

int
rows_get_or_empty(store_txn *t, const gkey *k,
                  const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    int rv = rows_get(t, k, d, out);

    if (rv == ENOENT) {
        static const uint8_t none = 0;
        *out = protobuf_c_message_unpack(d, NULL, 0, &none);
        rv = *out != NULL ? 0 : ENOMEM;
    }
    return rv;
}

int
rows_put(store_txn *t, const gkey *k, const ProtobufCMessage *m)
{
    return store_txn_put_msg(t, k->b, k->n, m);
}

int
rows_get_u64(store_txn *t, const gkey *k, uint64_t *v)
{
    char *val;
    size_t vlen;
    int rv;

    *v = 0;
    if ((rv = store_txn_get(t, k->b, k->n, &val, &vlen)) != 0) {
        return rv;
    }
    if (vlen != 8) {
        free(val);
        return EBADMSG;
    }
    *v = wire_get_be64((const uint8_t *)val);
    free(val);
    return 0;
}

int
rows_put_u64(store_txn *t, const gkey *k, uint64_t v)
{
    uint8_t buf[8];

    wire_put_be64(buf, v);
    return store_txn_put(t, k->b, k->n, buf, sizeof(buf));
}

int
rows_exists(store_txn *t, const gkey *k, bool *yes)
{
    char *val;
    size_t vlen;
    int rv = store_txn_get(t, k->b, k->n, &val, &vlen);

    *yes = rv == 0;
    if (rv == 0) {
        free(val);
    }
    return rv == ENOENT ? 0 : rv;
}

int
rows_set_flag(store_txn *t, const gkey *k, bool on)
{
    static const char one = 1;

    return on ? store_txn_put(t, k->b, k->n, &one, 1)
              : store_txn_del(t, k->b, k->n);
}

int
rows_ids_push(uint64_t **a, size_t *n, uint64_t v)
{
    uint64_t *b = realloc(*a, (*n + 1) * sizeof(*b));

    if (b == NULL) {
        return ENOMEM;
    }
    b[(*n)++] = v;
    *a = b;
    return 0;
}

int
rows_ids_push_newest(uint64_t **a, size_t *n, uint64_t v, size_t max)
{
    int rv = rows_ids_push(a, n, v);

    if (rv == 0 && *n > max) {
        size_t cut = *n - max;
        memmove(*a, *a + cut, max * sizeof(**a));
        *n = max;
    }
    return rv;
}

void
rows_ids_drop(uint64_t *a, size_t *n, uint64_t v)
{
    size_t j = 0;

    for (size_t i = 0; i < *n; i++) {
        if (a[i] != v) {
            a[j++] = a[i];
        }
    }
    *n = j;
}
