/*
 * steer.h — which of a handle's server URLs it sends to (a replicated
 * cluster's replicas, docs/replication.md): the replica believed to lead.
 *
 * The decisions, without the socket: conn.c holds a steer beside its
 * dialer, asks it which URL to dial, and replaces the dialer when a
 * decision here moves the target.
 *   - A follower's NOT_LEADER names the leader (Status.leader): when that
 *     URL is one of the handle's, it becomes the target (steer_hint).
 *     A URL not among them is not dialed (the handle talks only to the
 *     servers it was given); the target moves on to the next URL instead,
 *     so the handle still finds the leader under the name it knows.
 *   - A hint to a URL the handle found down less than STEER_DOWN_MS ago
 *     (a follower still names a leader that was just killed, until its
 *     etcd lease lapses) is not followed: the call backs off where it is.
 *     A URL whose last word to this handle was a follower's refusal is
 *     not marked down when it goes silent: a follower that won the
 *     election re-executes before it leads (docs/replication.md), and
 *     the other followers naming it then are right, not stale.
 *   - A follower that names no leader (an election, or it lost etcd):
 *     the next URL, after the usual backoff (steer_leaderless).
 *   - No connection, or no reply to an attempt while nothing else was
 *     heard from the target since it was sent: the target moves on to the
 *     next URL, round robin (steer_rotate), and the URL left is marked
 *     down. A target that gave this handle its last answer (it led:
 *     steer_led) and whose dial is now refused is dead or restarting: conn.c
 * moves on at once instead of waiting out a slice. Never a replica that was a
 * follower to this handle: a winner re-executing to lead refuses dials for a
 * moment and is the right target. Every move bumps a generation: a decision
 * taken on a stale generation (another call already moved the target) changes
 * nothing, so many calls refused at once move the target once.
 *
 * Owns: the URL list (parsed once), the target, the down marks, the
 * counters once_client_route reports.
 * Invariant: the target is always one of the URLs given; with one URL
 * nothing here ever moves (steer_init sets n = 1 and every decision
 * returns at once). Fields marked "caller's lock" are read and written
 * only under the lock of the struct that holds the steer (conn's
 * dial_lock); the atomics may be read without it.
 * Never: does I/O, allocates after steer_init, or looks at rpc ids.
 */
#ifndef CLIENT_STEER_H
#define CLIENT_STEER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most server URLs one handle takes (once_options.url, comma-separated). */
#define STEER_URLS_MAX 8
/* A URL found down is not returned to by a hint for this long. */
#define STEER_DOWN_MS 1000u

typedef struct steer {
    size_t n;                         /* URLs; read-only after steer_init */
    char *urls[STEER_URLS_MAX];       /* owned; read-only after steer_init */
    _Atomic size_t cur;               /* the target's index; written under the
                                         caller's lock */
    _Atomic uint64_t gen;             /* bumped on every move; written under
                                         the caller's lock */
    uint64_t down_ms[STEER_URLS_MAX]; /* when each URL was left for being
                                         down (0: never); caller's lock */
    _Atomic bool refused[STEER_URLS_MAX]; /* its last reply was NOT_LEADER
                                             (a follower, not a dead
                                             leader, when it goes silent) */
    _Atomic bool led[STEER_URLS_MAX];     /* the last answer to this handle
                                             came from it: it led then
                                             (steer_led); one URL at most */
    _Atomic uint64_t heard_ms;            /* the last reply from the target */

    /* Counters (once_route): relaxed, for people and tests. */
    _Atomic uint64_t not_leader; /* NOT_LEADER replies received */
    _Atomic uint64_t followed;   /* moves to a URL a hint named */
    _Atomic uint64_t ignored;    /* hints not followed (unknown or down) */
    _Atomic uint64_t rotated;    /* moves to the next URL */
} steer;

/* What steer_hint decided. */
typedef enum steer_move {
    STEER_STAY,  /* the target did not move: back off and retry there */
    STEER_MOVED, /* the target moved now: the caller redials it */
    STEER_STALE, /* another call moved it since gen: just retry */
} steer_move;

/* Parses urls (comma-separated, at most STEER_URLS_MAX; empty items
 * skipped). 0, EINVAL (none) or ENOMEM; steer_fini frees either way. */
int steer_init(steer *s, const char *urls);
void steer_fini(steer *s);

/* The target's generation (read it before an attempt). */
uint64_t steer_gen(const steer *s);

/* The target's URL. Caller's lock (or before the handle is shared). */
const char *steer_target(const steer *s);

/* A NOT_LEADER reply to an attempt sent at generation gen named leader
 * (may be NULL or empty: no hint). Counts it and decides. Caller's lock. */
steer_move steer_hint(steer *s, uint64_t gen, const char *leader,
                      uint64_t now_ms);

/* A follower that knows no leader (NO_LEADER: an election; or
 * ETCD_UNAVAILABLE: it cannot reach etcd) refused an attempt sent at
 * generation gen: another replica may know better, so the target moves
 * to the next URL (not marked down). Returns whether it moved. Caller's
 * lock. */
bool steer_leaderless(steer *s, uint64_t gen);

/* The target looks down (no connection; or no reply to an attempt sent at
 * sent_ms on generation gen — pass gen = steer_gen() and sent_ms = now to
 * skip both checks): marks it down and moves to the next URL. Returns
 * whether it moved. Caller's lock. */
bool steer_rotate(steer *s, uint64_t gen, uint64_t sent_ms, uint64_t now_ms);

/* Whether the last answer this handle had came from the target (it led
 * then), and the target refused nothing since; false for a URL never
 * heard from, or one that led before another answered (a winner that led
 * in an earlier term is re-executing, not dead). Lock-free. */
bool steer_led(const steer *s);

/* Whether the target was found down (and left: steer_rotate) less than
 * window_ms before now_ms. Caller's lock. */
bool steer_down_within(const steer *s, uint64_t now_ms, uint64_t window_ms);

/* A reply came from the target of generation gen; served: it was an
 * answer, not a NOT_LEADER refusal (pass false when the reply says nothing
 * either way, as a batch envelope's does). Lock-free. */
void steer_heard(steer *s, uint64_t gen, bool served, uint64_t now_ms);

#endif /* CLIENT_STEER_H */
