/*
 * follow.c — a replica before it leads: apply the etcd log to the local
 * LevelDB in order, refuse calls with the leader's URL, campaign for the
 * leader key when nobody holds it.
 *
 * Owns: the follower's store handle (closed before repl_follow returns),
 * the run of log parts being gathered, the campaign.
 * Invariant: entries are applied in index order, each with its index in
 * the same LevelDB write (unsynced: store_set_log_durable); an entry
 * written as parts is applied only once its last part is read, and a run
 * of parts cut short by a step-down (followed by anything but its next
 * part) is never applied. A replica returns as leader only after holding
 * the leader key and applying the log to its end.
 * A replica that wins re-executes and leads from the new process
 * (handover.c), so the follower's sockets are never closed in-process.
 * A replica whose next entry was trimmed (trim.c) seeds itself from the
 * leader's snapshot (seed.c) and never campaigns until it has.
 * Never: writes to etcd except the campaign (its lease and the leader
 * key) and its published applied index; serves calls.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "store/datadir.h"
#include "store/store.h"
#include "proto/wire.h"
#include "proto/log.h"
#include "proto/reasons.h"

/* How often a follower reads the log and the leader key while no etcd
 * watch is established (watch.c); with one, it reads when the watch wakes
 * it and at least every FOLLOW_IDLE_MS (in case a wake-up was lost). */
#define FOLLOW_POLL_MS 20
#define FOLLOW_IDLE_MS 1000
/* Log keys read per request. */
#define FOLLOW_BATCH 64
/* How often a follower publishes its applied index, at most (trim.c). */
#define FOLLOW_PUBLISH_MS 250
/* Between attempts to seed from a snapshot. */
#define FOLLOW_SEED_RETRY_MS 500

typedef struct follow_run {
    uint64_t first; /* first index of the run; 0: no run */
    uint8_t *buf;
    size_t len;
    size_t cap;
} follow_run;

typedef struct follower {
    repl *r;
    store *st;
    uint64_t applied;   /* last index applied to st */
    uint64_t read_upto; /* last log index read */
    bool checked;       /* the entry at applied was found in etcd */
    follow_run run;
    uint64_t published; /* the applied index last published */
    bool have_published;
    uint64_t published_ms;
} follower;

static void
follow_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int
follow_run_add(follow_run *run, const uint8_t *p, size_t n)
{
    if (run->len + n > run->cap) {
        size_t cap = (run->len + n) * 2;
        uint8_t *b = realloc(run->buf, cap);
        if (b == NULL) {
            return ENOMEM;
        }
        run->buf = b;
        run->cap = cap;
    }
    memcpy(run->buf + run->len, p, n);
    run->len += n;
    return 0;
}

static int
follow_apply(follower *f, const uint8_t *p, size_t n, uint64_t index)
{
    int rv = store_apply_entry(f->st, p, n, index);

    if (rv != 0) {
        log_error("repl: cannot apply log entry %" PRIu64 ": %s", index,
                  strerror(rv));
        return rv;
    }
    f->applied = index;
    return 0;
}

/* One log key's value at index. */
static int
follow_one(follower *f, uint64_t index, const uint8_t *v, size_t vlen)
{
    uint64_t first;
    int rv = 0;

    if (vlen < REPL_HDR_LEN) {
        return EPROTO;
    }
    first = wire_get_be64(v + 1);
    v += REPL_HDR_LEN;
    vlen -= REPL_HDR_LEN;
    switch (v[-REPL_HDR_LEN]) {
    case REPL_KIND_WHOLE:
        f->run.first = 0;
        f->run.len = 0;
        rv = follow_apply(f, v, vlen, index);
        break;
    case REPL_KIND_PART:
        if (first == index) {
            f->run.first = index; /* a new run; an unfinished one is void */
            f->run.len = 0;
        } else if (first != f->run.first || f->run.first == 0) {
            f->run.first = 0; /* a part of a void run */
            break;
        }
        rv = follow_run_add(&f->run, v, vlen);
        break;
    case REPL_KIND_LAST:
        if (f->run.first != 0 && first == f->run.first &&
            (rv = follow_run_add(&f->run, v, vlen)) == 0) {
            rv = follow_apply(f, f->run.buf, f->run.len, index);
        }
        f->run.first = 0;
        f->run.len = 0;
        break;
    default:
        rv = EPROTO;
    }
    return rv;
}

