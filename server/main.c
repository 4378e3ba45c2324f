/*
 * main.c — onced: options, signals, start-up and clean shutdown.
 *
 * SIGINT/SIGTERM: stop receiving, execute what was received, wait for every
 * commit to be synced, close LevelDB, exit 0. Nothing is half-written: a
 * call's effect and record are one LevelDB batch.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

#define DEFAULT_DATA "./data"
#define DEFAULT_IPC  "ipc:///tmp/once.ipc"
#define DEFAULT_TCP  "tcp://127.0.0.1:7400"

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: onced [options]\n"
            "\n"
            "The once server: exactly-once RPCs over nng, with completion\n"
            "records committed to LevelDB in the same synced batch as the\n"
            "effect.\n"
            "\n"
            "options:\n"
            "  --data DIR        LevelDB folder (default %s; created if "
            "missing)\n"
            "  --listen URL      ipc://PATH, tcp://HOST:PORT; repeatable\n"
            "                    (default %s and %s)\n"
            "  --contexts N      requests in flight (default 256)\n"
            "  --recv-max BYTES  largest request accepted (default 1048576);\n"
            "                    larger ones are dropped unread\n"
            "  --lease-ttl MS    default lease TTL in milliseconds (default "
            "30000)\n"
            "  -h, --help        this text\n"
            "\n"
            "Stop with SIGINT or SIGTERM: received calls finish and are "
            "synced.\n",
            DEFAULT_DATA, DEFAULT_IPC, DEFAULT_TCP);
}

static int
parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi,
          uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo ||
        v > hi) {
        fprintf(stderr,
                "onced: %s wants a whole number from %llu to %llu, got "
                "\"%s\"\n",
                opt, (unsigned long long)lo, (unsigned long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"contexts", required_argument, NULL, 'c'},
        {"recv-max", required_argument, NULL, 'r'},
        {"lease-ttl", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    server_config cfg;
    server *srv;
    sigset_t set;
    uint64_t v;
    int sig, ch, rv;

    memset(&cfg, 0, sizeof(cfg));
    cfg.data_dir = DEFAULT_DATA;
    cfg.contexts = 256;
    cfg.recv_max = 1u << 20;
    cfg.lease_ttl_ms = 30000;

    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            cfg.data_dir = optarg;
            break;
        case 'l':
            if (cfg.nlisten == SERVER_LISTEN_MAX) {
                fprintf(stderr, "onced: at most %d --listen addresses\n",
                        SERVER_LISTEN_MAX);
                return 2;
            }
            cfg.listen[cfg.nlisten++] = optarg;
            break;
        case 'c':
            if (parse_u64("--contexts", optarg, 1, 65536, &v) != 0) {
                return 2;
            }
            cfg.contexts = (size_t)v;
            break;
        case 'r':
            if (parse_u64("--recv-max", optarg, 1024, 64u << 20, &v) != 0) {
                return 2;
            }
            cfg.recv_max = (size_t)v;
            break;
        case 't':
            if (parse_u64("--lease-ttl", optarg, 100, 86400000, &v) != 0) {
                return 2;
            }
            cfg.lease_ttl_ms = v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "onced: unexpected argument \"%s\" (see --help)\n",
                argv[optind]);
        return 2;
    }
    if (cfg.nlisten == 0) {
        cfg.listen[cfg.nlisten++] = DEFAULT_IPC;
        cfg.listen[cfg.nlisten++] = DEFAULT_TCP;
    }

    /* Signals are taken by sigwait below, never by a handler: block them
     * before any thread starts so every thread inherits the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if ((rv = server_open(&srv, &cfg)) != 0) {
        log_error("not started");
        return 1;
    }
    for (size_t i = 0; i < cfg.nlisten; i++) {
        log_info("listening on %s", cfg.listen[i]);
    }
    log_info("ready (pid %d)", (int)getpid());

    sigwait(&set, &sig);
    log_info("%s: stopping; received calls finish and are synced",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    server_close(srv);
    log_info("stopped cleanly");
    return 0;
}
