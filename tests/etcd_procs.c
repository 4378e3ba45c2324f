/*
 * etcd_procs.c — etcd members as child processes, for the replication
 * tests (tests/cluster.c) and bench_compare's etcd peers (see
 * etcd_procs.h).
 */
#define _XOPEN_SOURCE 700
#include "tests/etcd_procs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "repl/etcd.h"
#include "tests/sys_helpers.h"

int64_t
procs_now_ms(void)
{
    return (int64_t)clock_now_ms();
}

void
procs_sleep_ms(int ms)
{
    clock_sleep_ms((uint64_t)ms);
}

#define ETCD_PATH "/usr/bin/etcd"

pid_t
procs_spawn_logged(char *const argv[], const char *log)
{
    return procs_spawn_logged_env(argv, NULL, log);
}

extern char **environ;

pid_t
procs_spawn_logged_env(char *const argv[], const char *env, const char *log)
{
    size_t n = 0;
    char **envp;
    pid_t pid;

    while (environ[n] != NULL) {
        n++;
    }
    /* Built before the fork: the child only execs. */
    if ((envp = calloc(n + 2, sizeof(*envp))) == NULL) {
        return -1;
    }
    memcpy(envp, environ, n * sizeof(*envp));
    if (env != NULL && env[0] != '\0') {
        envp[n] = (char *)env;
    }
    if ((pid = fork()) == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    free(envp);
    return pid;
}

void
procs_reap(pid_t pid, int sig)
{
    int status;

    if (pid <= 0) {
        return;
    }
    kill(pid, sig);
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            return;
        }
        procs_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

void
procs_dump_file(const char *path)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        return;
    }
    fprintf(stderr, "---- %s\n", path);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        fwrite(buf, 1, n, stderr);
    }
    fclose(f);
}

static int
etcd_spawn(etcd_cluster *e, int i, bool fresh)
{
    char name[16], data[300], log[300], curl[64], purl[64], token[300];
    char cert[320], key[320], ca[320];
    char *argv[40];
    int a = 0;

    snprintf(name, sizeof(name), "m%d", i);
    snprintf(data, sizeof(data), "%s/%s", e->dir, name);
    snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
    snprintf(curl, sizeof(curl), "%s://127.0.0.1:%d",
             e->certs[0] != '\0' ? "https" : "http", e->client_port[i]);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", e->peer_port[i]);
    snprintf(token, sizeof(token), "once-test-%s", e->dir);
    argv[a++] = ETCD_PATH;
    argv[a++] = "--name";
    argv[a++] = name;
    argv[a++] = "--data-dir";
    argv[a++] = data;
    argv[a++] = "--listen-client-urls";
    argv[a++] = curl;
    argv[a++] = "--advertise-client-urls";
    argv[a++] = curl;
    argv[a++] = "--listen-peer-urls";
    argv[a++] = purl;
    argv[a++] = "--initial-advertise-peer-urls";
    argv[a++] = purl;
    argv[a++] = "--initial-cluster";
    argv[a++] = e->initial;
    argv[a++] = "--initial-cluster-token";
    argv[a++] = token;
    argv[a++] = "--initial-cluster-state";
    argv[a++] = fresh ? "new" : "existing";
    /* etcd's defaults (100 ms heartbeat, 1 s election): this machine may
     * be loaded, and a shorter election timeout makes etcd's own leader
     * flap. */
    argv[a++] = "--max-request-bytes";
    argv[a++] = "2097152";
    if (e->certs[0] != '\0') {
        snprintf(cert, sizeof(cert), "%s/server.pem", e->certs);
        snprintf(key, sizeof(key), "%s/server.key", e->certs);
        snprintf(ca, sizeof(ca), "%s/ca.pem", e->certs);
        argv[a++] = "--cert-file";
        argv[a++] = cert;
        argv[a++] = "--key-file";
        argv[a++] = key;
        argv[a++] = "--trusted-ca-file";
        argv[a++] = ca;
        argv[a++] = "--client-cert-auth";
    }
    argv[a++] = NULL;
    if ((e->pid[i] = procs_spawn_logged(argv, log)) < 0) {
        e->pid[i] = 0;
        return -1;
    }
    return 0;
}

/* Waits until the cluster grants (and we revoke) a lease. */
static int
etcd_wait_ready(etcd_cluster *e, int ms)
{
    int64_t until = procs_now_ms() + ms;
    etcd *c = NULL;

    if (etcd_cluster_client(e, 1000, &c) != 0) {
        return -1;
    }
    while (procs_now_ms() < until) {
        int64_t id;

        for (int i = 0; i < e->n; i++) {
            int st;

            if (e->pid[i] > 0 &&
                waitpid(e->pid[i], &st, WNOHANG) == e->pid[i]) {
                e->pid[i] = 0; /* it exited (a port taken?): no quorum */
                etcd_close(c);
                return -1;
            }
        }
        if (etcd_lease_grant(c, 5, &id) == 0) {
            (void)etcd_lease_revoke(c, id);
            etcd_close(c);
            return 0;
        }
        procs_sleep_ms(100);
    }
    etcd_close(c);
    return -1;
}

