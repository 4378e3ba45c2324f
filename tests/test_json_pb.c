/*
 * test_json_pb.c — the JSON mapping of http/json_pb.h against every
 * message of every shipped .proto, plus exact texts, every refusal with
 * its message, and truncated and mutated input.
 *
 * Owns: a filler that sets every field of a message from its descriptor
 * (repeated fields with three elements, nested messages, each member of
 * each oneof in turn), so a message added to proto/ is covered without
 * editing this file (tests/pb_descriptors.py lists the descriptors).
 * Invariant: round trips are judged by protobuf-c's packing: the message
 * decoded from the JSON packs to the same bytes as the one encoded.
 * Never: leaks a message (the ASan build runs it too).
 */
#include "http/json_impl.h"
#include "http/json_pb.h"
#include "tests/json_presence.pb-c.h"
#include "tests/json_types.pb-c.h"
#include "proto/kv.pb-c.h"
#include "proto/once.pb-c.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

extern const ProtobufCMessageDescriptor *const shipped_messages[];
extern const size_t shipped_n_messages;
extern const ProtobufCServiceDescriptor *const shipped_services[];
extern const size_t shipped_n_services;
extern const ProtobufCMessageDescriptor *const typed_messages[];
extern const size_t typed_n_messages;

#define FILL_DEPTH 3 /* nested messages below this are left unset */
#define VARIANTS   6 /* the oneof member set is variant % members */

/* Every field the filler set at least once, for the coverage check. */
static const ProtobufCFieldDescriptor *covered[4096];
static size_t n_covered;

/* Whether p is one of the n pointers of list. */
static bool
in_list(const void *const *list, size_t n, const void *p)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i] == p) {
            return true;
        }
    }
    return false;
}

static void
cover(const ProtobufCFieldDescriptor *fd)
{
    if (in_list((const void *const *)covered, n_covered, fd)) {
        return;
    }
    assert_true(n_covered < sizeof(covered) / sizeof(covered[0]));
    covered[n_covered++] = fd;
}

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *desc, int depth,
                              size_t variant);

/* A non-default value number k of fd's type at slot (malloc'd as
 * protobuf-c frees it); false for a message left unset at the depth. */
static bool
fill_value(const ProtobufCFieldDescriptor *fd, size_t k, int depth,
           size_t variant, void *slot)
{
    static const uint8_t blob[] = {0x00, 0xfb, 0xff, 0x3e, 0x3f, 0x80};
    const ProtobufCEnumDescriptor *ed;
    ProtobufCBinaryData *b;
    char text[96];

    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        *(int32_t *)slot = -1000000 - (int32_t)(k + fd->id);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        *(uint32_t *)slot = 4000000000u - (uint32_t)(k + fd->id);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        *(int64_t *)slot = INT64_MIN + 7 + (int64_t)(k + fd->id);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        *(uint64_t *)slot = UINT64_MAX - k - fd->id;
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        *(float *)slot = 1.25f + (float)(k + fd->id) / 3;
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        *(double *)slot = 0.1 * (double)(k + 1) + fd->id;
        break;
    case PROTOBUF_C_TYPE_BOOL:
        *(protobuf_c_boolean *)slot = 1;
        break;
    case PROTOBUF_C_TYPE_ENUM:
        ed = fd->descriptor;
        *(int32_t *)slot =
            ed->values[ed->n_values - 1 - k % ed->n_values].value;
        if (*(int32_t *)slot == 0) {
            *(int32_t *)slot = ed->values[ed->n_values - 1].value;
        }
        break;
    case PROTOBUF_C_TYPE_STRING:
        snprintf(text, sizeof(text), "%s-%zu-\xc3\xa9\"\\/\n\x7f", fd->name, k);
        *(char **)slot = strdup(text);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        b = slot;
        b->len = 1 + (k + fd->id) % sizeof(blob);
        b->data = malloc(b->len);
        memcpy(b->data, blob, b->len);
        break;
    case PROTOBUF_C_TYPE_MESSAGE:
        if (depth + 1 >= FILL_DEPTH) {
            return false;
        }
        *(ProtobufCMessage **)slot = fill(fd->descriptor, depth + 1, variant);
        break;
    }
    return true;
}

