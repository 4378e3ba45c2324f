/*
 * cmd_backup.c — `oncectl admin backup DIR`: an online, consistent backup
 * of a running onced into a new data folder, through Admin.Snapshot.
 *
 * Owns: the chunk loop (snapshot id, the last key received) and the new
 * folder while it is written (store/load.c).
 * Invariant: DIR is a whole store or is refused by onced: the folder
 * becomes usable only after the last chunk (load.c's marker), so a backup
 * that failed half-way is never mistaken for one.
 * Never: writes into a folder holding onced data; retries a chunk of a
 * released snapshot (it starts nothing again: the backup fails and says
 * so).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "once/client.h"
#include "proto/once.pb-c.h"
#include "proto/wire.h"
#include "proto/reasons.h"
#include "store/store.h"

/* Far more chunks than any store holds at 1 MiB each (a bounded loop). */
#define BACKUP_CHUNKS_MAX (64u * 1024u * 1024u)

static const char usage_backup[] =
    "usage: oncectl [GLOBAL OPTIONS] admin backup DIR [--chunk-bytes N]\n"
    "\n"
    "Copies the whole store of the running onced, as it was at one moment,\n"
    "into DIR (a new or empty folder): every effect with its completion\n"
    "record, read in chunks from one LevelDB snapshot onced pins for it\n"
    "(Admin.Snapshot), while onced goes on serving. DIR is then a data\n"
    "folder: `onced --data DIR` opens it (docs/operations.md, \"Backup and\n"
    "restore\"). Principals, policy and key files are not copied: copy\n"
    "them from the data folder yourself. On a replica cluster the backup\n"
    "carries the log index it holds. Operators only (Admin methods).\n"
    "  --chunk-bytes N  bytes of keys and values per request (default\n"
    "                   1048576, at most 2097152): onced reads each chunk\n"
    "                   between two calls, so smaller chunks delay its\n"
    "                   calls less\n"
    "  Output: backup of log index N: P keys, B bytes in DIR\n"
    "          | --json {\"dir\":S,\"log_index\":N,\"keys\":N,\"bytes\":N}\n";

typedef struct backup {
    store_loader *ld;
    uint32_t chunk; /* max_bytes; 0: onced's default */
    uint64_t id;
    uint64_t log_index;
    uint64_t keys;
    uint64_t bytes;
    uint8_t *last; /* the last key received (malloc'd) */
    size_t last_len;
} backup;

static int
backup_fail(once_status *st, int code, const char *reason, const char *msg)
{
    st->code = code;
    snprintf(st->reason, sizeof(st->reason), "%s", reason);
    snprintf(st->message, sizeof(st->message), "%s", msg);
    return code;
}

/* LevelDB's order: bytes, then the shorter first. */
static int
backup_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c != 0 ? c : (alen > blen) - (alen < blen);
}