int
etcd_cluster_client(const etcd_cluster *e, uint32_t timeout_ms, etcd **out)
{
    return etcd_open_tls(out, e->endpoints, &e->tls, timeout_ms);
}

int
etcd_cluster_start(etcd_cluster **ep, int n)
{
    return etcd_cluster_start_tls(ep, n, NULL);
}

/* etcd_cluster_start_tls, once: logs printed on failure when last. */
static int etcd_cluster_try(etcd_cluster **ep, int n, const char *certs,
                            bool last);

int
etcd_cluster_start_tls(etcd_cluster **ep, int n, const char *certs)
{
    /* A port probed free can be taken by another process before a member
     * binds it: the member exits at once, and the cluster starts again on
     * other ports. */
    for (int attempt = 1; attempt <= 3; attempt++) {
        if (etcd_cluster_try(ep, n, certs, attempt == 3) == 0) {
            return 0;
        }
        if (attempt < 3) {
            fprintf(stderr,
                    "etcd_procs: the members did not start "
                    "(attempt %d); again on other ports\n",
                    attempt);
        }
    }
    return -1;
}

static int
etcd_cluster_try(etcd_cluster **ep, int n, const char *certs, bool last)
{
    etcd_cluster *e = calloc(1, sizeof(*e));
    size_t off = 0, ioff = 0;

    if (e == NULL || n < 1 || n > CLUSTER_MAX) {
        free(e);
        return -1;
    }
    if (certs != NULL) {
        snprintf(e->certs, sizeof(e->certs), "%s", certs);
        snprintf(e->cacert, sizeof(e->cacert), "%s/ca.pem", certs);
        snprintf(e->cert, sizeof(e->cert), "%s/client.pem", certs);
        snprintf(e->key, sizeof(e->key), "%s/client.key", certs);
        e->tls.cacert = e->cacert;
        e->tls.cert = e->cert;
        e->tls.key = e->key;
    }
    snprintf(e->dir, sizeof(e->dir), "/tmp/once-etcd-XXXXXX");
    if (mkdtemp(e->dir) == NULL) {
        free(e);
        return -1;
    }
    e->n = n;
    for (int i = 0; i < n; i++) {
        e->client_port[i] = sys_free_port();
        e->peer_port[i] = sys_free_port();
        off += (size_t)snprintf(e->endpoints + off, sizeof(e->endpoints) - off,
                                "%s%s://127.0.0.1:%d", i > 0 ? "," : "",
                                certs != NULL ? "https" : "http",
                                e->client_port[i]);
        ioff += (size_t)snprintf(e->initial + ioff, sizeof(e->initial) - ioff,
                                 "%sm%d=http://127.0.0.1:%d", i > 0 ? "," : "",
                                 i, e->peer_port[i]);
    }
    for (int i = 0; i < n; i++) {
        if (etcd_spawn(e, i, true) != 0) {
            etcd_cluster_free(e);
            return -1;
        }
    }
    if (etcd_wait_ready(e, 60000) != 0) {
        if (last) {
            etcd_cluster_dump(e);
        }
        etcd_cluster_free(e);
        return -1;
    }
    *ep = e;
    return 0;
}

void
etcd_cluster_dump(const etcd_cluster *e)
{
    for (int i = 0; i < e->n; i++) {
        char log[300];

        snprintf(log, sizeof(log), "%s/m%d.log", e->dir, i);
        procs_dump_file(log);
    }
}

void
etcd_member_kill(etcd_cluster *e, int i, int sig)
{
    if (sig == SIGSTOP || sig == SIGCONT) {
        kill(e->pid[i], sig);
        return;
    }
    procs_reap(e->pid[i], sig);
    e->pid[i] = 0;
}

int
etcd_member_restart(etcd_cluster *e, int i)
{
    return etcd_spawn(e, i, false);
}

void
etcd_cluster_free(etcd_cluster *e)
{
    if (e == NULL) {
        return;
    }
    for (int i = 0; i < e->n; i++) {
        if (e->pid[i] > 0) {
            kill(e->pid[i], SIGCONT);
            procs_reap(e->pid[i], SIGKILL);
        }
    }
    if (getenv("ONCE_TEST_KEEP") == NULL) {
        sys_rm_tree(e->dir);
    }
    free(e);
}
