/*
 * once_proxy.c — a lossy network between libonce and onced (tests/README.md,
 * docs/performance.md).
 *
 * Owns: one raw nng REP socket listening on --front (clients dial it as if
 * it were onced) and one raw nng REQ socket dialing --back (onced), and two
 * forwarding threads, one per direction. Each message is, independently,
 * dropped with its direction's probability, else forwarded — now, or after
 * a delay (with probability --delay-p, uniform in 1..--delay-ms) — and
 * possibly duplicated. Raw sockets keep nng's routing header, so replies
 * find their requester exactly as through nng_device(); a duplicated reply
 * is discarded by the client's REQ socket, a duplicated request reaches
 * onced twice (the same rpc id concurrently).
 * Invariant: every decision of a direction comes from that direction's own
 * PRNG, seeded from --seed, in the order the direction receives messages:
 * the same seed and the same traffic give the same drops. Delayed messages
 * are bounded (--max-delayed); past the bound a message is forwarded
 * without delay, never queued without limit.
 * The back dialer is watched: nng 1.5.2 gives up a dialer for good when
 * its handshake meets a dying onced (a SIGKILL while it connects), so when
 * the back socket has had no connection for BACK_REDIAL_MS the dialer is
 * closed and dialed again, as libonce's conn_redial does.
 * With --windows the faults act only inside a window the campaign opens by
 * signal (SIGUSR1: drops and duplicates, SIGUSR2: delays) and closes
 * (SIGHUP), which prints what the window did; the drop and duplicate dice
 * are rolled all the same, outside windows too.
 * Never: looks inside a message, reorders what it does not delay, or blocks
 * one direction on the other.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

typedef struct dir_cfg {
    double drop;
    double dup;
} dir_cfg;

typedef struct proxy {
    const char *front;
    const char *back;
    uint64_t seed;
    dir_cfg req, rep;
    double delay_p;
    int delay_ms;
    int max_delayed;
    bool quiet;
    bool windows;           /* --windows: faults only inside a window */
    _Atomic int window;     /* WIN_* bits open now (the main thread) */
    nng_socket fs, bs;      /* raw REP front, raw REQ back */
    _Atomic int delayed;    /* delayed messages not yet sent */
    _Atomic int back_pipes; /* connections of bs now (nng's callbacks) */
    _Atomic uint64_t redials;
} proxy;

/* How long the back socket may go without a connection before its dialer
 * is replaced, and how often that is looked at. */
#define BACK_REDIAL_MS 1000
#define BACK_CHECK_MS  100

/* The faults a --windows window turns on. */
#define WIN_LOSS  1 /* --drop-* and --dup-* */
#define WIN_DELAY 2 /* --delay-p and --delay-ms */

/* One direction: from → to. The counters are written by its thread only
 * (the delayed ones by nng's callbacks, hence atomic) and read at exit. */
typedef struct dir {
    proxy *p;
    const char *name;
    nng_socket from, to;
    const dir_cfg *cfg;
    uint64_t rng;
    pthread_t thread;
    _Atomic uint64_t in, dropped, duplicated, delayed, sent;
} dir;

/* A message waiting out its delay. */
typedef struct later {
    dir *d;
    nng_aio *aio;
    nng_msg *msg;
} later;

/* Whether the faults of bit act now: always without --windows. */
static bool
faults_on(proxy *p, int bit)
{
    return !p->windows || (atomic_load(&p->window) & bit) != 0;
}

/* splitmix64: small, seedable, good enough to decide drops. */
static uint64_t
rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double
rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static void
send_now(dir *d, nng_msg *m)
{
    /* Non-blocking: a full pipe is one more lost message. */
    if (nng_sendmsg(d->to, m, NNG_FLAG_NONBLOCK) != 0) {
        nng_msg_free(m);
        return;
    }
    atomic_fetch_add(&d->sent, 1);
}

static void
later_cb(void *arg)
{
    later *l = arg;

    if (nng_aio_result(l->aio) == 0) {
        send_now(l->d, l->msg);
    } else {
        nng_msg_free(l->msg);
    }
    atomic_fetch_sub(&l->d->p->delayed, 1);
    /* nng_aio_free would wait for this very callback: reap elsewhere. */
    nng_aio_reap(l->aio);
    free(l);
}

