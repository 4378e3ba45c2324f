/*
 * fault.c — the armed crash point.
 */
#include "fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fault_name[64]; /* written once by fault_init */
static long fault_at = 1;   /* crash at this hit */
static _Atomic long fault_hits;

void
fault_init(void)
{
    const char *v = getenv("ONCED_FAULT");
    const char *at;

    if (v == NULL || v[0] == '\0') {
        return;
    }
    snprintf(fault_name, sizeof(fault_name), "%s", v);
    if ((at = strchr(v, '@')) != NULL) {
        fault_name[at - v < (long)sizeof(fault_name) ? at - v : 0] = '\0';
        fault_at = atol(at + 1) > 0 ? atol(at + 1) : 1;
    }
    fprintf(stderr, "onced: fault point \"%s\" armed (hit %ld crashes)\n",
            fault_name, fault_at);
}

void
fault_point(const char *name)
{
    if (fault_name[0] == '\0' || strcmp(name, fault_name) != 0) {
        return;
    }
    if (atomic_fetch_add(&fault_hits, 1) + 1 == fault_at) {
        fprintf(stderr, "onced: fault point \"%s\": crashing\n", name);
        raise(SIGKILL);
        _exit(137);
    }
}
