/*
 * peer_redis.c — Redis as a user would make increments exactly-once: a Lua
 * script (EVALSHA) that does SET NX of the call's idempotency key, INCRBY
 * of the counter, and stores the result under the key; a resend of the key
 * gets the stored result. One hiredis connection per caller.
 *
 * redis-job (--workload job, job_row.h): the job transition as a Redis
 * user would write it, one Lua script: the idempotency key's stored
 * result if it exists; else the job row (a hash: row, ver) written only if
 * it is still at the version the caller read, and the result stored under
 * the key; else the row as it is, for the caller to read again.
 *
 * Owns: a redis-server of its own, started in the foreground on a unix
 * socket in the peer's temp dir (no TCP port), with --appendonly yes
 * --appendfsync always --save '': Redis writes and fsyncs the AOF in
 * beforeSleep, before it sends the replies of that event-loop turn, so no
 * reply leaves before its effect is on disk — the same durability as once
 * (and group commit too: one fsync per turn).
 * Invariant: start checks the running server's appendonly/appendfsync
 * before anything is measured.
 * Never: talks to a Redis it did not start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench/bench_env.h"
#include "bench/compare_peer.h"
#include "bench/compare_proc.h"
#include "bench/job_row.h"

#define REDIS_READY_MS 10000
#define REDIS_STOP_MS  10000
#define REDIS_CALL_S   10 /* a reply not back in this long is an error */

/* KEYS[1] idempotency key, KEYS[2] counter, ARGV[1] increment.
 * Returns {replayed, value}. */
static const char SCRIPT[] =
    "if redis.call('SET', KEYS[1], 'pending', 'NX') then\n"
    "  local v = redis.call('INCRBY', KEYS[2], ARGV[1])\n"
    "  redis.call('SET', KEYS[1], v)\n"
    "  return {0, v}\n"
    "end\n"
    "return {1, tonumber(redis.call('GET', KEYS[1]))}\n";

/* KEYS[1] idempotency key, KEYS[2] job row (a hash: row, ver); ARGV[1]
 * the version the caller read, ARGV[2] the new row, ARGV[3] its
 * transitions count. Returns {outcome, version, payload} as job_outcome:
 * 0 applied (the new version), 1 replayed (payload: the stored count),
 * 2 moved (version and row as they are). */
static const char JOB_SCRIPT[] =
    "local done = redis.call('GET', KEYS[1])\n"
    "if done then return {1, 0, done} end\n"
    "local v = tonumber(redis.call('HGET', KEYS[2], 'ver') or '0')\n"
    "if v ~= tonumber(ARGV[1]) then\n"
    "  return {2, v, redis.call('HGET', KEYS[2], 'row') or ''}\n"
    "end\n"
    "redis.call('HSET', KEYS[2], 'row', ARGV[2], 'ver', v + 1)\n"
    "redis.call('SET', KEYS[1], ARGV[3])\n"
    "return {0, v + 1, ARGV[3]}\n";

typedef struct redis_env {
    char sock[300];
    char log[300];
    char sha[48];
    char job_sha[48];
    pid_t pid;
} redis_env;

typedef struct redis_conn {
    redisContext *c;
    const char *sha;
    const char *job_sha;
    char counter[96];
    int level, index;
    uint64_t last_n; /* the last call that returned OK; 0: none */
    job_cache job;   /* redis-job */
} redis_conn;

