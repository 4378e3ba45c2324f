/*
 * inputs_impl.h — the input store's inside (inputs.c, inputs_import.c):
 * a kept input is the one-step chain "input/<hash>-<attempt>" of the
 * store's journal of files (chain_impl.h), hash being the hex BLAKE2b-128
 * of the request id; the files of before are imported at open.
 *
 * Owns: the methods a kept input is sent to, the chain id prefix, and the
 * import's declaration.
 * Invariant: the chain id of (request_id, attempt) is the old file name
 * without ".input", behind "input/": an imported file and a new submit of
 * the same input name the same chain.
 * Never: included outside client/.
 */
#ifndef CLIENT_INPUTS_IMPL_H
#define CLIENT_INPUTS_IMPL_H

#include "client/journal_impl.h"

#define INPUTS_REQUEST_GRANT "/once.v1.Grants/RequestGrant"
#define INPUTS_ENQUEUE       "/once.v1.Grants/Enqueue"
#define INPUTS_CHAIN_PREFIX  "input/"
#define INPUTS_OLD_SUFFIX    ".input"

/*
 * Imports every file of before in dir ("<hash>-<attempt>.input", a packed
 * once.client.KeptInput) into j as its chain: written (synced), then the
 * file unlinked (and the directory synced). When j already keeps that
 * chain, the chain wins and the file just goes. A file that cannot be read
 * or decoded is left where it is. ONCE_OK, or INTERNAL / INPUT_STORE when
 * a chain cannot be written or a file removed (what was done stays done).
 */
int inputs_import(once_journal *j, const char *dir, once_status *st);

#endif /* CLIENT_INPUTS_IMPL_H */
