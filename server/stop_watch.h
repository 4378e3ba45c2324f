/*
 * stop_watch.h — says what a slow stop is waiting for.
 *
 * A stop that takes seconds (SIGTERM answered by nothing for a while) is
 * either a wait that should end soon or a hang; the log says which step
 * it is in, so an operator (or a test that gave up on onced) can tell.
 *
 * Owns: the stop's current step (a static string) and the thread that
 * logs it every STOP_WATCH_EVERY_MS while the stop lasts.
 * Invariant: one stop per process; the steps are set by the thread that
 * runs the stop, in order, and read by the watch thread.
 * Never: changes what the stop does or how long it waits.
 */
#ifndef SERVER_STOP_WATCH_H
#define SERVER_STOP_WATCH_H

#define STOP_WATCH_EVERY_MS 2000

/* Starts the watch (the stop began). Without a thread, steps are still
 * recorded and nothing is logged. */
void stop_watch_start(void);

/* The step the stop is in now: a static string, read as "waiting for
 * <step>". NULL: ignored. */
void stop_watch_step(const char *step);

/* Ends the watch (the stop is done), joining its thread. */
void stop_watch_end(void);

#endif /* SERVER_STOP_WATCH_H */
