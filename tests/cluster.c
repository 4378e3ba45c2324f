/*
 * cluster.c — onced replicas as child processes on an etcd cluster of
 * etcd_procs.c (see cluster.h).
 */
#define _XOPEN_SOURCE 700
#include "tests/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "proto/auth_tag.h"
#include "base/keyfile.h"
#include "proto/principals.h"
#include "tests/harness.h"
#include "tests/sys_helpers.h"

static int cluster_seq;

static int
replica_spawn(replica_set *r, int i)
{
    r->exit_status[i] = -1;
    char ttl[16], retain[24], cert[300], key[300];
    char *argv[40];
    int a = 0;

    snprintf(ttl, sizeof(ttl), "%d", r->ttl_s);
    snprintf(retain, sizeof(retain), "%u", r->retain);
    argv[a++] = (char *)(r->onced != NULL ? r->onced : ONCED_PATH);
    argv[a++] = "--data";
    argv[a++] = r->data[i];
    argv[a++] = "--listen";
    argv[a++] = r->url[i];
    argv[a++] = "--replicate";
    argv[a++] = r->etcd->endpoints;
    argv[a++] = "--cluster";
    argv[a++] = r->name;
    argv[a++] = "--replicate-ttl";
    argv[a++] = ttl;
    if (r->retain != 0) {
        argv[a++] = "--replicate-retain";
        argv[a++] = retain;
    }
    if (r->auth && r->replicate_key) {
        argv[a++] = "--replicate-key";
        argv[a++] = r->repl_key;
    }
    if (r->etcd->certs[0] != '\0') {
        snprintf(cert, sizeof(cert), "%s/server.pem", r->etcd->certs);
        snprintf(key, sizeof(key), "%s/server.key", r->etcd->certs);
        argv[a++] = "--listen";
        argv[a++] = r->tls_url[i];
        argv[a++] = "--tls-cert";
        argv[a++] = cert;
        argv[a++] = "--tls-key";
        argv[a++] = key;
        argv[a++] = "--etcd-cacert";
        argv[a++] = r->etcd->cacert;
        argv[a++] = "--etcd-cert";
        argv[a++] = r->etcd->cert;
        argv[a++] = "--etcd-key";
        argv[a++] = r->etcd->key;
    }
    argv[a++] = NULL;
    if ((r->pid[i] = procs_spawn_logged_env(argv, r->env[i], r->log[i])) < 0) {
        r->pid[i] = 0;
        return -1;
    }
    return 0;
}

static int replica_wait_up(replica_set *r, int i, int ms);

/* Replica i's data folder (mode 0700) with the principals and policy of
 * r->auth; the keys are read from r's key files. 0 or -1. */
static int
replica_provision(replica_set *r, int i)
{
    static const char policy[] = "operator *\n"
                                 "replica /once.v1.Admin/Snapshot\n";
    principal_list l = {0};
    principal_entry e;
    char path[400], err[256];
    FILE *f;
    int rv = 0;

    if (mkdir(r->data[i], 0700) != 0 && errno != EEXIST) {
        return -1;
    }
    memset(&e, 0, sizeof(e));
    if (keyfile_read(r->op_key, e.name, e.key, err, sizeof(err)) != 0) {
        return -1;
    }
    snprintf(e.role, sizeof(e.role), "operator");
    rv |= principals_append(&l, &e);
    if (keyfile_read(r->repl_key, e.name, e.key, err, sizeof(err)) != 0) {
        principals_fini(&l);
        return -1;
    }
    snprintf(e.role, sizeof(e.role), "replica");
    rv |= principals_append(&l, &e);
    sodium_memzero(&e, sizeof(e));
    snprintf(path, sizeof(path), "%s/principals", r->data[i]);
    rv |= principals_write(path, &l);
    principals_fini(&l);
    snprintf(path, sizeof(path), "%s/policy", r->data[i]);
    if ((f = fopen(path, "w")) == NULL) {
        return -1;
    }
    fputs(policy, f);
    rv |= fclose(f);
    rv |= chmod(path, 0600);
    return rv != 0 ? -1 : 0;
}

/* The two principals' key files in r->dir. 0 or -1. */
static int
replica_keys(replica_set *r)
{
    uint8_t key[AUTH_KEY_BYTES];

    if (sodium_init() < 0) {
        return -1;
    }
    snprintf(r->op_key, sizeof(r->op_key), "%s/op.key", r->dir);
    snprintf(r->repl_key, sizeof(r->repl_key), "%s/repl.key", r->dir);
    randombytes_buf(r->op_secret, sizeof(r->op_secret));
    randombytes_buf(key, sizeof(key));
    if (keyfile_write(r->op_key, REPLICAS_OP, r->op_secret, false) != 0 ||
        keyfile_write(r->repl_key, REPLICAS_REPL, key, false) != 0) {
        return -1;
    }
    return 0;
}

