/*
 * sp_ipc.h — one request and its reply to an ipc:// REP socket over a plain
 * AF_UNIX socket, speaking nng's SP framing by hand.
 *
 * Owns: the REQ side of one exchange: the 8-byte SP header, one framed
 * request (0x01, 64-bit big-endian length, a 4-byte request id, the body),
 * one framed reply, all within one deadline.
 * Invariant: the header is sent at once after connect, so the server's
 * listener never sees a peer hang up in the middle of its handshake (nng
 * 1.5.2 stops an ipc listener for that); every wait is bounded.
 * Never: creates an nng socket (nng 1.5.2's nng_close can wait for good,
 * which stalled test_replication's leader probes under TSan).
 */
#ifndef TESTS_SP_IPC_H
#define TESTS_SP_IPC_H

#include <stddef.h>
#include <stdint.h>

/* Sends req (len bytes) to the REP socket at path and reads its reply into
 * *resp (malloc'd, the caller frees) within timeout_ms. 0, or an nng error
 * number: NNG_ECONNREFUSED (nothing listens), NNG_ETIMEDOUT, NNG_ECLOSED
 * (the server hung up), NNG_EPROTO (not an SP REP peer), NNG_ENOMEM. */
int sp_ipc_call(const char *path, const void *req, size_t len, uint8_t **resp,
                size_t *resp_len, int timeout_ms);

#endif /* TESTS_SP_IPC_H */