/* Whether fd is the member of its oneof that this variant sets. */
static bool
oneof_chosen(const ProtobufCMessageDescriptor *desc,
             const ProtobufCFieldDescriptor *fd, size_t variant)
{
    size_t index = 0, members = 0;

    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *o = &desc->fields[i];

        if ((o->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            o->quantifier_offset == fd->quantifier_offset) {
            if (o == fd) {
                index = members;
            }
            members++;
        }
    }
    return index == variant % members;
}

static void
fill_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd, int depth,
           size_t variant)
{
    char *base = (char *)m + fd->offset;
    char *q = (char *)m + fd->quantifier_offset;

    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t n = 0;
        char *arr = calloc(3, json_field_size(fd));

        for (size_t k = 0; k < 3; k++) {
            n += fill_value(fd, k, depth, variant,
                            arr + n * json_field_size(fd));
        }
        *(void **)base = arr;
        *(size_t *)q = n;
    } else if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        if (!oneof_chosen(m->descriptor, fd, variant) ||
            !fill_value(fd, variant, depth, variant, base)) {
            return;
        }
        *(uint32_t *)q = fd->id;
    } else if (!fill_value(fd, variant, depth, variant, base)) {
        return;
    } else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL &&
               fd->type != PROTOBUF_C_TYPE_STRING &&
               fd->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)q = 1;
    }
    cover(fd);
}

static ProtobufCMessage *
fill(const ProtobufCMessageDescriptor *desc, int depth, size_t variant)
{
    ProtobufCMessage *m = malloc(desc->sizeof_message);

    assert_non_null(m);
    desc->message_init(m);
    for (unsigned i = 0; i < desc->n_fields; i++) {
        fill_field(m, &desc->fields[i], depth, variant);
    }
    return m;
}

static void
assert_same_packing(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    size_t na = protobuf_c_message_get_packed_size(a);
    size_t nb = protobuf_c_message_get_packed_size(b);
    uint8_t *pa = malloc(na + 1), *pb = malloc(nb + 1);

    assert_int_equal(protobuf_c_message_pack(a, pa), na);
    assert_int_equal(protobuf_c_message_pack(b, pb), nb);
    if (na != nb || memcmp(pa, pb, na) != 0) {
        fail_msg("%s: packings differ (%zu and %zu bytes)", a->descriptor->name,
                 na, nb);
    }
    free(pa);
    free(pb);
}

/* Encodes m, decodes the text, and checks both the packing and that the
 * decoded message encodes to the same text. */
static void
round_trip(const ProtobufCMessage *m)
{
    char err[JSON_PB_ERR_MAX] = "", *text, *again;
    size_t len, len2;
    ProtobufCMessage *back;

    assert_int_equal(json_pb_encode(m, &text, &len, err, sizeof(err)), 0);
    if (json_pb_decode(m->descriptor, text, len, &back, err, sizeof(err)) !=
        0) {
        fail_msg("%s: %s in %s", m->descriptor->name, err, text);
    }
    assert_same_packing(m, back);
    assert_int_equal(json_pb_encode(back, &again, &len2, err, sizeof(err)), 0);
    assert_string_equal(text, again);
    free(again);
    free(text);
    protobuf_c_message_free_unpacked(back, NULL);
}

static void
round_trip_all(const ProtobufCMessageDescriptor *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t v = 0; v < VARIANTS; v++) {
            ProtobufCMessage *m = fill(list[i], 0, v);

            round_trip(m);
            protobuf_c_message_free_unpacked(m, NULL);
        }
        ProtobufCMessage *empty = malloc(list[i]->sizeof_message);

        list[i]->message_init(empty);
        round_trip(empty);
        protobuf_c_message_free_unpacked(empty, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        for (unsigned f = 0; f < list[i]->n_fields; f++) {
            if (!in_list((const void *const *)covered, n_covered,
                         &list[i]->fields[f])) {
                fail_msg("%s.%s never set by the filler", list[i]->name,
                         list[i]->fields[f].name);
            }
        }
    }
}

