/*
 * inputs_import.c — the input store's files of before imported into its
 * journal at open (inputs_impl.h): each "<hash>-<attempt>.input" (a
 * packed once.client.KeptInput, inputs.proto) becomes the one-step chain
 * "input/<hash>-<attempt>" holding the same request, rpc id, principal,
 * state, sends, answer and times.
 *
 * Owns: the old format's reading and its mapping to a ChainRecord
 * (PENDING → PENDING, REJECTED → REPLIED with the refusal, LEASE_ENDED →
 * LEASE_ENDED; a method of "" is RequestGrant).
 * Invariant: a file is unlinked only after its chain is written (synced)
 * or found already kept (the chain wins: it is newer than any file, since
 * the file is removed right after the chain is written); so a crash, or a
 * second process opening the store at the same time, leaves each input as
 * a file or as a chain, never neither, and never under a second rpc id
 * (the test build's crash point import_written lies between the two:
 * test_grants c19_import_crash_between_write_and_unlink).
 * Never: sends anything; changes an input's rpc id; removes a file it
 * could not read or decode (it stays for the next open, unlisted).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/chain_seams.h"
#include "client/inputs.pb-c.h"
#include "client/inputs_impl.h"
#include "client/journal_files.h"
#include "client/status.h"
#include <once/inputs.h>

typedef Once__Client__KeptInput kept;

typedef struct import_run {
    once_journal *j;
    int dirfd;
    once_status *st; /* the first failure */
} import_run;

/* The chain state of a kept input's state; 0 for none known. */
static uint32_t
chain_state_of(uint32_t input_state)
{
    switch (input_state) {
    case ONCE_INPUT_PENDING:
        return ONCE_CHAIN_PENDING;
    case ONCE_INPUT_REJECTED:
        return ONCE_CHAIN_REPLIED;
    case ONCE_INPUT_LEASE_ENDED:
        return ONCE_CHAIN_LEASE_ENDED;
    default:
        return 0;
    }
}

/* k as the record of chain id (borrowing k's fields). */
static void
record_of(chain_rec *w, const kept *k, char *id)
{
    once__client__chain_record__init(w);
    w->version = 1;
    w->chain_id = id;
    w->principal = k->principal;
    w->state = chain_state_of(k->state);
    w->method = k->method[0] != '\0' ? k->method : INPUTS_REQUEST_GRANT;
    w->request = k->request;
    w->client_id = k->client_id;
    w->seq = k->seq;
    w->sends = k->sends;
    w->code = k->code;
    w->reason = k->reason;
    w->message = k->message;
    w->created_unix_ms = k->kept_unix_ms;
    w->updated_unix_ms = k->updated_unix_ms;
}

/* Writes k as chain id unless the journal keeps it already. */
static int
import_kept(import_run *x, const kept *k, char *id)
{
    chain_rec w, *have = NULL;
    int rv = journal_get(x->j, id, &have, x->st);

    if (rv == ONCE_OK) {
        once__client__chain_record__free_unpacked(have, NULL);
        return ONCE_OK; /* the chain wins */
    }
    if (rv != ONCE_NOT_FOUND) {
        return rv;
    }
    status_clear(x->st);
    record_of(&w, k, id);
    return journal_put(x->j, &w, true, x->st);
}

/* jfiles_each's callback: one file of before. */
static int
import_one(const char *name, void *arg)
{
    import_run *x = arg;
    size_t stem = strlen(name) - strlen(INPUTS_OLD_SUFFIX), vlen;
    char id[JFILES_NAME_MAX];
    uint8_t *v;
    kept *k;
    int e;

    if (stem + sizeof(INPUTS_CHAIN_PREFIX) > sizeof(id) ||
        jfiles_read(x->dirfd, name, &v, &vlen) != 0) {
        return 0;
    }
    k = once__client__kept_input__unpack(NULL, vlen, v);
    free(v);
    if (k == NULL || chain_state_of(k->state) == 0) {
        once__client__kept_input__free_unpacked(k, NULL);
        return 0;
    }
    snprintf(id, sizeof(id), INPUTS_CHAIN_PREFIX "%.*s", (int)stem, name);
    e = import_kept(x, k, id);
    once__client__kept_input__free_unpacked(k, NULL);
    if (e != ONCE_OK) {
        return EIO; /* x->st says what */
    }
    chain_crash_point("import_written");
    if ((e = jfiles_remove(x->dirfd, name)) != 0) {
        status_set(x->st, ONCE_INTERNAL, ONCE_REASON_INPUT_STORE,
                   "cannot remove %s after its import: %s", name, strerror(e));
    }
    return e;
}

int
inputs_import(once_journal *j, const char *dir, once_status *st)
{
    import_run x = {j, -1, st};
    int e;

    if ((x.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return status_set(st, ONCE_FAILED_PRECONDITION, ONCE_REASON_INPUT_STORE,
                          "cannot open %s: %s", dir, strerror(errno));
    }
    e = jfiles_each(x.dirfd, INPUTS_OLD_SUFFIX, import_one, &x);
    close(x.dirfd);
    if (e == 0) {
        return ONCE_OK;
    }
    if (e != EIO && st->code == ONCE_OK) {
        status_set(st, ONCE_INTERNAL, ONCE_REASON_INPUT_STORE,
                   "cannot import the inputs of %s: %s", dir, strerror(e));
    }
    return st->code != ONCE_OK ? st->code : ONCE_INTERNAL;
}
