/*
 * txn.c — a transaction: reads through its own writes, the overlay and
 * LevelDB; writes staged in a LevelDB batch.
 *
 * Owns the transaction object until store_txn_commit hands it to the
 * commit queue (commit.c), which frees it after its done callback.
 * Never: writes to LevelDB itself.
 */
#include "store/store_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

store_txn *
store_txn_begin(store *s)
{
    store_txn *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return NULL;
    }
    if ((t->batch = leveldb_writebatch_create()) == NULL) {
        free(t);
        return NULL;
    }
    t->s = s;
    return t;
}

void
txn_free(store_txn *t)
{
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < t->nwrites; i++) {
        free(t->writes[i].key);
        free(t->writes[i].val);
    }
    free(t->writes);
    leveldb_writebatch_destroy(t->batch);
    free(t);
}

void
store_txn_abort(store_txn *t)
{
    txn_free(t);
}

bool
store_txn_dirty(const store_txn *t)
{
    return t->nwrites > 0;
}

char *
store_dup(const void *p, size_t len)
{
    char *d = malloc(len > 0 ? len : 1);
    if (d != NULL && len > 0) {
        memcpy(d, p, len);
    }
    return d;
}

int
store_txn_get(store_txn *t, const void *key, size_t klen, char **val,
              size_t *vlen)
{
    char *err = NULL;
    bool deleted = false;
    char *v;
    int rv;

    for (size_t i = t->nwrites; i-- > 0;) {
        txn_write *w = &t->writes[i];
        if (w->klen == klen && memcmp(w->key, key, klen) == 0) {
            if (w->val == NULL) {
                return ENOENT;
            }
            if ((*val = store_dup(w->val, w->vlen)) == NULL) {
                return ENOMEM;
            }
            *vlen = w->vlen;
            return 0;
        }
    }
    rv = overlay_get(t->s->ov, key, klen, val, vlen, &deleted);
    if (rv < 0) {
        return -rv;
    }
    if (rv == 1) {
        return deleted ? ENOENT : 0;
    }
    v = leveldb_get(t->s->db, t->s->ropts, key, klen, vlen, &err);
    if (err != NULL) {
        return store_leveldb_error("reading a key", err);
    }
    if (v == NULL) {
        return ENOENT;
    }
    /* Hand out memory freed with free(), not leveldb_free(). */
    *val = store_dup(v, *vlen);
    leveldb_free(v);
    return *val != NULL ? 0 : ENOMEM;
}

static int
txn_stage(store_txn *t, const void *key, size_t klen, const void *val,
          size_t vlen)
{
    txn_write *w;

    if (t->nwrites == t->cap) {
        size_t cap = t->cap > 0 ? t->cap * 2 : 4;
        txn_write *nw = realloc(t->writes, cap * sizeof(*nw));
        if (nw == NULL) {
            return ENOMEM;
        }
        t->writes = nw;
        t->cap = cap;
    }
    w = &t->writes[t->nwrites];
    if ((w->key = store_dup(key, klen)) == NULL) {
        return ENOMEM;
    }
    w->klen = klen;
    w->val = NULL;
    w->vlen = 0;
    if (val != NULL) {
        if ((w->val = store_dup(val, vlen)) == NULL) {
            free(w->key);
            return ENOMEM;
        }
        w->vlen = vlen;
        leveldb_writebatch_put(t->batch, key, klen, val, vlen);
    } else {
        leveldb_writebatch_delete(t->batch, key, klen);
    }
    t->nwrites++;
    return 0;
}

int
store_txn_put(store_txn *t, const void *key, size_t klen, const void *val,
              size_t vlen)
{
    return txn_stage(t, key, klen, val != NULL ? val : "", vlen);
}

int
store_txn_put_msg(store_txn *t, const void *key, size_t klen,
                  const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    int rv;

    if (buf == NULL) {
        return ENOMEM;
    }
    protobuf_c_message_pack(m, buf);
    rv = store_txn_put(t, key, klen, buf, len);
    free(buf);
    return rv;
}

int
store_txn_del(store_txn *t, const void *key, size_t klen)
{
    return txn_stage(t, key, klen, NULL, 0);
}