/* The `message Name {` lines of a .proto (nested ones too). */
static size_t
count_messages(const char *path)
{
    char line[512];
    size_t n = 0;
    FILE *f = fopen(path, "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = line + strspn(line, " \t");

        n += strncmp(p, "message ", 8) == 0;
    }
    fclose(f);
    return n;
}

/* Every message of the .proto files of proto/: all of them listed, every
 * service's input and output among them, each one's fields all set and round
 * tripped. */
static void
test_every_shipped_message(void **state)
{
    static const char *const files[] = {"once", "grants", "kv", "outbox",
                                        "record"};
    size_t declared = 0, methods = 0;
    char path[512];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s.proto", PROTO_DIR, files[i]);
        declared += count_messages(path);
    }
    assert_int_equal(shipped_n_messages, declared);
    assert_true(shipped_n_services >= 6);
    for (size_t s = 0; s < shipped_n_services; s++) {
        for (unsigned j = 0; j < shipped_services[s]->n_methods; j++) {
            assert_true(in_list((const void *const *)shipped_messages,
                                shipped_n_messages,
                                shipped_services[s]->methods[j].input));
            assert_true(in_list((const void *const *)shipped_messages,
                                shipped_n_messages,
                                shipped_services[s]->methods[j].output));
            methods++;
        }
    }
    print_message("%zu messages, %zu services, %zu methods\n",
                  shipped_n_messages, shipped_n_services, methods);
    round_trip_all(shipped_messages, shipped_n_messages);
}

/* Every scalar type, a oneof of scalars, fields with presence. */
static void
test_every_type(void **state)
{
    assert_int_equal(typed_n_messages, 4);
    round_trip_all(typed_messages, typed_n_messages);
}

static char *
encode(const ProtobufCMessage *m)
{
    char err[JSON_PB_ERR_MAX] = "", *text;
    size_t len;

    if (json_pb_encode(m, &text, &len, err, sizeof(err)) != 0) {
        fail_msg("encode: %s", err);
    }
    assert_int_equal(strlen(text), len);
    return text;
}

static void
assert_encodes(const ProtobufCMessage *m, const char *want)
{
    char *text = encode(m);

    assert_string_equal(text, want);
    free(text);
}

static ProtobufCMessage *
decode(const ProtobufCMessageDescriptor *d, const char *json)
{
    char err[JSON_PB_ERR_MAX] = "";
    ProtobufCMessage *m = NULL;

    if (json_pb_decode(d, json, strlen(json), &m, err, sizeof(err)) != 0) {
        fail_msg("decode %s: %s", json, err);
    }
    return m;
}

