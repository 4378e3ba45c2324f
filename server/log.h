/*
 * log.h — one-line log messages on stderr: a UTC timestamp, the level,
 * the text. Thread-safe (one fprintf per line). Never used for data.
 */
#ifndef SERVER_LOG_H
#define SERVER_LOG_H

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SERVER_LOG_H */