/* The Admin.Stats request of this file's waits: unsigned, or signed as
 * REPLICAS_OP on an authenticated set. 0 or -1; *req malloc'd. */
static int
replica_stats_req(const replica_set *r, uint8_t **req, size_t *len)
{
    Once__V1__Request env = ONCE__V1__REQUEST__INIT;
    size_t n;

    if (!r->auth) {
        return harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, req,
                                len);
    }
    env.method = "/once.v1.Admin/Stats";
    env.attempt = 1;
    env.principal = REPLICAS_OP;
    n = once__v1__request__get_packed_size(&env);
    if ((*req = malloc(n + AUTH_TAG_TRAILER)) == NULL) {
        return -1;
    }
    n = once__v1__request__pack(&env, *req);
    auth_tag_append(*req, n, r->op_secret);
    *len = n + AUTH_TAG_TRAILER;
    return 0;
}

static int replicas_start_with(replica_set **rp, etcd_cluster *e, int n,
                               int ttl_s, unsigned retain, bool auth,
                               bool replicate_key);

int
replicas_start(replica_set **rp, etcd_cluster *e, int n, int ttl_s)
{
    return replicas_start_with(rp, e, n, ttl_s, 0, false, false);
}

int
replicas_start_retain(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                      unsigned retain)
{
    return replicas_start_with(rp, e, n, ttl_s, retain, false, false);
}

int
replicas_start_auth(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                    unsigned retain, bool replicate_key)
{
    return replicas_start_with(rp, e, n, ttl_s, retain, true, replicate_key);
}

/* A set of n replicas' names, paths and (auth) key files; nothing runs
 * yet. NULL on failure. */
static replica_set *
replicas_alloc(etcd_cluster *e, int n, int ttl_s, unsigned retain, bool auth,
               bool replicate_key)
{
    replica_set *r = calloc(1, sizeof(*r));
    size_t off = 0;

    if (r == NULL || n < 1 || n > CLUSTER_MAX) {
        free(r);
        return NULL;
    }
    snprintf(r->dir, sizeof(r->dir), "/tmp/once-repl-XXXXXX");
    if (mkdtemp(r->dir) == NULL) {
        free(r);
        return NULL;
    }
    r->etcd = e;
    r->n = n;
    r->ttl_s = ttl_s;
    r->retain = retain;
    r->auth = auth;
    r->replicate_key = replicate_key;
    snprintf(r->name, sizeof(r->name), "t%d-%d", (int)getpid(), cluster_seq++);
    for (int i = 0; i < n; i++) {
        snprintf(r->path[i], sizeof(r->path[i]), "%s/r%d.ipc", r->dir, i);
        snprintf(r->url[i], sizeof(r->url[i]), "ipc://%s", r->path[i]);
        snprintf(r->data[i], sizeof(r->data[i]), "%s/data%d", r->dir, i);
        snprintf(r->log[i], sizeof(r->log[i]), "%s/onced%d.log", r->dir, i);
        snprintf(r->tls_url[i], sizeof(r->tls_url[i]), "tls+tcp://127.0.0.1:%d",
                 sys_free_port());
        off += (size_t)snprintf(r->urls + off, sizeof(r->urls) - off, "%s%s",
                                i > 0 ? "," : "", r->url[i]);
    }
    if (auth && replica_keys(r) != 0) {
        replicas_free(r);
        return NULL;
    }
    return r;
}

/* Spawns replicas [from, to) and waits until each answers. 0 or -1 (the
 * logs printed). */
static int
replicas_spawn_range(replica_set *r, int from, int to)
{
    for (int i = from; i < to; i++) {
        if ((r->auth && replica_provision(r, i) != 0) ||
            replica_spawn(r, i) != 0) {
            return -1;
        }
    }
    for (int i = from; i < to; i++) {
        if (replica_wait_up(r, i, 30000) != 0) {
            replicas_dump(r);
            return -1;
        }
    }
    return 0;
}

static int
replicas_start_with(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                    unsigned retain, bool auth, bool replicate_key)
{
    replica_set *r = replicas_alloc(e, n, ttl_s, retain, auth, replicate_key);

    if (r == NULL || replicas_spawn_range(r, 0, n) != 0) {
        replicas_free(r);
        return -1;
    }
    if (replicas_leader(r, -1, 30000) < 0) {
        replicas_dump(r);
        replicas_free(r);
        return -1;
    }
    *rp = r;
    return 0;
}

int
replicas_start_led(replica_set **rp, etcd_cluster *e, int n, int ttl_s,
                   const char *onced, const char *env0)
{
    replica_set *r = replicas_alloc(e, n, ttl_s, 0, false, false);

    if (r == NULL) {
        return -1;
    }
    r->onced = onced;
    snprintf(r->env[0], sizeof(r->env[0]), "%s", env0 != NULL ? env0 : "");
    if (replicas_spawn_range(r, 0, 1) != 0 ||
        replicas_leader(r, -1, 30000) != 0 ||
        replicas_spawn_range(r, 1, n) != 0) {
        replicas_dump(r);
        replicas_free(r);
        return -1;
    }
    *rp = r;
    return 0;
}

