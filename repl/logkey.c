/*
 * logkey.c — the names of a cluster's keys in etcd.
 *
 * /once/<cluster>/leader       the leader's advertised URL, on its lease
 * /once/<cluster>/log/<index>  log entries, index zero-padded to 20 digits
 *                              so keys sort by index
 * /once/<cluster>/first        the first log index kept (trim.c), decimal
 * /once/<cluster>/applied/<advertise URL>
 *                              a replica's applied index, decimal
 * Owns: those names. Never: accepts a key outside the log as an index.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define REPL_INDEX_DIGITS 20

void
repl_keys_init(repl *r)
{
    snprintf(r->leader_key, sizeof(r->leader_key), "/once/%s/leader",
             r->cfg.cluster);
    snprintf(r->log_prefix, sizeof(r->log_prefix), "/once/%s/log/",
             r->cfg.cluster);
    snprintf(r->first_key, sizeof(r->first_key), "/once/%s/first",
             r->cfg.cluster);
    snprintf(r->applied_prefix, sizeof(r->applied_prefix), "/once/%s/applied/",
             r->cfg.cluster);
    snprintf(r->applied_key, sizeof(r->applied_key), "%s%s", r->applied_prefix,
             r->cfg.advertise);
}

int
repl_parse_u64(const char *p, size_t n, uint64_t *v)
{
    *v = 0;
    if (n == 0 || n > 20) {
        return EPROTO;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' ||
            *v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10) {
            return EPROTO;
        }
        *v = *v * 10 + (uint64_t)(p[i] - '0');
    }
    return 0;
}

void
repl_log_key(const repl *r, uint64_t index, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%020" PRIu64, r->log_prefix, index);
}

uint64_t
repl_log_index(const repl *r, const char *key, size_t klen)
{
    size_t pl = strlen(r->log_prefix);
    uint64_t v = 0;

    if (klen != pl + REPL_INDEX_DIGITS || memcmp(key, r->log_prefix, pl) != 0) {
        return 0;
    }
    for (size_t i = pl; i < klen; i++) {
        if (key[i] < '0' || key[i] > '9') {
            return 0;
        }
        v = v * 10 + (uint64_t)(key[i] - '0');
    }
    return v;
}
