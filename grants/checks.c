/*
 * checks.c — the checks of a request that need no state: names, lengths,
 * locations, TTLs and enums (INVALID_ARGUMENT with a reason).
 *
 * Invariant: a request that passes is safe to use as a key and to copy
 * into a row.
 * Never: reads the store; a check that needs a row is a rule of its method.
 */
#include <string.h>

#include "proto/names.h"
#include "proto/reasons.h"
#include "grants/rules_impl.h"

bool
grants_check_name(const char *what, const char *s, grants_outcome *o)
{
    size_t at;

    switch (name_check(s, GRANTS_NAME_MAX, &at)) {
    case NAME_OK:
        return true;
    case NAME_BAD_LENGTH:
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_NAME,
                    "%s must be 1 to %d bytes, got %zu", what, GRANTS_NAME_MAX,
                    at);
        return false;
    case NAME_CONTROL:
        break;
    }
    grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_NAME,
                "%s has a control character at byte %zu", what, at);
    return false;
}

/* An open grant always has a location: an empty one is refused here. */
static bool
check_location(const char *s, grants_outcome *o)
{
    size_t len = strlen(s);

    if (len == 0 || len > GRANTS_LOCATION_MAX) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_LOCATION,
                    "location must be 1 to %d bytes, got %zu (an open grant "
                    "always has a machine and a location)",
                    GRANTS_LOCATION_MAX, len);
        return false;
    }
    return true;
}

bool
grants_check_placement(const Once__V1__SetPlacementRequest *r,
                       grants_outcome *o)
{
    return grants_check_name("surface", r->surface, o) &&
           grants_check_name("machine", r->machine, o) &&
           check_location(r->location, o);
}

static bool
check_ttl(uint64_t ttl, grants_outcome *o)
{
    if (ttl > GRANTS_CRED_TTL_MAX_MS) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_TTL,
                    "credential_ttl_ms is at most %llu",
                    (unsigned long long)GRANTS_CRED_TTL_MAX_MS);
        return false;
    }
    return true;
}

bool
grants_check_request(const Once__V1__RequestGrantRequest *r, grants_outcome *o)
{
    if (!grants_check_name("request_id", r->request_id, o) ||
        !grants_check_name("surface", r->surface, o) ||
        !grants_check_name("machine", r->machine, o) ||
        !check_location(r->location, o) ||
        !check_ttl(r->credential_ttl_ms, o)) {
        return false;
    }
    if (r->attempt == 0 || r->generation == 0) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_FIELD,
                    "attempt and generation start at 1");
        return false;
    }
    return true;
}

bool
grants_check_enqueue(const Once__V1__EnqueueRequest *r, grants_outcome *o)
{
    if (!grants_check_name("request_id", r->request_id, o) ||
        !grants_check_name("surface", r->surface, o)) {
        return false;
    }
    if (r->attempt == 0) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_FIELD,
                    "attempt starts at 1");
        return false;
    }
    return true;
}

bool
grants_check_finish(const Once__V1__FinishGrantRequest *r, grants_outcome *o)
{
    if (r->grant_id == 0 || r->outcome < ONCE__V1__GRANT_OUTCOME__SUCCEEDED ||
        r->outcome > ONCE__V1__GRANT_OUTCOME__RELEASED) {
        grants_fail(o, CODE(INVALID_ARGUMENT), REASON_BAD_FIELD,
                    "FinishGrant needs a grant_id and an outcome "
                    "(succeeded, failed_before_start, aborted, released)");
        return false;
    }
    return true;
}
