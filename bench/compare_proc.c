/*
 * compare_proc.c — child processes of bench_compare (see compare_proc.h).
 */
#include "bench/compare_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_env.h"

int
compare_user_for_postgres(compare_user *u)
{
    static const char *const names[] = {"postgres", "nobody"};

    memset(u, 0, sizeof(*u));
    if (geteuid() != 0) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct passwd *pw = getpwnam(names[i]);
        if (pw != NULL && pw->pw_uid != 0) {
            u->switch_user = true;
            u->uid = pw->pw_uid;
            u->gid = pw->pw_gid;
            snprintf(u->name, sizeof(u->name), "%s", names[i]);
            return 0;
        }
    }
    return -1;
}

int
compare_user_chown(const compare_user *u, const char *path)
{
    if (u == NULL || !u->switch_user) {
        return 0;
    }
    return chown(path, u->uid, u->gid);
}

pid_t
compare_proc_spawn(const char *const *argv, const compare_user *u,
                   const char *log)
{
    int fd = open(log != NULL ? log : "/dev/null",
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_t pid;

    if (fd < 0) {
        fprintf(stderr, "bench_compare: %s: %s\n", log, strerror(errno));
        return -1;
    }
    if (u != NULL && u->switch_user && log != NULL) {
        (void)fchown(fd, u->uid, u->gid);
    }
    if ((pid = fork()) < 0) {
        perror("bench_compare: fork");
        close(fd);
        return -1;
    }
    if (pid == 0) {
        /* The child: only async-signal-safe calls until execv. */
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
        }
        dup2(fd, 1);
        dup2(fd, 2);
        setpgid(0, 0); /* a terminal's ^C goes to us; we stop the child */
        if (u != NULL && u->switch_user) {
            if (setgroups(0, NULL) != 0 || setgid(u->gid) != 0 ||
                setuid(u->uid) != 0) {
                _exit(126);
            }
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd);
    return pid;
}

static int
exit_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -1;
}

int
compare_proc_wait(pid_t pid, int timeout_ms)
{
    int64_t deadline = bench_now_ns() + (int64_t)timeout_ms * 1000000;
    int status;

    if (pid <= 0) {
        return -1;
    }
    for (long i = 0; i < (long)timeout_ms + 1000; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return exit_code(status);
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (bench_now_ns() > deadline) {
            break;
        }
        bench_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

int
compare_proc_run(const char *const *argv, const compare_user *u,
                 const char *log, int timeout_ms)
{
    pid_t pid = compare_proc_spawn(argv, u, log);
    return pid < 0 ? -1 : compare_proc_wait(pid, timeout_ms);
}

void
compare_proc_stop(pid_t pid, int timeout_ms)
{
    if (pid <= 0) {
        return;
    }
    kill(pid, SIGTERM);
    if (compare_proc_wait(pid, timeout_ms) < 0) {
        fprintf(stderr, "bench_compare: pid %d ignored SIGTERM; killed\n",
                (int)pid);
    }
}

bool
compare_proc_exited(pid_t pid)
{
    int status;
    return pid > 0 && waitpid(pid, &status, WNOHANG) == pid;
}

void
compare_proc_tail(const char *log, long max_bytes)
{
    char buf[4096];
    FILE *f = fopen(log, "r");
    size_t n;

    if (f == NULL) {
        return;
    }
    if (max_bytes > (long)sizeof(buf) - 1) {
        max_bytes = (long)sizeof(buf) - 1;
    }
    if (fseek(f, -max_bytes, SEEK_END) != 0) {
        rewind(f);
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- %s (end) ---\n%s\n---\n", log, buf);
}
