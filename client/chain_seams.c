/*
 * chain_seams.c — the chain's crash points and write-after-send switch
 * (chain_seams.h), compiled only into the test library libonce_seams.
 *
 * Owns: the armed point (read once from ONCE_CHAIN_CRASH) and its hit
 * counter; the switch (ONCE_CHAIN_WRITE_AFTER_SEND).
 * Invariant: reads the environment once (pthread_once).
 * Never: part of the shipped libonce.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/chain_seams.h"

static pthread_once_t seams_once = PTHREAD_ONCE_INIT;
static char armed[64]; /* "" = none */
static long armed_at = 1;
static bool late;
static _Atomic long hits;

static void
seams_read(void)
{
    const char *v = getenv("ONCE_CHAIN_CRASH");
    const char *w = getenv("ONCE_CHAIN_WRITE_AFTER_SEND");
    char *at;

    if (v != NULL) {
        snprintf(armed, sizeof(armed), "%s", v);
        if ((at = strchr(armed, '@')) != NULL) {
            armed_at = atol(at + 1) > 0 ? atol(at + 1) : 1;
            *at = '\0';
        }
    }
    late = w != NULL && strcmp(w, "1") == 0;
}

void
chain_crash_point(const char *point)
{
    pthread_once(&seams_once, seams_read);
    if (armed[0] == '\0' || strcmp(point, armed) != 0 ||
        atomic_fetch_add(&hits, 1) + 1 != armed_at) {
        return;
    }
    fprintf(stderr, "chain crash point %s@%ld: killing the process\n", point,
            armed_at);
    raise(SIGKILL);
    _exit(137);
}

bool
chain_write_after_send(void)
{
    pthread_once(&seams_once, seams_read);
    return late;
}