/* Publishes the applied index for the leader's trimming, at most every
 * FOLLOW_PUBLISH_MS; a failure is tried again later. */
static void
follow_publish(follower *f)
{
    repl *r = f->r;
    uint64_t now = repl_now_ms();
    char val[24];
    etcd_txn *t;
    bool ok = false;

    if ((f->have_published && f->published == f->applied) ||
        now < f->published_ms + FOLLOW_PUBLISH_MS ||
        (t = etcd_txn_alloc()) == NULL) {
        return;
    }
    snprintf(val, sizeof(val), "%" PRIu64, f->applied);
    etcd_txn_put(t, r->applied_key, strlen(r->applied_key), val, strlen(val),
                 0);
    if (etcd_txn_run(r->kv, t, &ok, NULL) == 0 && ok) {
        f->published = f->applied;
        f->have_published = true;
    }
    etcd_txn_free(t);
    f->published_ms = now;
}

/*
 * Reads and applies the log from read_upto + 1 to its end; serializable:
 * the log keys as the etcd member asked holds them (a follower: a member
 * behind the cluster only delays entries, and spares the Raft leader a
 * read round per entry), else as the cluster has committed them (a new
 * leader: it must apply every entry before it appends). The checks that
 * decide (this replica's entry still there, where the log starts) always
 * read linearizably. 0 (and
 * r->next set past the last key read), EAGAIN (etcd did not answer),
 * ERANGE (entries this replica needs were trimmed: it needs a snapshot),
 * or an error (another log, a gap, a bad entry, local I/O).
 */
static int
follow_catch_up(follower *f, bool serializable)
{
    repl *r = f->r;
    char from[REPL_KEY_MAX], end[REPL_KEY_MAX];
    bool more = true;

    snprintf(end, sizeof(end), "%s", r->log_prefix);
    end[strlen(end) - 1]++; /* "/log/" -> "/log0": the prefix's end */
    if (!f->checked && f->applied > 0) {
        /* The last entry this replica applied is still there, or was
         * trimmed (the first index kept is past it) — unless etcd is
         * another one, or was wiped: then following it would make this
         * replica diverge. */
        etcd_kv *kvs = NULL;
        size_t n = 0;
        int rv;

        repl_log_key(r, f->applied, from, sizeof(from));
        if ((rv = etcd_range(r->kv, from, strlen(from), NULL, 0, 1, &kvs, &n,
                             NULL, NULL)) != 0) {
            return rv;
        }
        etcd_kvs_free(kvs, n);
        if (n == 0) {
            uint64_t first = 1;
            if ((rv = repl_first_read(f->r, f->r->kv, &first)) != 0) {
                return rv;
            }
            if (first == f->applied + 1) {
                /* Trimmed just past us (or a cluster restored from a
                 * backup at this index): we hold everything below. */
                log_info("repl: the log starts at %" PRIu64
                         ", right after this replica's index",
                         first);
            } else if (first > f->applied) {
                log_info("repl: log entry %" PRIu64 " (applied here) was "
                         "trimmed; the log starts at %" PRIu64
                         ": this replica needs a snapshot",
                         f->applied, first);
                return ERANGE;
            } else {
                log_error("repl: this replica applied log entry %" PRIu64
                          " but etcd does not hold it (another or a wiped "
                          "etcd?): refusing to follow a different log",
                          f->applied);
                return ESTALE;
            }
        }
    }
    f->checked = true;
    while (more) {
        etcd_kv *kvs = NULL;
        size_t n = 0;
        int rv;

        repl_log_key(r, f->read_upto + 1, from, sizeof(from));
        rv = serializable
                 ? etcd_range_serializable(r->kv, from, strlen(from), end,
                                           strlen(end), FOLLOW_BATCH, &kvs, &n,
                                           &more, NULL)
                 : etcd_range(r->kv, from, strlen(from), end, strlen(end),
                              FOLLOW_BATCH, &kvs, &n, &more, NULL);
        if (rv != 0) {
            return rv;
        }
        for (size_t i = 0; i < n && rv == 0; i++) {
            uint64_t index = repl_log_index(r, kvs[i].key, kvs[i].klen);
            if (index != f->read_upto + 1) {
                uint64_t first = 1;
                if ((rv = repl_first_read(f->r, f->r->kv, &first)) == 0) {
                    rv = first > f->read_upto + 1 ? ERANGE : EPROTO;
                    log_info("repl: log key %s follows index %" PRIu64 ": %s",
                             kvs[i].key, f->read_upto,
                             rv == ERANGE ? "the entries this replica needs "
                                            "were trimmed; it needs a snapshot"
                                          : "a gap in the log");
                }
                break;
            }
            if ((rv = follow_one(f, index, (const uint8_t *)kvs[i].val,
                                 kvs[i].vlen)) == 0) {
                f->read_upto = index;
            }
        }
        etcd_kvs_free(kvs, n);
        if (rv != 0) {
            return rv;
        }
        if (n == 0) {
            break;
        }
    }
    r->next = f->read_upto + 1;
    return 0;
}

