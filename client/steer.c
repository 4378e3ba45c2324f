/*
 * steer.c — the target replica of a handle with several URLs (steer.h).
 *
 * Owns: the decisions of steer.h: follow a hint, ignore it, rotate.
 * Invariant: cur < n at all times; gen changes exactly when cur does, both
 * under the caller's lock; a decision about an older gen moves nothing.
 * Never: does I/O or allocates after steer_init; never moves a handle
 * with one URL.
 */
#include "client/steer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
steer_init(steer *s, const char *urls)
{
    const char *p = urls;

    memset(s, 0, sizeof(*s));
    while (p != NULL && *p != '\0' && s->n < STEER_URLS_MAX) {
        size_t len = strcspn(p, ",");

        if (len > 0) {
            if ((s->urls[s->n] = strndup(p, len)) == NULL) {
                return ENOMEM;
            }
            s->n++;
        }
        p += len;
        if (*p == ',') {
            p++;
        }
    }
    return s->n > 0 ? 0 : EINVAL;
}

void
steer_fini(steer *s)
{
    for (size_t i = 0; i < STEER_URLS_MAX; i++) {
        free(s->urls[i]);
        s->urls[i] = NULL;
    }
    s->n = 0;
}

uint64_t
steer_gen(const steer *s)
{
    return atomic_load(&s->gen);
}

const char *
steer_target(const steer *s)
{
    return s->urls[atomic_load(&s->cur)];
}

/* Makes i the target. Caller's lock. */
static void
steer_move_to(steer *s, size_t i)
{
    atomic_store(&s->cur, i);
    atomic_fetch_add(&s->gen, 1);
    /* Nothing heard from the new target yet: a reply timeout there may
     * move on again. */
    atomic_store(&s->heard_ms, 0);
}

steer_move
steer_hint(steer *s, uint64_t gen, const char *leader, uint64_t now_ms)
{
    size_t cur = atomic_load(&s->cur);

    atomic_fetch_add_explicit(&s->not_leader, 1, memory_order_relaxed);
    if (s->n < 2) {
        return STEER_STAY;
    }
    if (gen != atomic_load(&s->gen)) {
        return STEER_STALE;
    }
    atomic_store(&s->refused[cur], true);
    atomic_store(&s->led[cur], false);
    for (size_t i = 0; leader != NULL && leader[0] != '\0' && i < s->n; i++) {
        if (strcmp(s->urls[i], leader) != 0) {
            continue;
        }
        if (i == cur) {
            /* A follower naming itself: nothing to follow. */
            atomic_fetch_add_explicit(&s->ignored, 1, memory_order_relaxed);
            return STEER_STAY;
        }
        if (s->down_ms[i] != 0 && now_ms - s->down_ms[i] < STEER_DOWN_MS) {
            /* Found down a moment ago: the follower's view is older than
             * ours (the leader key outlives its process by up to one etcd
             * lease TTL). Stay and back off. */
            atomic_fetch_add_explicit(&s->ignored, 1, memory_order_relaxed);
            return STEER_STAY;
        }
        steer_move_to(s, i);
        atomic_fetch_add_explicit(&s->followed, 1, memory_order_relaxed);
        return STEER_MOVED;
    }
    if (leader == NULL || leader[0] == '\0') {
        return STEER_STAY; /* no hint (an older onced): back off here */
    }
    /* A leader under a URL this handle was not given (its --advertise
     * spells it differently): never dialed; try the next URL of ours. */
    atomic_fetch_add_explicit(&s->ignored, 1, memory_order_relaxed);
    steer_move_to(s, (cur + 1) % s->n);
    atomic_fetch_add_explicit(&s->rotated, 1, memory_order_relaxed);
    return STEER_MOVED;
}

bool
steer_leaderless(steer *s, uint64_t gen)
{
    size_t cur = atomic_load(&s->cur);

    if (s->n < 2 || gen != atomic_load(&s->gen)) {
        return false;
    }
    atomic_store(&s->refused[cur], true);
    atomic_store(&s->led[cur], false);
    steer_move_to(s, (cur + 1) % s->n);
    atomic_fetch_add_explicit(&s->rotated, 1, memory_order_relaxed);
    return true;
}

bool
steer_rotate(steer *s, uint64_t gen, uint64_t sent_ms, uint64_t now_ms)
{
    size_t cur = atomic_load(&s->cur);

    if (s->n < 2 || gen != atomic_load(&s->gen) ||
        atomic_load(&s->heard_ms) > sent_ms) {
        return false; /* moved already, or the target answers others */
    }
    /* A follower gone silent is not a leader others may still name. */
    s->down_ms[cur] = atomic_load(&s->refused[cur]) ? 0
                      : now_ms != 0                 ? now_ms
                                                    : 1;
    steer_move_to(s, (cur + 1) % s->n);
    atomic_fetch_add_explicit(&s->rotated, 1, memory_order_relaxed);
    return true;
}

void
steer_heard(steer *s, uint64_t gen, bool served, uint64_t now_ms)
{
    if (s->n > 1) {
        atomic_store_explicit(&s->heard_ms, now_ms, memory_order_relaxed);
        if (served && gen == atomic_load(&s->gen)) {
            size_t cur = atomic_load(&s->cur);

            /* The leader is the one that answered last: no other. Written
             * only when that changes (this runs on every reply). */
            if (!atomic_load(&s->led[cur])) {
                for (size_t i = 0; i < s->n; i++) {
                    atomic_store(&s->led[i], i == cur);
                }
            }
            if (atomic_load(&s->refused[cur])) {
                atomic_store(&s->refused[cur], false);
            }
        }
    }
}

bool
steer_led(const steer *s)
{
    return s->n > 1 && atomic_load(&s->led[atomic_load(&s->cur)]);
}

bool
steer_down_within(const steer *s, uint64_t now_ms, uint64_t window_ms)
{
    uint64_t down = s->down_ms[atomic_load(&s->cur)];

    return s->n > 1 && down != 0 && now_ms - down < window_ms;
}
