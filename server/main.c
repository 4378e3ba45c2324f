/*
 * main.c — onced: signals, start-up and clean shutdown.
 *
 * SIGINT/SIGTERM: stop receiving, execute what was received, wait for every
 * commit to be synced and for a running compaction (Admin.Compact) to end,
 * close LevelDB, exit 0. Nothing is half-written: a call's effect and
 * record are one LevelDB batch. SIGHUP: re-read
 * <data>/principals and <data>/policy (auth.h; onced also notices changes
 * by itself within AUTH_RECHECK_MS) and the --config file, applying what
 * can change while running (the rows marked reloadable in options.c) and
 * logging the rest as waiting for a restart.
 *
 * Options live in one table, server/options.c: its rows give parsing,
 * defaults, --help, the configuration file's keys (config_file.h takes the
 * getopt table built from them) and what SIGHUP applies, so a new option
 * is one row there and nothing here. Under systemd (Type=notify) notify.h
 * says READY once the store is open and the listeners are up, and
 * STOPPING on shutdown. --metrics-listen: the Prometheus endpoint
 * (metrics.h), started after the server and stopped before it;
 * --http-listen: the JSON API (http_api.h) the same way, with /metrics
 * on its URL too when --metrics-listen names none.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>

#include "server/config_file.h"
#include "base/log.h"
#include "server/http_front.h"
#include "server/notify.h"
#include "server/stop_watch.h"
#include "server/options.h"
#include "repl/replica.h"
#include "server/server.h"
#include "server/test_seams.h" /* no-op macros but in onced_test */

static void
reload_changed(const char *name, void *arg)
{
    (void)arg;
    if (options_reloadable(name)) {
        log_info("SIGHUP: %s changed", name);
        return;
    }
    log_warn("SIGHUP: %s changed; it takes effect at the next start", name);
}

/* Re-reads the configuration file; *cur is the vector in force (replaced
 * on success; boot, whose strings the server's cfg points into, is never
 * freed). */
static void
reload_config(server *srv, int argc, char **argv, config_args *boot,
              config_args *cur)
{
    config_args next;
    onced_options o; /* only the reloadable part is put in force */
    char err[512];

    if (cur->file == NULL) {
        return;
    }
    if (config_args_build(options_getopt(), options_file_key, argc, argv, &next,
                          err, sizeof(err)) != 0) {
        log_error("SIGHUP: %s; the configuration in force stays", err);
        return;
    }
    if (options_parse(next.argc, next.argv, &o) != OPTIONS_GO_ON) {
        log_error("SIGHUP: %s has a bad value (above); the configuration in "
                  "force stays",
                  next.file);
        config_args_free(&next);
        return;
    }
    if (config_args_diff(options_getopt(), cur, &next, reload_changed, NULL) ==
        0) {
        log_info("SIGHUP: %s unchanged", next.file);
    }
    log_set_json(o.json);
    server_set_limits(srv, &o.srv);
    if (cur->argv != boot->argv) {
        config_args_free(cur);
    }
    *cur = next;
}

/* The stop after SIGINT or SIGTERM, each step named to the stop watch
 * (stop_watch.h) in the one order that keeps every received call. */
static void
stop_all(server *srv, repl *rp, http_front *fx, int sig)
{
    notify_stopping();
    log_info("%s: stopping; received calls finish and are synced",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    stop_watch_start();
    stop_watch_step("the systemd watchdog thread");
    notify_watchdog_stop();
    stop_watch_step("the HTTP calls in flight and the metrics publisher");
    http_front_stop(fx); /* before the executor stops: calls in flight */
    server_close(srv);
    stop_watch_step("the replication log's close");
    repl_close(rp); /* after the last append: another replica takes over */
    http_front_free(fx);
    stop_watch_end();
}

int
main(int argc, char **argv)
{
    static config_args boot, cur; /* live as long as the server */
    onced_options opt;
    server_config cfg;
    repl_config rc;
    repl *rp = NULL;
    server *srv;
    const char *metrics_url;
    http_front *fx = NULL;
    sigset_t set;
    char err[512];
    int sig, rv;

    if (config_args_build(options_getopt(), options_file_key, argc, argv, &boot,
                          err, sizeof(err)) != 0) {
        fprintf(stderr, "onced: %s\n", err);
        return 2;
    }
    if ((rv = options_parse(boot.argc, boot.argv, &opt)) != OPTIONS_GO_ON) {
        config_args_free(&boot);
        return rv;
    }
    cfg = opt.srv;
    rc = opt.repl;
    metrics_url = opt.metrics_url;
    if (opt.http_url == NULL && metrics_url == NULL) {
        cfg.http_conn_max = 0; /* no HTTP listener: no room kept for one */
    }
    cur = boot;
    log_set_json(opt.json);
    if (boot.file != NULL) {
        log_info("configuration file %s", boot.file);
    }

    /* Signals are taken by sigwait below, never by a handler: block them
     * before any thread starts so every thread inherits the mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    TEST_SEAMS_APPLY();
    if (rc.endpoints != NULL) {
        /* A replica: follow the log until this one leads (replica.h). */
        if (rc.advertise == NULL) {
            rc.advertise = cfg.listen[0];
        }
        rc.data_dir = cfg.data_dir;
        rc.tls_cert = cfg.tls_cert;
        rc.tls_key = cfg.tls_key;
        for (size_t i = 0; i < cfg.nlisten && i < REPL_LISTEN_MAX; i++) {
            rc.listen[rc.nlisten++] = cfg.listen[i];
        }
        rc.timeout_ms = rc.ttl_s * 1000 / 4 < 1000 ? rc.ttl_s * 1000 / 4 : 1000;
        rc.argv = argv;
        rc.on_follow = notify_following;
        if ((rv = repl_follow(&rp, &rc, &set, &sig)) == ECANCELED) {
            notify_stopping();
            log_info("%s while following: stopped",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
            config_args_free(&boot);
            return 0;
        }
        if (rv != 0) {
            log_error("not started");
            config_args_free(&boot);
            return 1;
        }
        cfg.append_fn = repl_append;
        cfg.append_arg = rp;
    }
    if ((rv = server_open(&srv, &cfg)) != 0) {
        log_error("not started");
        repl_close(rp);
        return 1;
    }
    if (http_front_open(&fx, opt.http_url, metrics_url, srv) != 0) {
        server_close(srv);
        log_error("not started");
        return 1;
    }
    for (size_t i = 0; i < cfg.nlisten; i++) {
        log_info("listening on %s", cfg.listen[i]);
    }
    if ((rv = notify_watchdog_start(srv)) != 0) {
        log_warn("cannot start the watchdog thread (error %d)", rv);
    }
    notify_ready(srv);
    log_info("ready (pid %d)", (int)getpid());

    for (;;) {
        sigwait(&set, &sig);
        if (sig != SIGHUP) {
            break;
        }
        notify_reloading();
        log_info("SIGHUP: re-reading the principals, the policy and the "
                 "configuration file");
        server_reload_auth(srv);
        reload_config(srv, argc, argv, &boot, &cur);
        notify_ready(srv);
    }
    stop_all(srv, rp, fx, sig);
    log_info("stopped cleanly");
    if (cur.argv != boot.argv) {
        config_args_free(&cur);
    }
    config_args_free(&boot);
    return 0;
}
