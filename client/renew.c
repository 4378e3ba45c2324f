/*
 * renew.c — background lease renewal (SPEC §4: renew at about TTL/3,
 * report loudly when renewal keeps failing).
 *
 * Owns: the renewal thread, its sleep on renew_cv, and the RenewLease
 * request. The request is built from the method's descriptor (found by
 * name at run time, its client_id field set by offset), so libonce builds
 * and runs against a once.proto with or without RenewLease; without it
 * there is simply no renewal.
 * Never: holds renew_lock across a network call; never logs for a single
 * transient failure.
 */
#include "renew.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "status.h"
#include "wire.h"

#define RENEW_INTERVAL_MIN_MS 100u
#define RENEW_DEADLINE_MAX_MS 5000u

void
renew_init(once_client *c)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&c->renew_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->renew_cv, &ca);
    pthread_condattr_destroy(&ca);
}

void
renew_fini(once_client *c)
{
    pthread_mutex_destroy(&c->renew_lock);
    pthread_cond_destroy(&c->renew_cv);
}

/* RenewLease's full name and its request field client_id, or false when
 * the compiled-in proto has no such method. */
static bool
renew_method(const wire_method **wmp, const ProtobufCFieldDescriptor **fp)
{
    size_t n;
    const wire_method *t = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        const ProtobufCFieldDescriptor *f;
        if (t[i].service != &once__v1__lease__descriptor ||
            strcmp(t[i].method->name, "RenewLease") != 0) {
            continue;
        }
        f = protobuf_c_message_descriptor_get_field_by_name(t[i].method->input,
                                                            "client_id");
        if (f == NULL || f->type != PROTOBUF_C_TYPE_UINT64 ||
            f->label == PROTOBUF_C_LABEL_REPEATED) {
            return false;
        }
        *wmp = &t[i];
        *fp = f;
        return true;
    }
    return false;
}

/* One RenewLease call for c->client_id within deadline_ms. */
static int
renew_once(once_client *c, uint32_t deadline_ms, once_status *st)
{
    const wire_method *wm;
    const ProtobufCFieldDescriptor *f;
    ProtobufCMessage *req = NULL;
    uint8_t *buf = NULL;
    size_t len;
    int rv;

    if (!renew_method(&wm, &f)) {
        return status_set(st, ONCE_UNIMPLEMENTED, "NO_METHOD",
                          "RenewLease is not in the compiled-in proto");
    }
    if ((req = calloc(1, wm->method->input->sizeof_message)) == NULL) {
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
                        "out of memory");
        goto out;
    }
    protobuf_c_message_init(wm->method->input, req);
    memcpy((char *)req + f->offset, &c->client_id, sizeof(uint64_t));
    len = protobuf_c_message_get_packed_size(req);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        rv = status_set(st, ONCE_RESOURCE_EXHAUSTED, "NO_MEMORY",
                        "out of memory");
        goto out;
    }
    protobuf_c_message_pack(req, buf);
    /* Not mutating: renewing twice is harmless, so it carries no rpc id. */
    rv = client_call(c, wm->full_name, false, NULL, buf, len, NULL, NULL, st,
                     deadline_ms);

out:
    free(buf);
    free(req);
    return rv;
}

/* Waits until ms have passed or renew_stop is set; renew_lock is held.
 * Returns true when stopping. */
static bool
renew_wait(once_client *c, uint64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (!c->renew_stop &&
           pthread_cond_timedwait(&c->renew_cv, &c->renew_lock, &ts) !=
               ETIMEDOUT) {
    }
    return c->renew_stop;
}

static void *
renew_main(void *arg)
{
    once_client *c = arg;
    uint64_t interval = c->lease_ttl_ms / 3;
    uint32_t deadline;
    unsigned fails = 0;

    if (interval < RENEW_INTERVAL_MIN_MS) {
        interval = RENEW_INTERVAL_MIN_MS;
    }
    deadline = interval < RENEW_DEADLINE_MAX_MS ? (uint32_t)interval
                                                : RENEW_DEADLINE_MAX_MS;
    pthread_mutex_lock(&c->renew_lock);
    while (!renew_wait(c, interval)) {
        once_status st;
        int rv;

        pthread_mutex_unlock(&c->renew_lock);
        rv = renew_once(c, deadline, &st);
        pthread_mutex_lock(&c->renew_lock);
        if (c->renew_stop) {
            break;
        }
        if (rv == ONCE_OK) {
            if (fails >= 2) {
                fprintf(stderr,
                        "libonce: lease of client %" PRIu64
                        " renewed again after %u failures\n",
                        c->client_id, fails);
            }
            fails = 0;
            continue;
        }
        fails++;
        if (rv == ONCE_UNIMPLEMENTED) {
            fprintf(stderr,
                    "libonce: the server does not renew leases (%s: %s); "
                    "the lease of client %" PRIu64 " ends after its TTL\n",
                    st.reason, st.message, c->client_id);
            break;
        }
        if ((rv == ONCE_FAILED_PRECONDITION &&
             strcmp(st.reason, "LEASE_EXPIRED") == 0)) {
            fprintf(stderr,
                    "libonce: lease of client %" PRIu64
                    " can no longer be renewed: %s (%s): %s; its calls "
                    "will be rejected, open a new handle\n",
                    c->client_id, once_strerror(rv), st.reason, st.message);
            break;
        }
        if (fails >= 2) {
            fprintf(stderr,
                    "libonce: renewing the lease of client %" PRIu64
                    " failed %u times in a row: %s (%s): %s\n",
                    c->client_id, fails, once_strerror(rv), st.reason,
                    st.message);
        }
    }
    pthread_mutex_unlock(&c->renew_lock);
    return NULL;
}

int
renew_start(once_client *c)
{
    const wire_method *wm;
    const ProtobufCFieldDescriptor *f;
    int rv;

    if (c->client_id == 0 || c->lease_ttl_ms == 0 || !renew_method(&wm, &f)) {
        return 0;
    }
    c->renew_stop = false;
    if ((rv = pthread_create(&c->renew_thread, NULL, renew_main, c)) != 0) {
        return rv;
    }
    c->renew_running = true;
    return 0;
}

void
renew_stop(once_client *c)
{
    if (!c->renew_running) {
        return;
    }
    pthread_mutex_lock(&c->renew_lock);
    c->renew_stop = true;
    pthread_cond_signal(&c->renew_cv);
    pthread_mutex_unlock(&c->renew_lock);
    nng_close(c->sock);
    pthread_join(c->renew_thread, NULL);
    c->renew_running = false;
}
