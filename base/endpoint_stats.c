/*
 * endpoint_stats.c — one endpoint's scope in an nng statistics snapshot
 * (endpoint_stats.h).
 */
#include "base/endpoint_stats.h"

#include <string.h>

nng_stat *
endpoint_stats_child(nng_stat *st, const char *name)
{
    for (nng_stat *s = nng_stat_child(st); s != NULL; s = nng_stat_next(s)) {
        if (strcmp(nng_stat_name(s), name) == 0) {
            return s;
        }
    }
    return NULL;
}

nng_stat *
endpoint_stats_find(nng_stat *st, const char *kind, uint64_t id)
{
    nng_stat *s;

    if (nng_stat_type(st) != NNG_STAT_SCOPE) {
        return NULL;
    }
    if (strcmp(nng_stat_name(st), kind) == 0) {
        s = endpoint_stats_child(st, "id");
        return s != NULL && nng_stat_value(s) == id ? st : NULL;
    }
    for (s = nng_stat_child(st); s != NULL; s = nng_stat_next(s)) {
        nng_stat *found = endpoint_stats_find(s, kind, id);
        if (found != NULL) {
            return found;
        }
    }
    return NULL;
}
