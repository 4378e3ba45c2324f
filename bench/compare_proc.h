/*
 * compare_proc.h — the child processes bench_compare needs around its peers:
 * redis-server in the foreground, initdb and pg_ctl, gnuplot, the package
 * installer. Optionally as another user (Debian's initdb refuses root).
 *
 * Owns: fork/exec, output to a log file, bounded waits, the user switch.
 * Invariant: every wait ends by its deadline; a child still running then is
 * SIGKILLed and reaped. No shell: argv goes to execv as given.
 * Never: runs anything as root on behalf of a user it could not switch to.
 */
#ifndef BENCH_COMPARE_PROC_H
#define BENCH_COMPARE_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* Who to run as: everything zero means "as we are". */
typedef struct compare_user {
    bool switch_user;
    uid_t uid;
    gid_t gid;
    char name[64];
} compare_user;

/*
 * When we are root, looks up the first of names that exists and fills *u to
 * run as it; otherwise leaves *u as "ourselves". 0, or -1 when root and
 * none of the users exists.
 */
int compare_user_for_postgres(compare_user *u);

/* chown path to u when u switches; 0 or -1 (errno). */
int compare_user_chown(const compare_user *u, const char *path);

/*
 * Starts argv[0] (a path) with argv, as u (NULL: as ourselves), its stdout
 * and stderr appended to log (NULL: /dev/null), in a process group of its
 * own. Returns the pid, or -1.
 */
pid_t compare_proc_spawn(const char *const *argv, const compare_user *u,
                         const char *log);

/* Waits up to timeout_ms for pid; SIGKILLs and reaps it after that.
 * Returns its exit status (0..255), 128+signal, or -1 on a timeout. */
int compare_proc_wait(pid_t pid, int timeout_ms);

/* spawn + wait. */
int compare_proc_run(const char *const *argv, const compare_user *u,
                     const char *log, int timeout_ms);

/* SIGTERM, then SIGKILL after timeout_ms; reaps. pid <= 0 is ignored. */
void compare_proc_stop(pid_t pid, int timeout_ms);

/* True when pid has exited (and reaps it). */
bool compare_proc_exited(pid_t pid);

/* Prints the last lines of log (at most max_bytes) on stderr, for errors. */
void compare_proc_tail(const char *log, long max_bytes);

#endif /* BENCH_COMPARE_PROC_H */
