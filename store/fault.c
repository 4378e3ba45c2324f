/*
 * fault.c — the armed fault point, the holds and the broken-on-purpose
 * switches (fault.h); compiled into the test build only (once_store_test,
 * store/CMakeLists.txt).
 *
 * Owns fault_name/fault_at/fault_drop_armed/fault_fail_armed and
 * fault_holds, written once by fault_arm and fault_hold_set before any
 * thread starts, and the hit counter of the armed point;
 * fault_broken_list, written once by fault_break likewise.
 * Never: reads the environment (the test build's server/test_seams.c
 * does, and arms), counts hits of points that are not armed, or is
 * linked into the shipped onced.
 */
#include "store/fault.h"
#include "base/clock.h"
#include "base/log.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fault_name[64];   /* "" = nothing armed */
static long fault_at = 1;     /* act at this hit */
static bool fault_drop_armed; /* ":drop": lose the reply, do not crash */
static bool fault_fail_armed; /* ":fail": the operation fails, no crash */
static _Atomic long fault_hits;
static uint64_t fault_holds[FAULT_HOLD_COUNT]; /* ms, 0 = none */
static char fault_broken_list[128]; /* ",a,b," of fault_break; "" none */

void
fault_arm(const char *v)
{
    char *at, *colon;

    if (v == NULL || v[0] == '\0') {
        return;
    }
    snprintf(fault_name, sizeof(fault_name), "%s", v);
    if ((colon = strchr(fault_name, ':')) != NULL) {
        fault_drop_armed = strcmp(colon + 1, "drop") == 0;
        fault_fail_armed = strcmp(colon + 1, "fail") == 0;
        if (!fault_drop_armed && !fault_fail_armed) {
            log_warn("fault %s: unknown action \"%s\" "
                     "(only :drop, :fail); crashing instead",
                     v, colon + 1);
        }
        *colon = '\0';
    }
    if ((at = strchr(fault_name, '@')) != NULL) {
        fault_at = atol(at + 1) > 0 ? atol(at + 1) : 1;
        *at = '\0';
    }
    log_warn("fault point \"%s\" armed (hit %ld %s)", fault_name, fault_at,
             fault_drop_armed   ? "drops its reply"
             : fault_fail_armed ? "fails"
                                : "crashes");
}

/* True when name is armed with this action (drop, fail, or neither: a
 * crash) and this hit is the one to act on. */
static bool
fault_due(const char *name, bool drop, bool fail)
{
    if (drop != fault_drop_armed || fail != fault_fail_armed ||
        strcmp(name, fault_name) != 0) {
        return false;
    }
    return atomic_fetch_add(&fault_hits, 1) + 1 == fault_at;
}

void
fault_point(const char *name)
{
    if (fault_name[0] == '\0' || !fault_due(name, false, false)) {
        return;
    }
    log_warn("fault point \"%s\": crashing", name);
    raise(SIGKILL);
    _exit(137);
}

bool
fault_drop(const char *name)
{
    if (fault_name[0] == '\0' || !fault_due(name, true, false)) {
        return false;
    }
    log_warn("fault point \"%s\": dropping the reply", name);
    return true;
}

bool
fault_fail(const char *name)
{
    if (fault_name[0] == '\0' || !fault_due(name, false, true)) {
        return false;
    }
    log_warn("fault point \"%s\": failing", name);
    return true;
}

void
fault_hold_set(fault_hold_at at, uint64_t ms)
{
    if (at < FAULT_HOLD_COUNT) {
        fault_holds[at] = ms;
    }
}

void
fault_hold(fault_hold_at at)
{
    if (at < FAULT_HOLD_COUNT && fault_holds[at] > 0) {
        clock_sleep_ms(fault_holds[at]);
    }
}

void
fault_break(const char *list)
{
    if (list != NULL && list[0] != '\0') {
        snprintf(fault_broken_list, sizeof(fault_broken_list), ",%s,", list);
        log_warn("broken on purpose: %s", list);
    }
}

bool
fault_broken(const char *name)
{
    char pat[72];

    if (fault_broken_list[0] == '\0') {
        return false;
    }
    snprintf(pat, sizeof(pat), ",%s,", name);
    return strstr(fault_broken_list, pat) != NULL;
}
