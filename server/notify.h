/*
 * notify.h — telling a service manager how onced is doing (sd_notify).
 *
 * Owns: the READY/RELOADING/STOPPING/STATUS messages and the watchdog
 * thread. Under systemd with Type=notify, NOTIFY_SOCKET is set and these
 * reach it; anywhere else (no NOTIFY_SOCKET, or onced built without
 * libsystemd) every call is a no-op, so onced runs the same without
 * systemd.
 * Invariant: WATCHDOG=1 is sent only when the executor has run a task
 * posted since the last ping, so a wedged executor stops the pings and
 * systemd restarts onced.
 * Never: blocks the executor (the ping is sent from its own thread).
 */
#ifndef SERVER_NOTIFY_H
#define SERVER_NOTIFY_H

#include "server/server.h"

/* READY=1 with a STATUS line: call once the store is open and every
 * listener is up. */
void notify_ready(const server *srv);

/* A replica that follows (repl_config.on_follow): READY=1 with status
 * as its STATUS line when status is not NULL (its state changed); and,
 * when the service manager asks for a watchdog, WATCHDOG=1 at most every
 * half interval — the follower's loop calls this every turn, so a wedged
 * loop stops the pings. Main thread only (repl_follow's). */
void notify_following(void *arg, const char *status);

/* RELOADING=1 before a SIGHUP reload, then notify_ready again after. */
void notify_reloading(void);

/* STOPPING=1: the shutdown has begun. */
void notify_stopping(void);

/* Starts the watchdog thread when the service manager asks for one
 * (WATCHDOG_USEC; sd_watchdog_enabled): it pings at half that interval.
 * 0 when started or not wanted, else an errno code. */
int notify_watchdog_start(server *srv);

/* Stops and joins the watchdog thread, if any; before server_close. */
void notify_watchdog_stop(void);

#endif /* SERVER_NOTIFY_H */