static redisContext *
connect_to(const redis_env *e, char *err)
{
    struct timeval tv = {REDIS_CALL_S, 0};
    redisContext *c = redisConnectUnixWithTimeout(e->sock, tv);

    if (c == NULL || c->err) {
        snprintf(err, COMPARE_ERR_LEN, "connect %s: %s", e->sock,
                 c != NULL ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

/* Sends argv, returns the reply (freeReplyObject) or NULL with err. */
static redisReply *
command(redisContext *c, int argc, const char **argv, char *err)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);

    if (r == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "redis: %s", c->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, COMPARE_ERR_LEN, "redis: %s", r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

static int
config_is(redisContext *c, const char *name, const char *want, char *err)
{
    const char *argv[] = {"CONFIG", "GET", name};
    redisReply *r = command(c, 3, argv, err);
    int ok;

    if (r == NULL) {
        return -1;
    }
    ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
         r->element[1]->type == REDIS_REPLY_STRING &&
         strcasecmp(r->element[1]->str, want) == 0;
    if (!ok) {
        snprintf(err, COMPARE_ERR_LEN, "redis: %s is not %s", name, want);
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static int
wait_ready(redis_env *e, char *err)
{
    int64_t deadline = bench_now_ns() + (int64_t)REDIS_READY_MS * 1000000;

    for (int i = 0; i < REDIS_READY_MS / 20 + 1; i++) {
        redisContext *c;

        if (compare_proc_exited(e->pid)) {
            e->pid = 0;
            snprintf(err, COMPARE_ERR_LEN, "redis-server exited");
            return -1;
        }
        if (access(e->sock, F_OK) == 0 && (c = connect_to(e, err)) != NULL) {
            const char *ping[] = {"PING"};
            redisReply *r = command(c, 1, ping, err);
            int rv = -1;
            if (r != NULL) {
                freeReplyObject(r);
                rv = 0;
                if (config_is(c, "appendonly", "yes", err) != 0 ||
                    config_is(c, "appendfsync", "always", err) != 0) {
                    rv = -2;
                }
            }
            redisFree(c);
            if (rv != -1) {
                return rv == 0 ? 0 : -1;
            }
        }
        if (bench_now_ns() > deadline) {
            break;
        }
        bench_sleep_ms(20);
    }
    snprintf(err, COMPARE_ERR_LEN, "redis-server did not answer on %s",
             e->sock);
    return -1;
}

/* SCRIPT LOAD of script; its sha into sha (48 bytes). */
static int
load_script(redis_env *e, const char *script, char *sha, char *err)
{
    const char *argv[] = {"SCRIPT", "LOAD", script};
    redisContext *c = connect_to(e, err);
    redisReply *r;
    int rv = -1;

    if (c == NULL) {
        return -1;
    }
    if ((r = command(c, 3, argv, err)) != NULL) {
        if (r->type == REDIS_REPLY_STRING && r->len < 48) {
            snprintf(sha, 48, "%s", r->str);
            rv = 0;
        } else {
            snprintf(err, COMPARE_ERR_LEN, "redis: SCRIPT LOAD: odd reply");
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return rv;
}

static int
redis_start(const compare_config *cfg, void **envp)
{
    redis_env *e = calloc(1, sizeof(*e));
    char err[COMPARE_ERR_LEN] = "";

    if (e == NULL) {
        return -1;
    }
    snprintf(e->sock, sizeof(e->sock), "%s/redis.sock", cfg->dir);
    snprintf(e->log, sizeof(e->log), "%s/redis.log", cfg->dir);
    {
        const char *argv[] = {cfg->redis_bin,
                              "--port",
                              "0",
                              "--bind",
                              "127.0.0.1",
                              "--unixsocket",
                              e->sock,
                              "--unixsocketperm",
                              "700",
                              "--dir",
                              cfg->dir,
                              "--appendonly",
                              "yes",
                              "--appendfsync",
                              "always",
                              "--save",
                              "",
                              "--daemonize",
                              "no",
                              "--logfile",
                              "",
                              NULL};
        e->pid = compare_proc_spawn(argv, NULL, e->log);
    }
    if (e->pid < 0) {
        free(e);
        return -1;
    }
    if (wait_ready(e, err) != 0 || load_script(e, SCRIPT, e->sha, err) != 0 ||
        load_script(e, JOB_SCRIPT, e->job_sha, err) != 0) {
        fprintf(stderr, "bench_compare: %s\n", err);
        compare_proc_tail(e->log, 1500);
        compare_proc_stop(e->pid, REDIS_STOP_MS);
        free(e);
        return -1;
    }
    *envp = e;
    return 0;
}

static void
redis_stop(void *env)
{
    redis_env *e = env;

    if (e != NULL) {
        compare_proc_stop(e->pid, REDIS_STOP_MS); /* SIGTERM: clean exit */
        free(e);
    }
}

static int
redis_open(void *env, const compare_caller *who, void **connp, char *err)
{
    redis_conn *k = calloc(1, sizeof(*k));

    if (k == NULL) {
        snprintf(err, COMPARE_ERR_LEN, "out of memory");
        return -1;
    }
    if ((k->c = connect_to(env, err)) == NULL) {
        free(k);
        return -1;
    }
    k->sha = ((redis_env *)env)->sha;
    k->job_sha = ((redis_env *)env)->job_sha;
    job_cache_init(&k->job);
    k->level = who->level;
    k->index = who->index;
    snprintf(k->counter, sizeof(k->counter), "%s", who->counter);
    *connp = k;
    return 0;
}

/* EVALSHA for call n of this caller. */
static int
evalsha(redis_conn *k, uint64_t n, bool *replayed, int64_t *value, char *err)
{
    char key[96];
    const char *argv[6];
    redisReply *r;
    int rv = -1;

    snprintf(key, sizeof(key), "idem/%d/%d/%llu", k->level, k->index,
             (unsigned long long)n);
    argv[0] = "EVALSHA";
    argv[1] = k->sha;
    argv[2] = "2";
    argv[3] = key;
    argv[4] = k->counter;
    argv[5] = "1";
    if ((r = command(k->c, 6, argv, err)) == NULL) {
        return -1;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->type == REDIS_REPLY_INTEGER) {
        *replayed = r->element[0]->integer != 0;
        *value = r->element[1]->integer;
        rv = 0;
    } else {
        snprintf(err, COMPARE_ERR_LEN, "redis: odd reply to EVALSHA");
    }
    freeReplyObject(r);
    return rv;
}

static int
redis_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    redis_conn *k = conn;
    bool replayed;

    if (evalsha(k, n, &replayed, value, err) != 0) {
        return -1;
    }
    if (replayed) {
        snprintf(err, COMPARE_ERR_LEN, "redis: key %llu already used",
                 (unsigned long long)n);
        return -1;
    }
    k->last_n = n;
    return 0;
}

static int
redis_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    redis_conn *k = conn;

    if (k->last_n == 0) {
        snprintf(err, COMPARE_ERR_LEN, "no call to replay");
        return -1;
    }
    return evalsha(k, k->last_n, replayed, value, err);
}

static void
redis_close(void *conn)
{
    redis_conn *k = conn;

    if (k != NULL) {
        redisFree(k->c);
        free(k);
    }
}

static int
redis_read(void *env, const char *counter, int64_t *value, char *err)
{
    const char *argv[] = {"GET", counter};
    redisContext *c = connect_to(env, err);
    redisReply *r;
    int rv = -1;

    if (c == NULL) {
        return -1;
    }
    if ((r = command(c, 2, argv, err)) != NULL) {
        if (r->type == REDIS_REPLY_STRING) {
            *value = strtoll(r->str, NULL, 10);
            rv = 0;
        } else if (r->type == REDIS_REPLY_NIL) {
            *value = 0;
            rv = 0;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return rv;
}

/* ---- redis-job ---------------------------------------------------------- */

/* One EVALSHA of the job script (job_attempt_fn). */
static int
job_attempt(void *conn, uint64_t n, int64_t expect, const char *row,
            size_t rlen, int64_t t, job_outcome *out, int64_t *version,
            int64_t *transitions, char *err)
{
    redis_conn *k = conn;
    char key[96], ex[32], ts[32];
    const char *argv[] = {"EVALSHA",  k->job_sha, "2", key,
                          k->counter, ex,         row, ts};
    size_t lens[8];
    redisReply *r, **el;
    int rv = -1;

    snprintf(key, sizeof(key), "idem/%d/%d/%llu", k->level, k->index,
             (unsigned long long)n);
    snprintf(ex, sizeof(ex), "%lld", (long long)expect);
    snprintf(ts, sizeof(ts), "%lld", (long long)t);
    for (int i = 0; i < 8; i++) {
        lens[i] = argv[i] == row ? rlen : strlen(argv[i]);
    }
    if ((r = redisCommandArgv(k->c, 8, argv, lens)) == NULL ||
        r->type == REDIS_REPLY_ERROR) {
        snprintf(err, COMPARE_ERR_LEN, "redis: %s",
                 r != NULL ? r->str : k->c->errstr);
        freeReplyObject(r);
        return -1;
    }
    el = r->element;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        el[0]->type == REDIS_REPLY_INTEGER && el[0]->integer >= 0 &&
        el[0]->integer <= JOB_MOVED && el[1]->type == REDIS_REPLY_INTEGER &&
        el[2]->type == REDIS_REPLY_STRING) {
        *out = (job_outcome)el[0]->integer;
        *version = el[1]->integer;
        *transitions = strtoll(el[2]->str, NULL, 10);
        rv = 0;
        if (*out == JOB_MOVED && el[2]->len > 0 &&
            job_row_parse(el[2]->str, el[2]->len, transitions) != 0) {
            snprintf(err, COMPARE_ERR_LEN, "redis: not a job row");
            rv = -1;
        }
    } else {
        snprintf(err, COMPARE_ERR_LEN, "redis: odd reply to the job script");
    }
    freeReplyObject(r);
    return rv;
}

static int
job_call(void *conn, uint64_t n, int64_t *value, char *err)
{
    return job_transition(conn, job_attempt, &((redis_conn *)conn)->job, n,
                          value, err);
}

static int
job_replay_last(void *conn, bool *replayed, int64_t *value, char *err)
{
    return job_replay(conn, job_attempt, &((redis_conn *)conn)->job, replayed,
                      value, err);
}

static int
job_read(void *env, const char *job, int64_t *value, char *err)
{
    const char *argv[] = {"HGET", job, "row"};
    redisContext *c = connect_to(env, err);
    redisReply *r;
    int rv = -1;

    if (c == NULL) {
        return -1;
    }
    if ((r = command(c, 3, argv, err)) != NULL) {
        if (r->type == REDIS_REPLY_NIL) {
            *value = 0;
            rv = 0;
        } else if (r->type == REDIS_REPLY_STRING &&
                   job_row_parse(r->str, r->len, value) == 0) {
            rv = 0;
        } else {
            snprintf(err, COMPARE_ERR_LEN, "redis: %s is not a job row", job);
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return rv;
}

static pid_t
redis_server_pid(void *env)
{
    return ((redis_env *)env)->pid;
}

const compare_peer compare_peer_redis = {
    .name = "redis",
    .what = "Redis, appendfsync always, EVALSHA: SET NX key + INCRBY + "
            "store result",
    .exactly_once = true,
    .start = redis_start,
    .stop = redis_stop,
    .open = redis_open,
    .call = redis_call,
    .replay_last = redis_replay_last,
    .close = redis_close,
    .read = redis_read,
    .server_pid = redis_server_pid,
};

const compare_peer compare_peer_redis_job = {
    .name = "redis-job",
    .what = "Redis, appendfsync always, EVALSHA: key check + job row "
            "written if at the read version",
    .exactly_once = true,
    .job = true,
    .start = redis_start,
    .stop = redis_stop,
    .open = redis_open,
    .call = job_call,
    .replay_last = job_replay_last,
    .close = redis_close,
    .read = job_read,
    .server_pid = redis_server_pid,
};
