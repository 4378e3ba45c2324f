/*
 * etcd.h — a small etcd v3 client over etcd's JSON gateway (HTTP/1.1 POST
 * of JSON to /v3/kv/range, /v3/kv/txn, /v3/kv/compaction,
 * /v3/lease/grant|keepalive|revoke),
 * with libcurl and cJSON.
 *
 * Owns: one curl handle and the list of etcd endpoints; which endpoint
 * answered last (it is tried first next time).
 * Invariant: every request has a timeout (the handle's timeout_ms per
 * endpoint, all endpoints tried in turn within one call); a request that
 * got no answer is reported EAGAIN ("unavailable"), never guessed. Keys and
 * values are byte strings (base64 on the wire).
 * Never: thread-safe — one handle per thread; never retries a Txn on its
 * own after an endpoint took it (EAGAIN then means "may or may not have
 * been applied", and the caller decides).
 */
#ifndef REPL_ETCD_H
#define REPL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct etcd etcd;
typedef struct etcd_txn etcd_txn;

/* One key-value pair as etcd returns it. key and val are malloc'd (freed by
 * etcd_kvs_free) and NUL-terminated beyond their length. */
typedef struct etcd_kv {
    char *key;
    size_t klen;
    char *val;
    size_t vlen;
    int64_t create_rev;
    int64_t mod_rev;
    int64_t lease;
} etcd_kv;

/*
 * TLS to etcd's client port (https:// endpoints), as etcdctl's --cacert,
 * --cert and --key: PEM files, read by libcurl at each connection. NULL
 * fields: the system's CAs, no client certificate. cert and key go
 * together; with etcd's --client-cert-auth the certificate is what
 * authenticates this client to etcd.
 */
typedef struct etcd_tls {
    const char *cacert;
    const char *cert;
    const char *key;
} etcd_tls;

/*
 * Opens a handle on endpoints, "http://127.0.0.1:2379,https://..." (at
 * most ETCD_ENDPOINTS_MAX), each request given timeout_ms per endpoint;
 * tls (may be NULL; copied) for the https:// ones. 0, EINVAL (bad list) or
 * ENOMEM. Free with etcd_close.
 */
#define ETCD_ENDPOINTS_MAX 8
int etcd_open(etcd **ep, const char *endpoints, uint32_t timeout_ms);
int etcd_open_tls(etcd **ep, const char *endpoints, const etcd_tls *tls,
                  uint32_t timeout_ms);

/* Copies src (may be NULL: all NULL) into dst, each string malloc'd. 0 or
 * ENOMEM (then dst holds nothing). Free with etcd_tls_clear. */
int etcd_tls_copy(etcd_tls *dst, const etcd_tls *src);
void etcd_tls_clear(etcd_tls *t);

/* Sets tls's options (may be NULL: none) and HTTP/1.1 on a curl easy
 * handle (CURL *), for the watch's own transfers. */
void etcd_tls_apply(void *curl, const etcd_tls *tls);

/* Writes "url: what failed[: libcurl's detail][ (what to check)]" for a
 * transfer to url that ended with CURLcode cc (detail: libcurl's error
 * buffer, may be ""; tls: the files it used, may be NULL). */
void etcd_transfer_error(char *buf, size_t size, const char *url, int cc,
                         const char *detail, const etcd_tls *tls);

/* Whether every item of endpoints is http:// or https:// (etcd_open's
 * check), and whether any is https:// (*tls, may be NULL). */
bool etcd_endpoints_valid(const char *endpoints, bool *tls);
void etcd_close(etcd *e);

/* The last error etcd or the transport gave, for messages. */
const char *etcd_last_error(const etcd *e);

/*
 * Reads keys [key, end) (end NULL: key alone), at most limit (0: no limit).
 * *kvs is a malloc'd array of *n (etcd_kvs_free); *more (may be NULL) says
 * whether more keys were in the range; *rev (may be NULL) is the store
 * revision read. 0, EAGAIN (no endpoint answered), EPROTO or ENOMEM.
 */
int etcd_range(etcd *e, const void *key, size_t klen, const void *end,
               size_t elen, int64_t limit, etcd_kv **kvs, size_t *n, bool *more,
               int64_t *rev);

/* etcd_range answered by the member asked from its own state, without a
 * round through the Raft leader (etcd's "serializable" read): maybe behind
 * the cluster, never a torn view — a prefix of what was committed. For a
 * follower's steady reads of the log; never where a missing key would be
 * taken for an answer. */
int etcd_range_serializable(etcd *e, const void *key, size_t klen,
                            const void *end, size_t elen, int64_t limit,
                            etcd_kv **kvs, size_t *n, bool *more, int64_t *rev);

void etcd_kvs_free(etcd_kv *kvs, size_t n);

/* Deletes keys [key, end) (end NULL: key alone). 0, EAGAIN, EPROTO. */
int etcd_delete(etcd *e, const void *key, size_t klen, const void *end,
                size_t elen);

/* Compacts etcd's history below rev. 0, EAGAIN, EPROTO. */
int etcd_compact(etcd *e, int64_t rev);

/* Grants a lease of ttl_s seconds: *id. 0, EAGAIN, EPROTO. */
int etcd_lease_grant(etcd *e, int64_t ttl_s, int64_t *id);

/* Renews lease id once: 0 and *ttl_s (seconds granted again), ENOENT when
 * the lease no longer exists (expired or revoked), EAGAIN, EPROTO. */
int etcd_lease_keepalive(etcd *e, int64_t id, int64_t *ttl_s);

/* Revokes lease id (its keys are deleted). 0, ENOENT, EAGAIN, EPROTO. */
int etcd_lease_revoke(etcd *e, int64_t id);

/*
 * A Txn: compares, then the success operations (no failure operations).
 * etcd_txn_alloc returns NULL when out of memory; the adders record an
 * out-of-memory that etcd_txn_run reports (ENOMEM).
 */
etcd_txn *etcd_txn_alloc(void);
void etcd_txn_free(etcd_txn *t);
/* Compare: key's create_revision == rev (0: the key is absent). */
void etcd_txn_if_created(etcd_txn *t, const void *key, size_t klen,
                         int64_t rev);
/* Compare: key's mod_revision == rev (0: the key is absent). */
void etcd_txn_if_modified(etcd_txn *t, const void *key, size_t klen,
                          int64_t rev);
/* Operation: put key = val, attached to lease (0: none). */
void etcd_txn_put(etcd_txn *t, const void *key, size_t klen, const void *val,
                  size_t vlen, int64_t lease);
/* Operation: delete keys [key, end) (end NULL: key alone). */
void etcd_txn_delete(etcd_txn *t, const void *key, size_t klen, const void *end,
                     size_t elen);

/*
 * Runs t: 0 and *ok (every compare held, the operations applied) and *rev
 * (the revision after it; may be NULL). EAGAIN: no endpoint answered —
 * the Txn may or may not have been applied. EPROTO: etcd refused it (too
 * large, lease not found...: see etcd_last_error); ENOMEM.
 */
int etcd_txn_run(etcd *e, etcd_txn *t, bool *ok, int64_t *rev);

#endif /* REPL_ETCD_H */
