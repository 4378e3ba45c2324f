/*
 * svc_counter.c — once.v1.Counter: Increment and Get.
 *
 * Owns the LevelDB keys "c/<name>" holding a counter as a big-endian
 * two's-complement int64. An increment that would overflow is an executed
 * outcome (OUT_OF_RANGE, recorded), not a malformed request.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/names.h"
#include "proto/once.pb-c.h"
#include "proto/reasons.h"
#include "server/service.h"

#define COUNTER_NAME_MAX 256

/* Counter names: 1..256 bytes, no control characters. */
static int
counter_name_ok(server_call *c, const char *name)
{
    size_t at;

    switch (name_check(name, COUNTER_NAME_MAX, &at)) {
    case NAME_OK:
        return 1;
    case NAME_BAD_LENGTH:
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_NAME,
                  "counter name must be 1 to %d bytes, got %zu",
                  COUNTER_NAME_MAX, at);
        return 0;
    case NAME_CONTROL:
        break;
    }
    call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_NAME,
              "counter name has a control character at byte %zu", at);
    return 0;
}

/* Reads counter name into *value (0 when absent). Returns 0 or sets the
 * call's outcome and returns non-zero. */
static int
counter_read(server_call *c, const char *name, char **keyp, size_t *klenp,
             int64_t *value)
{
    size_t nlen = strlen(name);
    size_t klen = 2 + nlen;
    char *key = malloc(klen);
    char *val;
    size_t vlen;
    int rv;

    if (key == NULL) {
        call_store_error(c, ENOMEM);
        return ENOMEM;
    }
    memcpy(key, "c/", 2);
    memcpy(key + 2, name, nlen);
    rv = store_txn_get(c->txn, key, klen, &val, &vlen);
    if (rv == ENOENT) {
        *value = 0;
    } else if (rv == 0 && vlen == 8) {
        *value = (int64_t)wire_get_be64((uint8_t *)val);
        free(val);
    } else {
        if (rv == 0) {
            free(val);
            rv = EBADMSG;
        }
        call_store_error(c, rv);
        free(key);
        return rv;
    }
    *keyp = key;
    *klenp = klen;
    return 0;
}

static void
counter_incr_validate(server_call *c)
{
    const Once__V1__IncrementRequest *r =
        (const Once__V1__IncrementRequest *)c->req;

    if (!counter_name_ok(c, r->name)) {
        return;
    }
    if (r->by == 0) {
        call_fail(c, ONCE__V1__CODE__INVALID_ARGUMENT, REASON_BAD_INCREMENT,
                  "by must not be 0");
    }
}

static void
counter_incr(server_call *c)
{
    const Once__V1__IncrementRequest *r =
        (const Once__V1__IncrementRequest *)c->req;
    Once__V1__IncrementResponse resp = ONCE__V1__INCREMENT_RESPONSE__INIT;
    uint8_t buf[8];
    char *key;
    size_t klen;
    int64_t v;
    int rv;

    if (counter_read(c, r->name, &key, &klen, &v) != 0) {
        return;
    }
    if ((r->by > 0 && v > INT64_MAX - r->by) ||
        (r->by < 0 && v < INT64_MIN - r->by)) {
        call_fail(c, ONCE__V1__CODE__OUT_OF_RANGE, REASON_COUNTER_OVERFLOW,
                  "counter %s is %lld; adding %lld overflows int64", r->name,
                  (long long)v, (long long)r->by);
        free(key);
        return;
    }
    v += r->by;
    wire_put_be64(buf, (uint64_t)v);
    rv = store_txn_put(c->txn, key, klen, buf, sizeof(buf));
    free(key);
    if (rv != 0) {
        call_store_error(c, rv);
        return;
    }
    resp.value = v;
    call_reply(c, &resp.base);
}

static void
counter_get_validate(server_call *c)
{
    const Once__V1__GetRequest *r = (const Once__V1__GetRequest *)c->req;
    counter_name_ok(c, r->name);
}

static void
counter_get(server_call *c)
{
    const Once__V1__GetRequest *r = (const Once__V1__GetRequest *)c->req;
    Once__V1__GetResponse resp = ONCE__V1__GET_RESPONSE__INIT;
    char *key;
    size_t klen;
    int64_t v;

    if (counter_read(c, r->name, &key, &klen, &v) != 0) {
        return;
    }
    free(key);
    resp.value = v;
    call_reply(c, &resp.base);
}

static const service_method svc_counter_methods[] = {
    {"/once.v1.Counter/Increment", SERVICE_MUTATING, counter_incr_validate,
     counter_incr, NULL},
    {"/once.v1.Counter/Get", 0, counter_get_validate, counter_get, NULL},
};
const service_ops svc_counter_ops = {
    .name = "once.v1.Counter",
    .methods = svc_counter_methods,
    .nmethods = sizeof(svc_counter_methods) / sizeof(svc_counter_methods[0]),
};
