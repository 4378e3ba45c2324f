/*
 * wire.h — helpers both sides of the wire share.
 *
 * Owns: the method table (built from the protobuf-c service descriptors, so
 * the .proto file is the only list of methods), status code names, and the
 * packing of Response envelopes.
 * Never: allocates anything a caller has to free except where a function
 * comment says so.
 */
#ifndef PROTO_WIRE_H
#define PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "proto/once.pb-c.h"
#include "proto/record.pb-c.h"

/* Longest full method name we accept ("/once.v1.Service/Method"). */
#define WIRE_METHOD_MAX 128

/* One method of one once.v1 service. */
typedef struct wire_method {
    char full_name[WIRE_METHOD_MAX]; /* "/once.v1.Counter/Increment" */
    const ProtobufCServiceDescriptor *service;
    const ProtobufCMethodDescriptor *method;
} wire_method;

/* All methods of all once.v1 services, in descriptor order. Built once,
 * thread-safe; the array is static and never freed. */
const wire_method *wire_methods(size_t *count);

/* The method with this full name, or NULL. len is the name's length (the
 * name as received need not be NUL-terminated). */
const wire_method *wire_method_find(const char *name, size_t len);

/* The full name ("/once.v1.Counter/Increment") of svc's method called name
 * ("Increment"), or NULL. Static storage. */
const char *wire_method_name(const ProtobufCServiceDescriptor *svc,
                             const char *name);

/* "ALREADY_EXISTS" for 6; "CODE_<n>" style text is never returned: unknown
 * codes give "UNKNOWN_CODE". Static strings. */
const char *wire_code_name(int code);

/* "LEASE_LIVE" for once.v1.LeaseState 1; an unknown state gives
 * "LEASE_STATE_UNSPECIFIED". Static strings: libonce's
 * once_lease_state_name and onced's messages say the same. */
const char *wire_lease_state_name(int state);

/*
 * Packs a Response envelope into a fresh buffer. reason and message may be
 * NULL. On success *out is malloc'd (the caller frees it with free()) and
 * *out_len is its length; returns 0, or ENOMEM.
 */
int wire_response_pack(int code, const char *reason, const char *message,
                       const void *payload, size_t payload_len, bool replayed,
                       uint8_t **out, size_t *out_len);

/* Big-endian fixed-width integers, used in LevelDB keys so keys sort by
 * number. */
void wire_put_be64(uint8_t *p, uint64_t v);
uint64_t wire_get_be64(const uint8_t *p);

/* The batch envelope's method (once.proto, once.v1.Batch) and the most
 * entries one batch may carry. */
#define WIRE_BATCH_METHOD      "/once.v1.Batch/Call"
#define WIRE_BATCH_MAX_ENTRIES 256u

#endif /* PROTO_WIRE_H */