/* Tries to take the leader key. 0 and *won, EAGAIN, or an error. */
static int
follow_campaign(follower *f, bool *won)
{
    repl *r = f->r;
    const char *url = r->cfg.advertise;
    uint64_t sent = repl_now_ms();
    etcd_txn *t;
    int64_t rev = 0;
    int rv;

    *won = false;
    if ((rv = etcd_lease_grant(r->kv, r->cfg.ttl_s, &r->lease)) != 0) {
        return rv;
    }
    if ((t = etcd_txn_alloc()) == NULL) {
        return ENOMEM;
    }
    etcd_txn_if_created(t, r->leader_key, strlen(r->leader_key), 0);
    etcd_txn_put(t, r->leader_key, strlen(r->leader_key), url, strlen(url),
                 r->lease);
    rv = etcd_txn_run(r->kv, t, won, &rev);
    etcd_txn_free(t);
    if (rv != 0 || !*won) {
        (void)etcd_lease_revoke(r->kv, r->lease);
        r->lease = 0;
        *won = false;
        return rv;
    }
    /* The put made the key: its create_revision is the Txn's revision. */
    r->leader_rev = rev;
    return repl_keepalive_start(r, sent);
}

/* The leader key's value (the leader's URL) into url; "" when none. */
static int
follow_leader(follower *f, char *url, size_t urllen)
{
    repl *r = f->r;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int rv;

    url[0] = '\0';
    if ((rv = etcd_range(r->kv, r->leader_key, strlen(r->leader_key), NULL, 0,
                         1, &kvs, &n, NULL, NULL)) != 0) {
        return rv;
    }
    if (n == 1) {
        snprintf(url, urllen, "%.*s", (int)kvs[0].vlen, kvs[0].val);
    }
    etcd_kvs_free(kvs, n);
    return 0;
}

/*
 * Seeds from the leader's snapshot, then reads the log on. 0, EINPROGRESS
 * (no leader, or it did not serve the snapshot: try again later; url says
 * which), EAGAIN (etcd did not answer), or an error.
 */
static int
follow_seed(follower *f, char *url, size_t urllen)
{
    int rv;

    if ((rv = follow_leader(f, url, urllen)) != 0) {
        return rv;
    }
    if (url[0] == '\0') {
        return EINPROGRESS; /* no leader to seed from; never campaign */
    }
    if ((rv = repl_seed(f->r, url, &f->st, &f->applied)) != 0) {
        follow_sleep_ms(FOLLOW_SEED_RETRY_MS);
        return EINPROGRESS;
    }
    f->read_upto = f->applied;
    f->checked = true; /* the snapshot came from this cluster's leader */
    f->run.first = 0;
    f->run.len = 0;
    rv = follow_catch_up(f, true);
    return rv == ERANGE ? EINPROGRESS : rv;
}

static repl *
follow_repl_alloc(const repl_config *cfg)
{
    repl *r = calloc(1, sizeof(*r));
    ssize_t n;

    if (r == NULL) {
        return NULL;
    }
    r->cfg = *cfg;
    repl_keys_init(r);
    /* The step-down runs this file again (a path, not /proc/self/exe,
     * which under a wrapper such as valgrind is the wrapper). */
    if ((n = readlink("/proc/self/exe", r->self, sizeof(r->self) - 1)) <= 0) {
        free(r);
        return NULL;
    }
    r->self[n] = '\0';
    return r;
}

