/*
 * window.c — incomplete-seq tracking for one client id.
 *
 * Owns: a ring of "done" flags covering [base, next). Completing base moves
 * base forward over every done flag behind it, so first_incomplete is
 * always w->base. The ring grows by doubling when the span of assigned
 * seqs outgrows it (the server's WINDOW_FULL bounds that span in practice).
 * Never: shrinks base past an incomplete seq; never locks (see window.h).
 */
#include "client/window.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_CAP_MIN 64

static size_t
window_slot(const window *w, uint64_t seq)
{
    return (w->head + (size_t)(seq - w->base)) % w->cap;
}

/* Doubles the ring, unrolling it so head becomes 0. */
static int
window_grow(window *w)
{
    size_t ncap = w->cap == 0 ? WINDOW_CAP_MIN : w->cap * 2;
    size_t span = (size_t)(w->next - w->base);
    uint8_t *nd;

    if (ncap < w->cap || (nd = calloc(ncap, 1)) == NULL) {
        return ENOMEM;
    }
    for (size_t i = 0; i < span; i++) {
        nd[i] = w->done[(w->head + i) % w->cap];
    }
    free(w->done);
    w->done = nd;
    w->head = 0;
    w->cap = ncap;
    return 0;
}

void
window_init(window *w, uint64_t first_seq)
{
    memset(w, 0, sizeof(*w));
    w->base = first_seq;
    w->next = first_seq;
}

void
window_fini(window *w)
{
    if (w == NULL) {
        return;
    }
    free(w->done);
    w->done = NULL;
    w->cap = 0;
    w->head = 0;
}

int
window_assign(window *w, uint64_t *seq)
{
    int rv;

    if (w->next == UINT64_MAX) {
        return ENOMEM; /* seq space exhausted; never wraps to reuse ids */
    }
    if ((uint64_t)(w->next - w->base) >= w->cap) {
        if ((rv = window_grow(w)) != 0) {
            return rv;
        }
    }
    w->done[window_slot(w, w->next)] = 0;
    *seq = w->next++;
    return 0;
}

bool
window_is_incomplete(const window *w, uint64_t seq)
{
    if (seq < w->base || seq >= w->next) {
        return false;
    }
    return w->done[window_slot(w, seq)] == 0;
}

bool
window_complete(window *w, uint64_t seq)
{
    if (!window_is_incomplete(w, seq)) {
        return false;
    }
    w->done[window_slot(w, seq)] = 1;
    while (w->base < w->next && w->done[w->head] != 0) {
        w->done[w->head] = 0;
        w->head = (w->head + 1) % w->cap;
        w->base++;
    }
    return true;
}

uint64_t
window_first_incomplete(const window *w)
{
    return w->base;
}