/* Sends m now or after a delay, as the dice say. */
static void
forward(dir *d, nng_msg *m)
{
    proxy *p = d->p;
    later *l;

    if (p->delay_ms > 0 && rng_unit(&d->rng) < p->delay_p &&
        faults_on(p, WIN_DELAY) && atomic_load(&p->delayed) < p->max_delayed &&
        (l = calloc(1, sizeof(*l))) != NULL) {
        int ms = 1 + (int)(rng_next(&d->rng) % (uint64_t)p->delay_ms);
        l->d = d;
        l->msg = m;
        if (nng_aio_alloc(&l->aio, later_cb, l) == 0) {
            atomic_fetch_add(&p->delayed, 1);
            atomic_fetch_add(&d->delayed, 1);
            nng_sleep_aio(ms, l->aio);
            return;
        }
        free(l);
    }
    send_now(d, m);
}

static void *
dir_main(void *arg)
{
    dir *d = arg;

    for (;;) {
        nng_msg *m, *copy;
        bool drop, dup;

        if (nng_recvmsg(d->from, &m, 0) != 0) {
            return NULL; /* closed */
        }
        atomic_fetch_add(&d->in, 1);
        /* Both dice are always rolled: one message, two draws, whatever
         * the outcome, so the sequence stays aligned with the traffic. */
        drop = rng_unit(&d->rng) < d->cfg->drop;
        dup = rng_unit(&d->rng) < d->cfg->dup;
        if (!faults_on(d->p, WIN_LOSS)) {
            drop = dup = false;
        }
        if (drop) {
            atomic_fetch_add(&d->dropped, 1);
            nng_msg_free(m);
            continue;
        }
        if (dup && nng_msg_dup(&copy, m) == 0) {
            atomic_fetch_add(&d->duplicated, 1);
            forward(d, copy);
        }
        forward(d, m);
    }
}

/* nng's thread, for each connection of the back socket that comes or
 * goes: keep the count. Only atomics. */