/* Field names, 64-bit integers as strings, base64, enum names, oneofs. */
static void
test_exact_text(void **state)
{
    Once__V1__IncrementRequest inc = ONCE__V1__INCREMENT_REQUEST__INIT;
    Once__V1__OpenLeaseResponse open = ONCE__V1__OPEN_LEASE_RESPONSE__INIT;
    Once__V1__LeaseInfoResponse info = ONCE__V1__LEASE_INFO_RESPONSE__INIT;
    Once__V1__KvPut put = ONCE__V1__KV_PUT__INIT;
    Once__V1__KvOp op = ONCE__V1__KV_OP__INIT;
    Once__Test__AllTypes all = ONCE__TEST__ALL_TYPES__INIT;
    uint8_t key[] = {0xfb, 0xff}, val[] = {'h', 'i'};
    int32_t r[] = {1, -2};

    assert_encodes(&inc.base, "{}");
    inc.name = "jobs";
    inc.by = -5;
    assert_encodes(&inc.base, "{\"name\":\"jobs\",\"by\":\"-5\"}");
    open.client_id = UINT64_MAX;
    open.max_request_bytes = 65536;
    assert_encodes(&open.base, "{\"clientId\":\"18446744073709551615\","
                               "\"maxRequestBytes\":\"65536\"}");
    info.state = ONCE__V1__LEASE_STATE__LEASE_LIVE;
    info.watermark_durable = 3;
    assert_encodes(&info.base,
                   "{\"state\":\"LEASE_LIVE\",\"watermarkDurable\":\"3\"}");
    info.state = 99; /* a number no name has: written as the number */
    assert_encodes(&info.base, "{\"state\":99,\"watermarkDurable\":\"3\"}");
    put.key = (ProtobufCBinaryData){sizeof(key), key};
    put.value = (ProtobufCBinaryData){sizeof(val), val};
    put.lease = 1;
    op.op_case = ONCE__V1__KV_OP__OP_PUT;
    op.put = &put;
    assert_encodes(&op.base, "{\"put\":{\"key\":\"+/8=\",\"value\":\"aGk=\","
                             "\"lease\":true}}");
    all.fl = 0.1f; /* the float's 9 digits, not its double's 17 */
    all.db = -INFINITY;
    all.f32 = 1;
    all.sf32 = -2;
    assert_encodes(&all.base, "{\"f32\":1,\"sf32\":-2,\"fl\":0.100000001,"
                              "\"db\":\"-Infinity\"}");
    all.f32 = 0;
    all.sf32 = 0;
    all.fl = 0.5f;
    all.n_r_i32 = 2;
    all.r_i32 = r;
    all.choice_case = ONCE__TEST__ALL_TYPES__CHOICE_CHOICE_TEXT;
    all.choice_text = ""; /* a oneof member is written though empty */
    assert_encodes(&all.base, "{\"fl\":0.5,\"db\":\"-Infinity\","
                              "\"rI32\":[1,-2],"
                              "\"choiceText\":\"\"}");
    all.n_r_i32 = 0;
    all.choice_case = 0;
    all.fl = 0;
    all.db = -0.0; /* packed by protobuf-c (not all bits 0): kept */
    assert_encodes(&all.base, "{\"db\":-0}");
    round_trip(&all.base);
}

/* Original names, numbers for 64-bit and strings for 32-bit integers,
 * enums by number, any base64, null, NaN. */
static void
test_lenient_input(void **state)
{
    Once__V1__OpenLeaseResponse *o =
        (void *)decode(&once__v1__open_lease_response__descriptor,
                       " {\"client_id\": 7, \"ttl_ms\": \"9007199254740993\", "
                       "\"maxRequestBytes\": null}\n");
    Once__Test__AllTypes *a;

    assert_int_equal(o->client_id, 7);
    assert_int_equal(o->ttl_ms, 9007199254740993ull);
    assert_int_equal(o->max_request_bytes, 0);
    protobuf_c_message_free_unpacked(&o->base, NULL);

    a = (void *)decode(&once__test__all_types__descriptor,
                       "{\"i32\":\"-7\",\"u32\":4294967295,\"sf64\":"
                       "\"-9223372036854775808\",\"color\":2,\"r_color\":"
                       "[\"RED\",1],\"db\":\"NaN\",\"fl\":\"Infinity\","
                       "\"rBlob\":[\"-_8\",\"+/8\",\"-_8=\",\"\"],"
                       "\"inner\":{},\"text\":null,"
                       "\"r_text\":null,\"choice_inner\":null}");
    assert_int_equal(a->i32, -7);
    assert_int_equal(a->u32, UINT32_MAX);
    assert_true(a->sf64 == INT64_MIN);
    assert_int_equal(a->color, ONCE__TEST__COLOR__BLUE);
    assert_int_equal(a->n_r_color, 2);
    assert_int_equal(a->r_color[0], a->r_color[1]);
    assert_true(isnan(a->db) && isinf(a->fl) && a->fl > 0);
    assert_int_equal(a->n_r_blob, 4);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(a->r_blob[i].len, 2);
        assert_memory_equal(a->r_blob[i].data, "\xfb\xff", 2);
    }
    assert_int_equal(a->r_blob[3].len, 0);
    assert_non_null(a->inner);
    assert_string_equal(a->text, "");
    assert_int_equal(a->n_r_text, 0);
    assert_int_equal(a->choice_case, ONCE__TEST__ALL_TYPES__CHOICE__NOT_SET);
    protobuf_c_message_free_unpacked(&a->base, NULL);
}

/* A field with presence is written when set, even to its default, and
 * not when unset, whatever it holds; null leaves it unset. */
