/*
 * log.h — one-line log messages on stderr: a UTC timestamp, the level,
 * the text; or, after log_set_json(true) (--log-format json), one JSON
 * object a line: {"ts":"…Z","level":"info","msg":"…"}. Thread-safe (one
 * fprintf per line; the format is an atomic flag). Never used for data.
 */
#ifndef BASE_LOG_H
#define BASE_LOG_H

#include <stdbool.h>

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Switches between text (false, the default) and JSON lines; any thread,
 * any time (SIGHUP reloads it). */
void log_set_json(bool json);

#endif /* BASE_LOG_H */