static void
back_pipe_event(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    proxy *p = arg;

    (void)pipe;
    atomic_fetch_add(&p->back_pipes, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

/* Dials --back anew (non-blocking) in place of *dl, which is closed. */
static int
back_dial(proxy *p, nng_dialer *dl)
{
    if (nng_dialer_id(*dl) > 0) {
        nng_dialer_close(*dl);
    }
    return nng_dial(p->bs, p->back, dl, NNG_FLAG_NONBLOCK);
}

/* The back dialer's watch (see the file comment): runs until stop is set,
 * every BACK_CHECK_MS, bounded by the proxy's own life. */
typedef struct back_watch {
    proxy *p;
    nng_dialer dl;
    _Atomic bool stop;
    pthread_t thread;
} back_watch;

static void *
back_watch_main(void *arg)
{
    back_watch *w = arg;
    int idle_ms = 0;

    while (!atomic_load(&w->stop)) {
        nng_msleep(BACK_CHECK_MS);
        if (atomic_load(&w->p->back_pipes) > 0) {
            idle_ms = 0;
            continue;
        }
        if ((idle_ms += BACK_CHECK_MS) >= BACK_REDIAL_MS) {
            idle_ms = 0;
            if (back_dial(w->p, &w->dl) == 0) {
                atomic_fetch_add(&w->p->redials, 1);
            }
        }
    }
    return NULL;
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: once_proxy --front URL --back URL [options]\n"
            "\n"
            "A lossy network between libonce clients and onced: listens on\n"
            "--front, dials --back, and forwards requests and replies,\n"
            "dropping, duplicating and delaying them at random — seeded and\n"
            "reproducible. Runs until SIGINT or SIGTERM, then prints what it\n"
            "did on stderr.\n"
            "\n"
            "  --front URL        where clients connect (listened on)\n"
            "  --back URL         onced's address (dialed; redialed when it\n"
            "                     restarts)\n"
            "  --seed N           PRNG seed (default 1)\n"
            "  --drop-req P       drop a request with probability P (0)\n"
            "  --drop-rep P       drop a reply with probability P (0)\n"
            "  --dup-req P        send a request twice with probability P (0)\n"
            "  --dup-rep P        send a reply twice with probability P (0)\n"
            "  --delay-p P        delay a message with probability P (0)\n"
            "  --delay-ms MS      delays are uniform in 1..MS (default 20)\n"
            "  --max-delayed N    messages delayed at once, at most (1024);\n"
            "                     past it a message goes undelayed\n"
            "  --windows          faults only inside windows opened by\n"
            "                     SIGUSR1 (drops, duplicates) or SIGUSR2\n"
            "                     (delays) and closed by SIGHUP, which\n"
            "                     prints the window's counts\n"
            "  --quiet            no report at exit\n"
            "  -h, --help         this text\n"
            "\n"
            "Example: onced on ipc:///tmp/once.ipc, clients on\n"
            "ipc:///tmp/lossy.ipc, one reply in five lost:\n"
            "  once_proxy --front ipc:///tmp/lossy.ipc \\\n"
            "             --back ipc:///tmp/once.ipc --drop-rep 0.2\n");
}

static int
parse_p(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);

    if (*s == '\0' || *end != '\0' || !(v >= 0.0 && v <= 1.0)) {
        fprintf(stderr, "once_proxy: \"%s\" is not a probability in [0,1]\n",
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_n(const char *s, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < 0 || v > max) {
        fprintf(stderr, "once_proxy: \"%s\" is not a number in 0..%ld\n", s,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_args(proxy *p, int argc, char **argv)
{
    static const struct option opts[] = {
        {"front", required_argument, NULL, 'f'},
        {"back", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},
        {"drop-req", required_argument, NULL, 'q'},
        {"drop-rep", required_argument, NULL, 'r'},
        {"dup-req", required_argument, NULL, 'Q'},
        {"dup-rep", required_argument, NULL, 'R'},
        {"delay-p", required_argument, NULL, 'p'},
        {"delay-ms", required_argument, NULL, 'd'},
        {"max-delayed", required_argument, NULL, 'm'},
        {"quiet", no_argument, NULL, 'x'},
        {"windows", no_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    long n;

    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int rv = 0;
        switch (ch) {
        case 'f':
            p->front = optarg;
            break;
        case 'b':
            p->back = optarg;
            break;
        case 's':
            errno = 0;
            p->seed = strtoull(optarg, NULL, 10);
            rv = errno != 0 ? -1 : 0;
            break;
        case 'q':
            rv = parse_p(optarg, &p->req.drop);
            break;
        case 'r':
            rv = parse_p(optarg, &p->rep.drop);
            break;
        case 'Q':
            rv = parse_p(optarg, &p->req.dup);
            break;
        case 'R':
            rv = parse_p(optarg, &p->rep.dup);
            break;
        case 'p':
            rv = parse_p(optarg, &p->delay_p);
            break;
        case 'd':
            rv = parse_n(optarg, 60000, &n);
            p->delay_ms = (int)n;
            break;
        case 'm':
            rv = parse_n(optarg, 1000000, &n);
            p->max_delayed = (int)n;
            break;
        case 'x':
            p->quiet = true;
            break;
        case 'w':
            p->windows = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (rv != 0) {
            return -1;
        }
    }
    if (optind != argc || p->front == NULL || p->back == NULL) {
        fprintf(stderr, "once_proxy: --front and --back are required "
                        "(once_proxy --help)\n");
        return -1;
    }
    return 0;
}

static void
report(const dir *d)
{
    fprintf(stderr,
            "once_proxy: %-8s in %" PRIu64 " dropped %" PRIu64
            " duplicated %" PRIu64 " delayed %" PRIu64 " sent %" PRIu64 "\n",
            d->name, atomic_load(&d->in), atomic_load(&d->dropped),
            atomic_load(&d->duplicated), atomic_load(&d->delayed),
            atomic_load(&d->sent));
}

/* A direction's counts at a window's start. */
typedef struct dir_mark {
    uint64_t in, dropped, duplicated, delayed;
} dir_mark;

static dir_mark
dir_mark_take(const dir *d)
{
    return (dir_mark){atomic_load(&d->in), atomic_load(&d->dropped),
                      atomic_load(&d->duplicated), atomic_load(&d->delayed)};
}

/* One line for what d did since m, in a window named what. */
static void
window_report(const char *what, const dir *d, const dir_mark *m)
{
    fprintf(stderr,
            "once_proxy: window %s %s in %" PRIu64 " dropped %" PRIu64
            " duplicated %" PRIu64 " delayed %" PRIu64 "\n",
            what, d->name, atomic_load(&d->in) - m->in,
            atomic_load(&d->dropped) - m->dropped,
            atomic_load(&d->duplicated) - m->duplicated,
            atomic_load(&d->delayed) - m->delayed);
}

/* Waits for signals until SIGINT or SIGTERM; with --windows, SIGUSR1 and
 * SIGUSR2 open a window (loss, delay) and SIGHUP closes it, printing what
 * it did (one line per direction, then "window end"). */
static void
signal_loop(proxy *p, const sigset_t *set, const dir *dq, const dir *dr)
{
    dir_mark mq = {0}, mr = {0};
    int sig;

    for (;;) {
        if (sigwait(set, &sig) != 0 || sig == SIGINT || sig == SIGTERM) {
            return;
        }
        if (!p->windows) {
            continue;
        }
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            mq = dir_mark_take(dq);
            mr = dir_mark_take(dr);
            atomic_store(&p->window, sig == SIGUSR1 ? WIN_LOSS : WIN_DELAY);
        } else if (sig == SIGHUP) {
            int w = atomic_exchange(&p->window, 0);
            const char *what = w == WIN_LOSS    ? "loss"
                               : w == WIN_DELAY ? "delay"
                                                : "none";
            window_report(what, dq, &mq);
            window_report(what, dr, &mr);
            fprintf(stderr, "once_proxy: window end\n");
        }
    }
}

int
main(int argc, char **argv)
{
    proxy p;
    dir dq, dr;
    back_watch bw;
    sigset_t set;
    int rv;

    memset(&p, 0, sizeof(p));
    p.seed = 1;
    p.delay_ms = 20;
    p.max_delayed = 1024;
    if (parse_args(&p, argc, argv) != 0) {
        return 2;
    }
    /* Signals are taken by sigwait below, not by any thread. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if ((rv = nng_rep0_open_raw(&p.fs)) != 0 ||
        (rv = nng_req0_open_raw(&p.bs)) != 0) {
        fprintf(stderr, "once_proxy: cannot open sockets: %s\n",
                nng_strerror(rv));
        return 1;
    }
    nng_socket_set_size(p.fs, NNG_OPT_RECVMAXSZ, 0);
    nng_socket_set_size(p.bs, NNG_OPT_RECVMAXSZ, 0);
    nng_socket_set_ms(p.bs, NNG_OPT_RECONNMINT, 10);
    nng_socket_set_ms(p.bs, NNG_OPT_RECONNMAXT, 100);
    if ((rv = nng_listen(p.fs, p.front, NULL, 0)) != 0) {
        fprintf(stderr, "once_proxy: cannot listen on %s: %s\n", p.front,
                nng_strerror(rv));
        return 1;
    }
    memset(&bw, 0, sizeof(bw));
    bw.p = &p;
    if ((rv = nng_pipe_notify(p.bs, NNG_PIPE_EV_ADD_POST, back_pipe_event,
                              &p)) != 0 ||
        (rv = nng_pipe_notify(p.bs, NNG_PIPE_EV_REM_POST, back_pipe_event,
                              &p)) != 0 ||
        (rv = back_dial(&p, &bw.dl)) != 0) {
        fprintf(stderr, "once_proxy: cannot dial %s: %s\n", p.back,
                nng_strerror(rv));
        return 1;
    }

    memset(&dq, 0, sizeof(dq));
    memset(&dr, 0, sizeof(dr));
    dq = (dir){.p = &p,
               .name = "requests",
               .from = p.fs,
               .to = p.bs,
               .cfg = &p.req,
               .rng = p.seed * 2 + 1};
    dr = (dir){.p = &p,
               .name = "replies",
               .from = p.bs,
               .to = p.fs,
               .cfg = &p.rep,
               .rng = p.seed * 2 + 2};
    if (pthread_create(&dq.thread, NULL, dir_main, &dq) != 0 ||
        pthread_create(&dr.thread, NULL, dir_main, &dr) != 0 ||
        pthread_create(&bw.thread, NULL, back_watch_main, &bw) != 0) {
        fprintf(stderr, "once_proxy: cannot start threads\n");
        return 1;
    }
    if (!p.quiet) {
        fprintf(stderr,
                "once_proxy: %s -> %s seed %" PRIu64
                " drop req %.3f rep %.3f dup req %.3f rep %.3f delay p %.3f "
                "up to %d ms\n",
                p.front, p.back, p.seed, p.req.drop, p.rep.drop, p.req.dup,
                p.rep.dup, p.delay_p, p.delay_ms);
    }
    signal_loop(&p, &set, &dq, &dr);
    atomic_store(&bw.stop, true);
    pthread_join(bw.thread, NULL);
    nng_close(p.fs);
    nng_close(p.bs);
    pthread_join(dq.thread, NULL);
    pthread_join(dr.thread, NULL);
    if (!p.quiet) {
        report(&dq);
        report(&dr);
        fprintf(stderr, "once_proxy: back dialer replaced %" PRIu64 " times\n",
                atomic_load(&p.redials));
    }
    return 0;
}