static void
test_presence(void **state)
{
    Once__Test__Presence p = ONCE__TEST__PRESENCE__INIT;
    Once__Test__Presence *back;
    char *text;

    assert_encodes(&p.base, "{\"id\":\"0\"}");
    p.has_count = 1;
    p.has_flag = 1;
    p.note = "";
    p.count = 0;
    p.five = 9; /* not has_five: left out */
    assert_encodes(&p.base,
                   "{\"count\":0,\"note\":\"\",\"flag\":false,\"id\":\"0\"}");
    text = encode(&p.base);
    back = (void *)decode(&once__test__presence__descriptor, text);
    assert_true(back->has_count && back->has_flag && !back->has_blob);
    assert_int_equal(back->five, 5);
    p.five = 5; /* what decoding leaves in an unset field with a default */
    assert_same_packing(&back->base, &p.base);
    protobuf_c_message_free_unpacked(&back->base, NULL);
    free(text);
    back = (void *)decode(&once__test__presence__descriptor,
                          "{\"count\":null,\"next\":null,\"blob\":\"\"}");
    assert_false(back->has_count);
    assert_null(back->next);
    assert_true(back->has_blob);
    protobuf_c_message_free_unpacked(&back->base, NULL);
}

/* A string field that is not UTF-8 cannot be written as JSON. */
static void
test_encode_refuses_bad_utf8(void **state)
{
    Once__V1__RenewLeaseResult r = ONCE__V1__RENEW_LEASE_RESULT__INIT;
    Once__V1__RenewLeasesResponse rs = ONCE__V1__RENEW_LEASES_RESPONSE__INIT;
    Once__V1__LeaseInfoResponse info = ONCE__V1__LEASE_INFO_RESPONSE__INIT;
    Once__V1__RenewLeaseResult *list[] = {&r, &r};
    char err[JSON_PB_ERR_MAX], *text = (void *)1;
    size_t len;

    info.principal = "ops\xe2\x82";
    assert_int_equal(json_pb_encode(&info.base, &text, &len, err, sizeof(err)),
                     EINVAL);
    assert_null(text);
    assert_string_equal(err, "field \"principal\": string is not UTF-8");
    rs.n_results = 2;
    rs.results = list;
    r.client_id = 1;
    assert_encodes(&rs.base, "{\"results\":[{\"clientId\":\"1\"},"
                             "{\"clientId\":\"1\"}]}");
}

struct refusal {
    const ProtobufCMessageDescriptor *desc;
    const char *json;
    const char *err;
};

#define ALL  &once__test__all_types__descriptor
#define INC  &once__v1__increment_request__descriptor
#define OPEN &once__v1__open_lease_response__descriptor

