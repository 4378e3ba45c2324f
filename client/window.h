/*
 * window.h — the set of incomplete seqs of one client id.
 *
 * Owns: which seqs have been assigned and not yet completed, and from that
 * first_incomplete (the lowest such seq, or next_seq when there is none).
 * Invariant: base <= every incomplete seq < next; base is incomplete unless
 * base == next. Seqs are handed out in increasing order, so assignment is
 * O(1) and completion amortized O(1) (base only moves forward).
 * Never: locks anything — the caller serializes access (lease_gate.c holds
 * lease_gate.win_lock around every window_* call); never hands a seq out
 * twice.
 */
#ifndef CLIENT_WINDOW_H
#define CLIENT_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct window {
    uint64_t base; /* first_incomplete */
    uint64_t next; /* the seq window_assign hands out next */
    /* done[(s - base + head) % cap] != 0 when seq s in [base, next) has
     * completed. Owned by the window; malloc'd, freed by window_fini. */
    uint8_t *done;
    size_t head;
    size_t cap;
} window;

/* An empty window whose first seq will be first_seq (>= 1). */
void window_init(window *w, uint64_t first_seq);

/* Frees the window's memory. NULL and repeated calls are accepted. */
void window_fini(window *w);

/* Assigns the next seq and marks it incomplete. Returns 0, or ENOMEM
 * (nothing assigned). */
int window_assign(window *w, uint64_t *seq);

/* Marks seq complete. Seqs never assigned or already complete are ignored;
 * returns true when seq was incomplete. */
bool window_complete(window *w, uint64_t seq);

/* True when seq was assigned and is still incomplete. */
bool window_is_incomplete(const window *w, uint64_t seq);

/* The lowest incomplete seq, or the next seq to assign when none is. */
uint64_t window_first_incomplete(const window *w);

#endif /* CLIENT_WINDOW_H */
