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
#include <unistd.h>

#include <sodium.h>

#include "store/datadir.h"
#include "store/store.h"
#include "proto/wire.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/trust.h"
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
    uint64_t now = clock_now_ms();
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
 * The last entry this replica applied is still in etcd's log, or was
 * trimmed (the first index kept is past it) — unless etcd is another one,
 * or was wiped: then following it would make this replica diverge. Reads
 * linearizably. 0 (the log goes on from it), EAGAIN (etcd did not
 * answer), ERANGE (trimmed past it: a snapshot is needed) or ESTALE
 * (another log).
 */
static int
follow_check_applied(follower *f)
{
    repl *r = f->r;
    char key[REPL_KEY_MAX];
    etcd_kv *kvs = NULL;
    size_t n = 0;
    uint64_t first = 1;
    int rv;

    repl_log_key(r, f->applied, key, sizeof(key));
    if ((rv = etcd_range(r->kv, key, strlen(key), NULL, 0, 1, &kvs, &n, NULL,
                         NULL)) != 0) {
        return rv;
    }
    etcd_kvs_free(kvs, n);
    if (n != 0) {
        return 0;
    }
    if ((rv = repl_first_read(r, r->kv, &first)) != 0) {
        return rv;
    }
    if (first == f->applied + 1) {
        /* Trimmed just past us (or a cluster restored from a
         * backup at this index): we hold everything below. */
        log_info("repl: the log starts at %" PRIu64
                 ", right after this replica's index",
                 first);
        return 0;
    }
    if (first > f->applied) {
        log_info("repl: log entry %" PRIu64 " (applied here) was "
                 "trimmed; the log starts at %" PRIu64
                 ": this replica needs a snapshot",
                 f->applied, first);
        return ERANGE;
    }
    log_error("repl: this replica applied log entry %" PRIu64
              " but etcd does not hold it (another or a wiped "
              "etcd?): refusing to follow a different log",
              f->applied);
    return ESTALE;
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
        int rv = follow_check_applied(f);

        if (rv != 0) {
            return rv;
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
    uint64_t sent = clock_now_ms();
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
        clock_sleep_ms(FOLLOW_SEED_RETRY_MS);
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

/* ---- opening ------------------------------------------------------------ */

/* --replicate-key: the principal this replica signs its seeding requests
 * as (seed.c), from a key file trusted as onced trusts its principals
 * file; a file others can read is a warning. 0, or the error (logged). */
static int
follow_key_read(repl *r, const char *key_file)
{
    unsigned mode;
    char kerr[512];
    int rv;

    if ((rv = keyfile_read_trusted(key_file, r->key_name, r->key, kerr,
                                   sizeof(kerr))) != 0) {
        log_error("repl: --replicate-key: %s (the file must hold one "
                  "line \"NAME KEYHEX\", as oncectl principal add "
                  "--key-out writes it, mode 0600, owned by this user)",
                  kerr);
        return rv;
    }
    r->signs = true;
    log_info("repl: seeding requests are signed as principal %s (%s)",
             r->key_name, key_file);
    if (trust_readable_by_others(key_file, &mode)) {
        /* As onced says of its principals file: a warning. */
        log_warn("%s is readable by others (mode %03o): whoever can "
                 "read it can sign requests as principal %s. Fix: chmod "
                 "600 %s, then give the replicas a new key (oncectl "
                 "principal add) and revoke this one",
                 key_file, mode, r->key_name, key_file);
    }
    return 0;
}

/* The two etcd handles: r->kv for reads, campaigns and appends, r->ka for
 * the lease's keepalives. 0, or the error (logged). */
static int
follow_etcd_open(repl *r, const repl_config *cfg)
{
    int rv;

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
    }
    return rv;
}

/* The local LevelDB into f->st, unsynced (etcd's log is what is durable),
 * and the index it applied; a seeding that stopped half-way is removed
 * and the store starts empty. 0, or the error (logged). */
static int
follow_store_open(follower *f, const char *data_dir)
{
    char *err = NULL;
    int rv;

    if ((rv = store_open(&f->st, data_dir, &err)) == EINPROGRESS) {
        /* A seeding that stopped half-way: not a store. Start empty; the
         * log or a snapshot fills it. */
        log_warn("repl: %s: removing it", err);
        free(err);
        err = NULL;
        if ((rv = datadir_remove_store(data_dir, &err)) == 0) {
            rv = store_open(&f->st, data_dir, &err);
        }
    }
    if (rv != 0) {
        log_error("repl: cannot open the LevelDB in %s: %s", data_dir,
                  err != NULL ? err : "error");
        free(err);
        return rv;
    }
    store_set_log_durable(f->st); /* etcd's log is what is durable */
    if ((rv = store_applied_index(f->st, &f->applied)) != 0) {
        return rv;
    }
    f->read_upto = f->applied;
    return 0;
}

/* A follower's face: the NOT_LEADER responder on the listen URLs, and a
 * watch on every key of the cluster (*w NULL when it cannot be had: the
 * loop polls instead). 0, or the responder's error. */
static int
follow_listen(const repl_config *cfg, follower *f, notleader **nl,
              repl_watch **w)
{
    char prefix[REPL_KEY_MAX]; /* every key of the cluster */
    int rv;

    if ((rv = notleader_open(nl, cfg->listen, cfg->nlisten, cfg->tls_cert,
                             cfg->tls_key, &f->st)) != 0) {
        return rv;
    }
    snprintf(prefix, sizeof(prefix), "/once/%s/", cfg->cluster);
    if (repl_watch_open(w, cfg->endpoints, &cfg->etcd_tls, prefix) != 0) {
        *w = NULL; /* polls every FOLLOW_POLL_MS instead */
    }
    log_info("repl: following cluster \"%s\" on %s from log index "
             "%" PRIu64 "",
             cfg->cluster, cfg->endpoints, f->applied);
    return 0;
}

/* ---- the follow loop --------------------------------------------------- */

/* What the loop last said (log, NOT_LEADER hint, on_follow): said again
 * only when it changes. */
typedef struct follow_said {
    const char *state; /* a reason; "" before the first turn */
    char url[1024];    /* the leader's URL; "" for none */
} follow_said;

/*
 * One turn: read and apply the log on (or seed from the leader's snapshot
 * when the entries this replica needs were trimmed), publish the applied
 * index, read the leader key and campaign when nobody holds it. url keeps
 * the leader's URL last read ("" none). *behind: woken by the watch but
 * nothing new read (the member read may trail the one that woke us).
 * 0 (*won: the leader key is ours), EAGAIN (etcd did not answer),
 * EINPROGRESS (seeding must wait), or an error.
 */
static int
follow_turn(follower *f, char *url, size_t urllen, bool woken, bool *behind,
            bool *won)
{
    uint64_t before = f->read_upto;
    int rv = f->st != NULL ? follow_catch_up(f, true) : ERANGE;

    /* Woken but nothing new: the member read may be behind the one
     * that woke us; read again soon rather than at the next wake. */
    *behind = woken && rv == 0 && f->read_upto == before;
    if (rv == ERANGE) {
        rv = follow_seed(f, url, urllen);
    }
    if (rv == 0) {
        follow_publish(f);
        if ((rv = follow_leader(f, url, urllen)) == 0 && url[0] == '\0') {
            rv = follow_campaign(f, won);
        }
    }
    return rv;
}

/* Says how a turn that returned rv (0, EAGAIN, EINPROGRESS) left this
 * follower: the NOT_LEADER responder's hint, a log line and on_follow's
 * status when the state or the leader changed, else on_follow's ping. */
static void
follow_report(follower *f, notleader *nl, int rv, const char *url,
              follow_said *said)
{
    const repl_config *cfg = &f->r->cfg;
    const char *state = rv == EAGAIN     ? REASON_ETCD_UNAVAILABLE
                        : url[0] != '\0' ? REASON_NOT_LEADER
                                         : REASON_NO_LEADER;
    char status[1200];

    if (strcmp(state, said->state) == 0 && strcmp(url, said->url) == 0) {
        follow_tell(cfg, NULL);
        return;
    }
    notleader_set(nl, url[0] != '\0' ? url : NULL, state);
    log_info("repl: %s%s%s", state, url[0] != '\0' ? ": the leader is " : "",
             url);
    if (rv == EAGAIN) {
        log_info("repl: etcd: %s", etcd_last_error(f->r->kv));
    }
    said->state = state;
    snprintf(said->url, sizeof(said->url), "%s", url);
    snprintf(status, sizeof(status),
             "following cluster %s from log index %" PRIu64 ": %s%s%s",
             cfg->cluster, f->applied, state,
             url[0] != '\0' ? ", the leader is " : "", url);
    follow_tell(cfg, status);
}

/* Waits for the next turn: until the watch wakes (soon when behind), or
 * FOLLOW_POLL_MS without a watch. Whether the watch woke it. */
static bool
follow_wait(repl_watch *w, bool behind)
{
    if (w == NULL) {
        clock_sleep_ms(FOLLOW_POLL_MS);
        return false;
    }
    return repl_watch_wait(w, FOLLOW_POLL_MS,
                           behind ? FOLLOW_POLL_MS : FOLLOW_IDLE_MS);
}

/* ---- the win ------------------------------------------------------------ */

/*
 * The leader key is ours (this process was re-executed to lead): nobody
 * else appends. Applies the log to its end, takes the cluster's grants
 * key, starts trimming, and hands f->r out in *rp with its seeding key
 * wiped (a leader does not seed). A step-down re-executes and never
 * returns. 0, or EEXIST (the grants key is another's: f->r closed).
 */
static int
follow_win(follower *f, repl **rp)
{
    repl *r = f->r;
    int rv;

    while ((rv = follow_catch_up(f, false)) == EAGAIN) {
        clock_sleep_ms(FOLLOW_POLL_MS);
    }
    if (rv != 0) {
        repl_step_down(r, "cannot apply the log after winning");
    }
    if ((rv = repl_share_key(r)) == EEXIST) {
        sodium_memzero(r->key, sizeof(r->key));
        repl_close(r);
        return EEXIST;
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
             r->cfg.cluster, r->cfg.advertise, r->next - 1, (uint64_t)r->lease);
    sodium_memzero(r->key, sizeof(r->key)); /* a leader does not seed */
    *rp = r;
    return 0;
}

int
repl_follow(repl **rp, const repl_config *cfg, const sigset_t *stop, int *sig)
{
    follower f = {0};
    notleader *nl = NULL;
    repl_watch *w = NULL;
    char url[1024] = "";
    follow_said said = {"", ""};
    bool woken = false, behind = false; /* the watch; a read behind it */
    struct timespec zero = {0, 0};
    bool won = false; /* the leader key is ours */
    repl *r;
    int rv;

    if ((r = follow_repl_alloc(cfg)) == NULL) {
        return ENOMEM;
    }
    f.r = r;
    if ((cfg->key_file != NULL &&
         (rv = follow_key_read(r, cfg->key_file)) != 0) ||
        (rv = follow_etcd_open(r, cfg)) != 0 ||
        (rv = follow_store_open(&f, cfg->data_dir)) != 0) {
        goto out;
    }
    /* Re-executed after winning (handover.c)? Then lead, if still ours. */
    if ((rv = repl_handover_take(r, &won)) != 0 ||
        (!won && (rv = follow_listen(cfg, &f, &nl, &w)) != 0)) {
        goto out;
    }
    while (!won) {
        if ((*sig = sigtimedwait(stop, NULL, &zero)) > 0 && *sig != SIGHUP) {
            rv = ECANCELED;
            goto out;
        }
        rv = follow_turn(&f, url, sizeof(url), woken, &behind, &won);
        if (rv == 0 && won) {
            /* Ours now: lead from a fresh process (handover.c). */
            repl_handover_exec(r);
        }
        if (rv != 0 && rv != EAGAIN && rv != EINPROGRESS) {
            log_error("repl: cannot follow the log: %s", strerror(rv));
            goto out;
        }
        follow_report(&f, nl, rv, url, &said);
        woken = follow_wait(w, behind);
    }
    rv = follow_win(&f, rp); /* 0, or EEXIST with r closed */
    goto out_closed;
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