static const struct refusal refusals[] = {
    {INC, "{", "body: not valid JSON"},
    {INC, "", "body: not valid JSON"},
    {INC, "[]", "body: expected an object"},
    {INC, "{} {}", "body: bytes after the JSON value"},
    {INC, "{\"nope\":1}", "field \"nope\": unknown field"},
    {INC, "{\"Name\":\"a\"}", "field \"Name\": unknown field"},
    {INC, "{\"na\\\"me\":1}", "field \"?\": unknown field"},
    {INC, "{\"name\":5}", "field \"name\": expected a string"},
    {INC, "{\"name\":\"a\",\"name\":\"b\"}", "field \"name\": given twice"},
    {OPEN, "{\"ttlMs\":\"1\",\"ttl_ms\":null}", "field \"ttlMs\": given twice"},
    {INC, "{\"by\":1.5}", "field \"by\": expected an integer, not a fraction"},
    {INC, "{\"by\":true}", "field \"by\": expected an integer"},
    {INC, "{\"by\":\"12a\"}", "field \"by\": expected an integer"},
    {INC, "{\"by\":\"\"}", "field \"by\": expected an integer"},
    {INC, "{\"by\":\"+1\"}", "field \"by\": expected an integer"},
    {INC, "{\"by\":\"1.0\"}", "field \"by\": expected an integer"},
    {INC, "{\"by\":\"9223372036854775808\"}",
     "field \"by\": integer out of range"},
    {INC, "{\"by\":\"-9223372036854775809\"}",
     "field \"by\": integer out of range"},
    {INC, "{\"by\":9007199254740993}",
     "field \"by\": integer too large for a JSON number: send it as a "
     "string"},
    {INC, "{\"by\":1e400}", "field \"by\": integer out of range"},
    {OPEN, "{\"clientId\":\"18446744073709551616\"}",
     "field \"clientId\": integer out of range"},
    {OPEN, "{\"clientId\":\"-1\"}", "field \"clientId\": integer out of range"},
    {OPEN, "{\"clientId\":-1}", "field \"clientId\": integer out of range"},
    {ALL, "{\"u32\":4294967296}", "field \"u32\": integer out of range"},
    {ALL, "{\"i32\":-2147483649}", "field \"i32\": integer out of range"},
    {ALL, "{\"i32\":\"2147483648\"}", "field \"i32\": integer out of range"},
    {ALL, "{\"flag\":\"true\"}", "field \"flag\": expected true or false"},
    {ALL, "{\"db\":\"nan\"}", "field \"db\": expected a number"},
    {ALL, "{\"db\":[]}", "field \"db\": expected a number"},
    {ALL, "{\"fl\":1e39}", "field \"fl\": number out of range for a float"},
    {ALL, "{\"text\":\"\xff\"}", "field \"text\": invalid UTF-8"},
    {ALL, "{\"text\":\"\xc0\xaf\"}", "field \"text\": invalid UTF-8"},
    {ALL, "{\"text\":\"a\\u0000b\"}", "body: \\u0000 in a string"},
    {ALL, "{\"text\\u0000x\":\"a\"}", "body: \\u0000 in a string"},
    {ALL, "{\"blob\":\"@@@@\"}", "field \"blob\": invalid base64"},
    {ALL, "{\"blob\":\"+_8=\"}", "field \"blob\": invalid base64"},
    {ALL, "{\"blob\":\"+/8==\"}", "field \"blob\": invalid base64"},
    {ALL, "{\"blob\":3}", "field \"blob\": expected base64 text"},
    {ALL, "{\"color\":\"GREEN\"}", "field \"color\": unknown enum value name"},
    {ALL, "{\"color\":true}",
     "field \"color\": expected an enum name or number"},
    {ALL, "{\"color\":2147483648}", "field \"color\": integer out of range"},
    {ALL, "{\"choiceI64\":\"1\",\"choiceText\":\"x\"}",
     "field \"choiceText\": another member of its oneof is set"},
    {ALL, "{\"rI32\":1}", "field \"rI32\": expected an array"},
    {ALL, "{\"rI32\":[1,null]}", "field \"rI32[1]\": null in an array"},
    {ALL, "{\"rI32\":[[1]]}", "field \"rI32[0]\": expected an integer"},
    {ALL, "{\"inner\":5}", "field \"inner\": expected an object"},
    {ALL, "{\"rInner\":[{},{\"weight\":\"x\"}]}",
     "field \"rInner[1].weight\": expected an integer"},
    {&once__v1__renew_leases_response__descriptor,
     "{\"results\":[{\"clientId\":\"1\"},{\"code\":\"NOPE\"}]}",
     "field \"results[1].code\": unknown enum value name"},
    {&once__v1__kv_txn_request__descriptor,
     "{\"thenOps\":[{\"put\":{\"key\":\"a\"}}]}",
     "field \"thenOps[0].put.key\": invalid base64"},
};

/* Each refusal gives its message and no message. */
static void
test_refusals(void **state)
{
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *r = &refusals[i];
        char err[JSON_PB_ERR_MAX] = "";
        ProtobufCMessage *m = (void *)1;
        int rv = json_pb_decode(r->desc, r->json, strlen(r->json), &m, err,
                                sizeof(err));

        if (rv == 0) {
            protobuf_c_message_free_unpacked(m, NULL);
            fail_msg("accepted %s", r->json);
        }
        assert_int_equal(rv, EINVAL);
        assert_null(m);
        if (strcmp(err, r->err) != 0) {
            fail_msg("%s: got '%s', want '%s'", r->json, err, r->err);
        }
    }
}