void
replicas_kill(replica_set *r, int i, int sig)
{
    if (sig == SIGSTOP || sig == SIGCONT) {
        kill(r->pid[i], sig);
        return;
    }
    procs_reap(r->pid[i], sig);
    r->pid[i] = 0;
}

/* Waits (at most ms) until replica i answers anything: a leader OK, a
 * follower UNAVAILABLE. By then it has its signal mask, so a SIGTERM from
 * the teardown is a clean stop, not a death by signal. */
static int
replica_wait_up(replica_set *r, int i, int ms)
{
    int64_t until = harness_now_ms() + ms;
    uint8_t *req = NULL;
    size_t len = 0;

    if (replica_stats_req(r, &req, &len) != 0) {
        return -1;
    }
    do {
        Once__V1__Response *resp = NULL;
        int status;

        if (waitpid(r->pid[i], &status, WNOHANG) == r->pid[i]) {
            r->pid[i] = 0; /* it exited: it will not answer */
            r->exit_status[i] = status;
            break;
        }
        if (harness_raw_rpc(r->url[i], req, len, &resp, 500) == 0) {
            once__v1__response__free_unpacked(resp, NULL);
            free(req);
            return 0;
        }
        harness_sleep_ms(20);
    } while (harness_now_ms() < until);
    free(req);
    return -1;
}

int
replicas_restart(replica_set *r, int i)
{
    if (replica_spawn(r, i) != 0) {
        return -1;
    }
    return replica_wait_up(r, i, 30000);
}

int
replicas_wait_exit(replica_set *r, int i, int ms)
{
    int64_t until = harness_now_ms() + ms;
    int status;

    if (r->pid[i] == 0) {
        return r->exit_status[i]; /* reaped by replica_wait_up */
    }
    do {
        if (waitpid(r->pid[i], &status, WNOHANG) == r->pid[i]) {
            r->pid[i] = 0;
            r->exit_status[i] = status;
            return status;
        }
        harness_sleep_ms(20);
    } while (harness_now_ms() < until);
    return -1;
}

void
replicas_wipe(replica_set *r, int i)
{
    sys_rm_tree(r->data[i]);
    if (r->auth) {
        (void)replica_provision(r, i);
    }
}

int
replicas_leader(replica_set *r, int skip, int ms)
{
    int64_t until = harness_now_ms() + ms;
    uint8_t *req = NULL;
    size_t len = 0;

    if (replica_stats_req(r, &req, &len) != 0) {
        return -1;
    }
    do {
        for (int i = 0; i < r->n; i++) {
            Once__V1__Response *resp = NULL;
            bool ok;

            if (i == skip || r->pid[i] == 0 ||
                harness_raw_rpc(r->url[i], req, len, &resp, 500) != 0) {
                continue;
            }
            ok = resp->status != NULL &&
                 resp->status->code == ONCE__V1__CODE__OK;
            once__v1__response__free_unpacked(resp, NULL);
            if (ok) {
                free(req);
                return i;
            }
        }
        harness_sleep_ms(50);
    } while (harness_now_ms() < until);
    free(req);
    return -1;
}

bool
replicas_log_has(const replica_set *r, int i, const char *text)
{
    FILE *f = fopen(r->log[i], "r");
    char line[2048];
    bool found = false;

    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, text) != NULL;
    }
    fclose(f);
    return found;
}

void
replicas_dump(const replica_set *r)
{
    for (int i = 0; i < r->n; i++) {
        procs_dump_file(r->log[i]);
    }
}

int
replicas_stop(replica_set *r)
{
    int rv = 0;

    if (r == NULL) {
        return 0;
    }
    for (int i = 0; i < r->n; i++) {
        int status = 0;
        int64_t until = harness_now_ms() + 20000;
        pid_t got = 0;

        if (r->pid[i] == 0) {
            continue;
        }
        kill(r->pid[i], SIGCONT);
        kill(r->pid[i], SIGTERM);
        while ((got = waitpid(r->pid[i], &status, WNOHANG)) == 0 &&
               harness_now_ms() < until) {
            harness_sleep_ms(10);
        }
        if (got != r->pid[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "replica %d did not stop cleanly (status %d)\n", i,
                    status);
            procs_reap(r->pid[i], SIGKILL);
            rv = -1;
        }
        r->pid[i] = 0;
    }
    return rv;
}

void
replicas_free(replica_set *r)
{
    if (r == NULL) {
        return;
    }
    for (int i = 0; i < r->n; i++) {
        if (r->pid[i] > 0) {
            kill(r->pid[i], SIGCONT);
            procs_reap(r->pid[i], SIGKILL);
        }
        unlink(r->path[i]);
    }
    if (getenv("ONCE_TEST_KEEP") == NULL) {
        sys_rm_tree(r->dir);
    }
    free(r);
}