/* repl_config.on_follow, when there is one. */
static void
follow_tell(const repl_config *cfg, const char *status)
{
    if (cfg->on_follow != NULL) {
        cfg->on_follow(cfg->on_follow_arg, status);
    }
}

int
repl_follow(repl **rp, const repl_config *cfg, const sigset_t *stop, int *sig)
{
    follower f = {0};
    notleader *nl = NULL;
    repl_watch *w = NULL;
    char url[1024] = "", last_url[1024] = "";
    const char *last_state = "";
    bool woken = false, behind = false; /* the watch; a read behind it */
    struct timespec zero = {0, 0};
    bool won = false; /* the leader key is ours */
    char *err = NULL;
    repl *r;
    int rv;

    if ((r = follow_repl_alloc(cfg)) == NULL) {
        return ENOMEM;
    }
    f.r = r;
    if (cfg->key_file != NULL) {
        struct stat kst;
        char kerr[512];

        if ((rv = keyfile_read_trusted(cfg->key_file, r->key_name, r->key, kerr,
                                       sizeof(kerr))) != 0) {
            log_error("repl: --replicate-key: %s (the file must hold one "
                      "line \"NAME KEYHEX\", as oncectl principal add "
                      "--key-out writes it, mode 0600, owned by this user)",
                      kerr);
            goto out;
        }
        r->signs = true;
        log_info("repl: seeding requests are signed as principal %s (%s)",
                 r->key_name, cfg->key_file);
        if (stat(cfg->key_file, &kst) == 0 && (kst.st_mode & 077) != 0) {
            /* As onced says of its principals file: a warning. */
            log_warn("%s is readable by others (mode %03o): whoever can "
                     "read it can sign requests as principal %s. Fix: chmod "
                     "600 %s, then give the replicas a new key (oncectl "
                     "principal add) and revoke this one",
                     cfg->key_file, (unsigned)(kst.st_mode & 0777), r->key_name,
                     cfg->key_file);
        }
    }
    /* Appends (up to REPL_PART_MAX bytes each) may take longer than a
     * keepalive: their handle waits up to 2/3 of the TTL — an append
     * that lands later still fails its compare if the lease is gone. */
    if ((rv = etcd_open_tls(&r->kv, cfg->endpoints, &cfg->etcd_tls,
                            cfg->timeout_ms > cfg->ttl_s * 2000 / 3
                                ? cfg->timeout_ms
                                : cfg->ttl_s * 2000 / 3)) != 0 ||
        (rv = etcd_open_tls(&r->ka, cfg->endpoints, &cfg->etcd_tls,
                            cfg->timeout_ms)) != 0) {
        log_error("repl: bad --replicate \"%s\"", cfg->endpoints);
        goto out;
    }
    if ((rv = store_open(&f.st, cfg->data_dir, &err)) == EINPROGRESS) {
        /* A seeding that stopped half-way: not a store. Start empty; the
         * log or a snapshot fills it. */
        log_warn("repl: %s: removing it", err);
        free(err);
        err = NULL;
        if ((rv = datadir_remove_store(cfg->data_dir, &err)) == 0) {
            rv = store_open(&f.st, cfg->data_dir, &err);
        }
    }
    if (rv != 0) {
        log_error("repl: cannot open the LevelDB in %s: %s", cfg->data_dir,
                  err != NULL ? err : "error");
        free(err);
        goto out;
    }
    store_set_log_durable(f.st); /* etcd's log is what is durable */
    if ((rv = store_applied_index(f.st, &f.applied)) != 0) {
        goto out;
    }
    f.read_upto = f.applied;
    /* Re-executed after winning (handover.c)? Then lead, if still ours. */
    if ((rv = repl_handover_take(r, &won)) != 0) {
        goto out;
    }
    if (!won) {
        if ((rv = notleader_open(&nl, cfg->listen, cfg->nlisten, cfg->tls_cert,
                                 cfg->tls_key)) != 0) {
            goto out;
        }
        char prefix[REPL_KEY_MAX]; /* every key of the cluster */

        snprintf(prefix, sizeof(prefix), "/once/%s/", cfg->cluster);
        if (repl_watch_open(&w, cfg->endpoints, &cfg->etcd_tls, prefix) != 0) {
            w = NULL; /* polls every FOLLOW_POLL_MS instead */
        }
        log_info("repl: following cluster \"%s\" on %s from log index "
                 "%" PRIu64 "",
                 cfg->cluster, cfg->endpoints, f.applied);
    }
    while (!won) {
        const char *state;
        uint64_t before = f.read_upto;

        if ((*sig = sigtimedwait(stop, NULL, &zero)) > 0 && *sig != SIGHUP) {
            rv = ECANCELED;
            goto out;
        }
        rv = f.st != NULL ? follow_catch_up(&f, true) : ERANGE;
        /* Woken but nothing new: the member read may be behind the one
         * that woke us; read again soon rather than at the next wake. */
        behind = woken && rv == 0 && f.read_upto == before;
        if (rv == ERANGE) {
            rv = follow_seed(&f, url, sizeof(url));
        }
        if (rv == 0) {
            follow_publish(&f);
            if ((rv = follow_leader(&f, url, sizeof(url))) == 0 &&
                url[0] == '\0') {
                rv = follow_campaign(&f, &won);
            }
        }
        if (rv == 0 && won) {
            /* Ours now: lead from a fresh process (handover.c). */
            repl_handover_exec(r);
        }
        if (rv != 0 && rv != EAGAIN && rv != EINPROGRESS) {
            log_error("repl: cannot follow the log: %s", strerror(rv));
            goto out;
        }
        state = rv == EAGAIN     ? REASON_ETCD_UNAVAILABLE
                : url[0] != '\0' ? REASON_NOT_LEADER
                                 : REASON_NO_LEADER;
        if (strcmp(state, last_state) != 0 || strcmp(url, last_url) != 0) {
            char status[1200];

            notleader_set(nl, url[0] != '\0' ? url : NULL, state);
            log_info("repl: %s%s%s", state,
                     url[0] != '\0' ? ": the leader is " : "", url);
            if (rv == EAGAIN) {
                log_info("repl: etcd: %s", etcd_last_error(r->kv));
            }
            last_state = state;
            snprintf(last_url, sizeof(last_url), "%s", url);
            snprintf(status, sizeof(status),
                     "following cluster %s from log index %" PRIu64 ": %s%s%s",
                     cfg->cluster, f.applied, state,
                     url[0] != '\0' ? ", the leader is " : "", url);
            follow_tell(cfg, status);
        } else {
            follow_tell(cfg, NULL);
        }
        if (w != NULL) {
            woken = repl_watch_wait(w, FOLLOW_POLL_MS,
                                    behind ? FOLLOW_POLL_MS : FOLLOW_IDLE_MS);
        } else {
            follow_sleep_ms(FOLLOW_POLL_MS);
        }
    }
    /* Ours now: nobody else appends. Apply to the end, take the
     * cluster's grants key. */
    while ((rv = follow_catch_up(&f, false)) == EAGAIN) {
        follow_sleep_ms(FOLLOW_POLL_MS);
    }
    if (rv != 0) {
        repl_step_down(r, "cannot apply the log after winning");
    }
    if ((rv = repl_share_key(r)) == EEXIST) {
        sodium_memzero(r->key, sizeof(r->key));
        repl_close(r);
        r = NULL;
        goto out_closed;
    }
    if (rv != 0) {
        repl_step_down(r, "cannot share the grants key");
    }
    if ((rv = repl_trim_start(r)) != 0) {
        log_warn("repl: cannot start trimming the log: %s; the log "
                 "grows until the next leader",
                 strerror(rv));
    }
    log_info("repl: leading cluster \"%s\" as %s from log "
             "index %" PRIu64 " (lease %" PRIx64 ")",
             cfg->cluster, cfg->advertise, r->next - 1, (uint64_t)r->lease);
    store_close(f.st);
    free(f.run.buf);
    sodium_memzero(r->key, sizeof(r->key)); /* a leader does not seed */
    *rp = r;
    return 0;
out:
    etcd_close(r->kv);
    etcd_close(r->ka);
    sodium_memzero(r->key, sizeof(r->key));
    free(r);
out_closed:
    repl_watch_close(w);
    notleader_close(nl);
    store_close(f.st);
    free(f.run.buf);
    return rv;
}