/* A NUL inside the length given is not the end of the body. */
static void
test_length_is_the_callers(void **state)
{
    char err[JSON_PB_ERR_MAX];
    ProtobufCMessage *m;

    assert_int_equal(json_pb_decode(INC, "{}\0{}", 5, &m, err, sizeof(err)),
                     EINVAL);
    assert_string_equal(err, "body: bytes after the JSON value");
    /* only the first 12 bytes are the body: the rest is never read */
    assert_int_equal(json_pb_decode(INC, "{\"name\":\"a\"}garbage", 12, &m, err,
                                    sizeof(err)),
                     0);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* {"child":{"child":...{"leaf":1}}} with n objects. */
static char *
tree_json(size_t n)
{
    char *s = malloc(n * 10 + 16), *p = s;

    for (size_t i = 1; i < n; i++) {
        p += sprintf(p, "{\"child\":");
    }
    p += sprintf(p, "{\"leaf\":1}");
    for (size_t i = 1; i < n; i++) {
        *p++ = '}';
    }
    *p = '\0';
    return s;
}

static void
test_depth_bound(void **state)
{
    char err[JSON_PB_ERR_MAX], *ok = tree_json(JSON_PB_MAX_DEPTH);
    char *deep = tree_json(JSON_PB_MAX_DEPTH + 1);
    char *very = tree_json(5000);
    ProtobufCMessage *m;

    assert_int_equal(json_pb_decode(&once__test__tree__descriptor, ok,
                                    strlen(ok), &m, err, sizeof(err)),
                     0);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_int_equal(json_pb_decode(&once__test__tree__descriptor, deep,
                                    strlen(deep), &m, err, sizeof(err)),
                     EINVAL);
    assert_int_equal(strncmp(err, "field \"...", 10), 0);
    assert_non_null(strstr(err, "child.child\": messages nested too deep"));
    assert_int_equal(json_pb_decode(&once__test__tree__descriptor, very,
                                    strlen(very), &m, err, sizeof(err)),
                     EINVAL);
    free(ok);
    free(deep);
    free(very);
}

/* Every prefix of, and a bounded number of byte changes in, the text of
 * filled messages: decoded or refused, never a crash or a leak (ASan). */
static void
test_mangled_input(void **state)
{
    static const char subst[] = "{}[]\",:0-9eE.\\ntfu \x00\xff";
    uint32_t seed = 12345;
    size_t tries = 0, accepted = 0;

    for (size_t i = 0; i < shipped_n_messages + typed_n_messages; i++) {
        const ProtobufCMessageDescriptor *d =
            i < shipped_n_messages ? shipped_messages[i]
                                   : typed_messages[i - shipped_n_messages];
        ProtobufCMessage *m = fill(d, 0, i), *out;
        char *text = encode(m), err[JSON_PB_ERR_MAX];
        size_t len = strlen(text);

        for (size_t cut = 0; cut < len && cut < 400; cut++, tries++) {
            char *part = malloc(cut ? cut : 1); /* exactly cut: ASan */

            memcpy(part, text, cut);
            if (json_pb_decode(d, part, cut, &out, err, sizeof(err)) == 0) {
                protobuf_c_message_free_unpacked(out, NULL);
                accepted++;
            }
            free(part);
        }
        for (size_t k = 0; k < 200; k++, tries++) {
            char *copy = malloc(len);

            memcpy(copy, text, len);
            for (int j = 0; j < 3; j++) {
                seed = seed * 1103515245u + 12345u;
                copy[(seed >> 8) % len] =
                    subst[(seed >> 20) % (sizeof(subst) - 1)];
            }
            if (json_pb_decode(d, copy, len, &out, err, sizeof(err)) == 0) {
                protobuf_c_message_free_unpacked(out, NULL);
                accepted++;
            }
            free(copy);
        }
        free(text);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    print_message("%zu mangled inputs, %zu decoded\n", tries, accepted);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_shipped_message),
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_exact_text),
        cmocka_unit_test(test_lenient_input),
        cmocka_unit_test(test_presence),
        cmocka_unit_test(test_encode_refuses_bad_utf8),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_length_is_the_callers),
        cmocka_unit_test(test_depth_bound),
        cmocka_unit_test(test_mangled_input),
    };

    if (getenv("ONCE_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("ONCE_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
