/*
 * watchdog.c — a test that hangs says where before it is killed.
 *
 * ctest kills a test at its TIMEOUT without a word: a suite that went
 * silent leaves no trace of what it waited for. tests/CMakeLists.txt gives
 * every integration suite ONCE_TEST_WATCHDOG_S, a little less than its
 * timeout; when the suite is still running then, this prints the stacks of
 * every thread of the test process and of its onced children (gdb in batch
 * mode, each bounded by `timeout`), then aborts the test.
 *
 * Owns: one detached thread per test process, started from harness.c's
 * constructor; nothing when ONCE_TEST_WATCHDOG_S is unset or 0.
 * Invariant: the dump goes to stderr (ctest --output-on-failure shows it);
 * the test ends by abort() right after, so a dump is never mistaken for a
 * pass.
 * Never: touches the test's state; runs anything before the deadline.
 */
#include "tests/watchdog.h"

#include "base/clock.h"

#include <dirent.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WATCHDOG_GDB_S    "60" /* one process's dump, at most */
#define WATCHDOG_CHILDREN 16   /* onced children dumped, at most */

static unsigned watchdog_seconds;

void
watchdog_dump(pid_t pid, const char *what, const char *valgrind_binary)
{
    char p[24], remote[64];
    char *argv[] = {"timeout",
                    WATCHDOG_GDB_S,
                    "gdb",
                    "-batch",
                    "-nx",
                    "-ex",
                    "set pagination off",
                    "-p",
                    p,
                    "-ex",
                    "thread apply all bt",
                    NULL,  /* valgrind: the program's file */
                    NULL}; /* argv's end */
    pid_t child;
    int status;

    snprintf(p, sizeof(p), "%d", (int)pid);
    if (valgrind_binary != NULL) {
        /* Under valgrind the process is valgrind's: its gdbserver shows
         * the program's threads. */
        snprintf(remote, sizeof(remote), "target remote | vgdb --pid=%d",
                 (int)pid);
        argv[7] = "-ex";
        argv[8] = remote;
        argv[11] = (char *)valgrind_binary;
    }
    fprintf(stderr, "watchdog: ---- stacks of %s (pid %d%s) ----\n", what,
            (int)pid, valgrind_binary != NULL ? ", under valgrind" : "");
    fflush(stderr);
    if (posix_spawnp(&child, "timeout", NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "watchdog: cannot run gdb (install gdb to see "
                        "where a hung test waits)\n");
        return;
    }
    (void)waitpid(child, &status, 0);
    fprintf(stderr, "watchdog: ---- end of the stacks of %s ----\n", what);
}

/* Whether pid's command name starts with "onced". */
static int
watchdog_is_onced(const char *pid)
{
    char path[64], comm[32] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%s/comm", pid);
    if ((f = fopen(path, "r")) == NULL) {
        return 0;
    }
    if (fgets(comm, sizeof(comm), f) == NULL) {
        comm[0] = '\0';
    }
    fclose(f);
    return strncmp(comm, "onced", 5) == 0;
}

/* The onced children of every thread of this process. */
static void
watchdog_dump_children(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *t;
    int dumped = 0;

    if (d == NULL) {
        return;
    }
    while ((t = readdir(d)) != NULL && dumped < WATCHDOG_CHILDREN) {
        char path[300], list[512], *save = NULL;
        FILE *f;

        if (t->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", t->d_name);
        if ((f = fopen(path, "r")) == NULL) {
            continue;
        }
        if (fgets(list, sizeof(list), f) == NULL) {
            list[0] = '\0';
        }
        fclose(f);
        for (char *c = strtok_r(list, " \n", &save);
             c != NULL && dumped < WATCHDOG_CHILDREN;
             c = strtok_r(NULL, " \n", &save)) {
            if (watchdog_is_onced(c)) {
                watchdog_dump((pid_t)atoi(c), "an onced child", NULL);
                dumped++;
            }
        }
    }
    closedir(d);
}

static void *
watchdog_main(void *arg)
{
    uint64_t end = clock_now_ms() + (uint64_t)watchdog_seconds * 1000;

    (void)arg;
    for (uint64_t now; (now = clock_now_ms()) < end;) {
        clock_sleep_ms(end - now < 1000 ? end - now : 1000);
    }
    fprintf(stderr,
            "watchdog: the test is still running after %u s "
            "(ONCE_TEST_WATCHDOG_S), close to its ctest timeout: where every "
            "thread waits follows, then the test aborts\n",
            watchdog_seconds);
    watchdog_dump(getpid(), "the test", NULL);
    watchdog_dump_children();
    fprintf(stderr, "watchdog: aborting the test\n");
    abort();
    return NULL;
}

void
watchdog_start(void)
{
    const char *s = getenv("ONCE_TEST_WATCHDOG_S");
    pthread_t th;

    if (s == NULL || (watchdog_seconds = (unsigned)strtoul(s, NULL, 10)) == 0) {
        return;
    }
    /* gdb attaches from a process that is not our parent. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    if (pthread_create(&th, NULL, watchdog_main, NULL) == 0) {
        pthread_detach(th);
    }
}
