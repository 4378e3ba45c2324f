/*
 * wire.c — the method table, code names and Response packing.
 *
 * The method table is derived from the generated service descriptors the
 * first time it is asked for (pthread_once); after that it is read-only and
 * shared by every thread.
 */
#include "proto/wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/grants.pb-c.h"
#include "proto/kv.pb-c.h"
#include "proto/outbox.pb-c.h"

static const ProtobufCServiceDescriptor *const wire_services[] = {
    &once__v1__counter__descriptor, &once__v1__lease__descriptor,
    &once__v1__admin__descriptor,   &once__v1__grants__descriptor,
    &once__v1__kv__descriptor,      &once__v1__outbox__descriptor,
    &once__v1__batch__descriptor, /* the envelope of coalesced calls */
};

#define WIRE_METHODS_MAX 64

static wire_method wire_table[WIRE_METHODS_MAX];
static size_t wire_table_len;
static pthread_once_t wire_table_once = PTHREAD_ONCE_INIT;

static void
wire_table_build(void)
{
    size_t n = sizeof(wire_services) / sizeof(wire_services[0]);

    for (size_t s = 0; s < n; s++) {
        const ProtobufCServiceDescriptor *svc = wire_services[s];
        for (unsigned m = 0; m < svc->n_methods; m++) {
            wire_method *wm;
            if (wire_table_len == WIRE_METHODS_MAX) {
                abort(); /* a build-time constant was outgrown */
            }
            wm = &wire_table[wire_table_len++];
            snprintf(wm->full_name, sizeof(wm->full_name), "/%s/%s", svc->name,
                     svc->methods[m].name);
            wm->service = svc;
            wm->method = &svc->methods[m];
        }
    }
}

const wire_method *
wire_methods(size_t *count)
{
    pthread_once(&wire_table_once, wire_table_build);
    *count = wire_table_len;
    return wire_table;
}

const wire_method *
wire_method_find(const char *name, size_t len)
{
    size_t n;
    const wire_method *t = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        if (strlen(t[i].full_name) == len &&
            memcmp(t[i].full_name, name, len) == 0) {
            return &t[i];
        }
    }
    return NULL;
}

const char *
wire_method_name(const ProtobufCServiceDescriptor *svc, const char *name)
{
    size_t n;
    const wire_method *t = wire_methods(&n);

    for (size_t i = 0; i < n; i++) {
        if (t[i].service == svc && strcmp(t[i].method->name, name) == 0) {
            return t[i].full_name;
        }
    }
    return NULL;
}

const char *
wire_code_name(int code)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&once__v1__code__descriptor, code);
    return v != NULL ? v->name : "UNKNOWN_CODE";
}

const char *
wire_lease_state_name(int state)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
        &once__v1__lease_state__descriptor, state);

    return v != NULL ? v->name : "LEASE_STATE_UNSPECIFIED";
}

int
wire_response_pack(int code, const char *reason, const char *message,
                   const void *payload, size_t payload_len, bool replayed,
                   uint8_t **out, size_t *out_len)
{
    Once__V1__Response resp = ONCE__V1__RESPONSE__INIT;
    Once__V1__Status st = ONCE__V1__STATUS__INIT;
    uint8_t *buf;
    size_t len;

    st.code = (Once__V1__Code)code;
    st.reason = (char *)(reason != NULL ? reason : "");
    st.message = (char *)(message != NULL ? message : "");
    resp.status = &st;
    resp.payload.data = (uint8_t *)payload;
    resp.payload.len = payload != NULL ? payload_len : 0;
    resp.replayed = replayed;

    len = once__v1__response__get_packed_size(&resp);
    if ((buf = malloc(len > 0 ? len : 1)) == NULL) {
        return ENOMEM;
    }
    once__v1__response__pack(&resp, buf);
    *out = buf;
    *out_len = len;
    return 0;
}

void
wire_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
}

uint64_t
wire_get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}
