/*
 * proxy_proc.c — once_proxy as a child of a test (proxy_proc.h).
 */
#include "tests/proxy_proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#define PROXY_ARGS_MAX 32

pid_t
proxy_proc_start(const char *bin, const char *front, const char *back,
                 uint64_t seed, const char *const *faults, const char *log)
{
    char s[32];
    const char *argv[PROXY_ARGS_MAX + 8] = {
        "once_proxy", "--front", front, "--back", back, "--seed", s};
    size_t n = 7;
    pid_t pid;

    snprintf(s, sizeof(s), "%llu", (unsigned long long)seed);
    for (size_t i = 0; faults != NULL && faults[i] != NULL; i++) {
        if (i == PROXY_ARGS_MAX) {
            return -1;
        }
        argv[n++] = faults[i];
    }
    argv[n] = NULL;
    if ((pid = fork()) == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd >= 0) {
            dup2(fd, 2);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

bool
proxy_proc_replies(const char *log, uint64_t *in, uint64_t *dropped)
{
    FILE *f = fopen(log, "r");
    char line[512];
    bool found = false;

    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long a, b;

        found = sscanf(line, "once_proxy: replies in %llu dropped %llu", &a,
                       &b) == 2;
        if (found) {
            *in = a;
            *dropped = b;
        }
    }
    fclose(f);
    return found;
}