/* One chunk: sends the request, loads the pairs. *done at the last. */
static int
backup_chunk(once_client *c, backup *b, bool *done, once_status *st)
{
    const char *method =
        wire_method_name(&once__v1__admin__descriptor, "Snapshot");
    Once__V1__SnapshotRequest req = ONCE__V1__SNAPSHOT_REQUEST__INIT;
    Once__V1__SnapshotResponse *r;
    uint8_t *buf;
    void *resp = NULL;
    size_t len, resp_len = 0;
    int rv;

    if (method == NULL) {
        return backup_fail(st, ONCE_UNIMPLEMENTED, ONCE_REASON_NO_METHOD,
                           "oncectl was built without Admin.Snapshot");
    }
    req.snapshot_id = b->id;
    req.after_key.data = b->last;
    req.after_key.len = b->last_len;
    req.max_bytes = b->chunk;
    if ((buf = malloc(protobuf_c_message_get_packed_size(&req.base) + 1)) ==
        NULL) {
        return backup_fail(st, ONCE_INTERNAL, ONCE_REASON_NO_MEMORY,
                           "out of memory");
    }
    len = protobuf_c_message_pack(&req.base, buf);
    rv = once_call(c, method, false, NULL, buf, len, &resp, &resp_len, st);
    free(buf);
    if (rv != ONCE_OK) {
        return rv;
    }
    r = once__v1__snapshot_response__unpack(NULL, resp_len, resp);
    once_free(resp);
    if (r == NULL || r->snapshot_id == 0 ||
        (b->id != 0 && r->snapshot_id != b->id) ||
        (b->id != 0 && r->log_index != b->log_index)) {
        if (r != NULL) {
            once__v1__snapshot_response__free_unpacked(r, NULL);
        }
        return backup_fail(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                           "the reply is not the next chunk of the snapshot");
    }
    b->id = r->snapshot_id;
    b->log_index = r->log_index;
    for (size_t i = 0; i < r->n_pairs && rv == ONCE_OK; i++) {
        const Once__V1__SnapshotPair *p = r->pairs[i];
        uint8_t *k;

        if (b->last != NULL && backup_key_cmp(p->key.data, p->key.len, b->last,
                                              b->last_len) <= 0) {
            rv = backup_fail(st, ONCE_INTERNAL, ONCE_REASON_BAD_RESPONSE,
                             "snapshot keys out of order");
            break;
        }
        if (store_load_put(b->ld, p->key.data, p->key.len, p->value.data,
                           p->value.len) != 0) {
            rv = backup_fail(st, ONCE_INTERNAL, REASON_WRITE_FAILED,
                             "cannot write a key into the backup folder");
            break;
        }
        if ((k = malloc(p->key.len + 1)) == NULL) {
            rv = backup_fail(st, ONCE_INTERNAL, ONCE_REASON_NO_MEMORY,
                             "out of memory");
            break;
        }
        memcpy(k, p->key.data, p->key.len);
        free(b->last);
        b->last = k;
        b->last_len = p->key.len;
        b->keys++;
        b->bytes += p->key.len + p->value.len;
    }
    *done = r->done;
    once__v1__snapshot_response__free_unpacked(r, NULL);
    return rv;
}

int
cmd_admin_backup(const cli *g, int argc, char **argv)
{
    const char *dir = NULL;
    backup b = {0};
    once_client *c = NULL;
    once_status st;
    char *err = NULL;
    bool done = false;
    int rv;

    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_backup, stdout);
            return ONCECTL_EXIT_OK;
        }
        if (is_global_opt(argv[i])) {
            return usage_error(g, GLOBAL_HINT, "misplaced option '%s'",
                               argv[i]);
        }
        if (strcmp(argv[i], "--chunk-bytes") == 0 && i + 1 < argc) {
            char *end = NULL;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > 2097152) {
                return usage_error(g, "--chunk-bytes is 1..2097152",
                                   "bad --chunk-bytes '%s'", argv[i]);
            }
            b.chunk = (uint32_t)v;
            continue;
        }
        if (dir != NULL || argv[i][0] == '-') {
            return usage_error(g, "usage: oncectl admin backup DIR",
                               "unexpected argument '%s' to admin backup",
                               argv[i]);
        }
        dir = argv[i];
    }
    if (dir == NULL) {
        return usage_error(g, "usage: oncectl admin backup DIR",
                           "admin backup needs a folder");
    }
    if (store_load_open(&b.ld, dir, &err) != 0) {
        backup_fail(&st, ONCE_FAILED_PRECONDITION, REASON_BAD_FOLDER,
                    err != NULL ? err : dir);
        free(err);
        return report_error(g, &st, NULL);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        for (uint64_t n = 0; n < BACKUP_CHUNKS_MAX && !done; n++) {
            if ((rv = backup_chunk(c, &b, &done, &st)) != ONCE_OK) {
                break;
            }
        }
    }
    once_client_close(c);
    free(b.last);
    if (rv == ONCE_OK && (rv = store_load_finish(b.ld, &err)) != 0) {
        backup_fail(&st, ONCE_INTERNAL, REASON_WRITE_FAILED,
                    err != NULL ? err : "cannot finish the backup folder");
        free(err);
        return report_error(g, &st, NULL);
    }
    if (rv != ONCE_OK) {
        store_load_abort(b.ld);
        return report_error(g, &st, NULL);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "dir", dir);
        json_u64(&j, "log_index", b.log_index);
        json_u64(&j, "keys", b.keys);
        json_u64(&j, "bytes", b.bytes);
        json_end(&j);
    } else {
        printf("backup of log index %" PRIu64 ": %" PRIu64 " keys, %" PRIu64
               " bytes in %s\n",
               b.log_index, b.keys, b.bytes, dir);
    }
    return ONCECTL_EXIT_OK;
}
