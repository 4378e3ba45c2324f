/*
 * conf_lines.h — the line syntax of onced's configuration file.
 *
 * Owns: reading a file of `key = value`, `key value` or `key` lines (blank
 * lines and `#` comments skipped, a leading `--` on the key dropped, a
 * value in double quotes unquoted) and handing each line's key and value
 * to a callback. onced's --config (server/config_file.c) and oncectl's
 * default server (cli/server_default.c) read the same file through it.
 * Invariant: a line longer than CONF_LINE_MAX, an unterminated quote or an
 * unreadable file is an error naming the file and line; nothing else is.
 * Never: knows any key; what keys mean is the caller's business.
 */
#ifndef BASE_CONF_LINES_H
#define BASE_CONF_LINES_H

#include <stddef.h>

/* Longest line of a configuration file, newline included. */
#define CONF_LINE_MAX 4096

/*
 * Called for each non-blank, non-comment line: key (never empty) and value
 * ("" when the line has none), both valid only during the call. Returns 0
 * to go on, or non-zero to stop (conf_lines_read then returns that value).
 */
typedef int (*conf_line_fn)(const char *file, int lineno, const char *key,
                            const char *value, void *arg);

/*
 * Reads file line by line and calls fn for each. Returns 0 after the last
 * line, fn's non-zero result when it stopped the walk, or -1 after writing
 * a message naming the file (and line) into err (errlen bytes).
 */
int conf_lines_read(const char *file, conf_line_fn fn, void *arg, char *err,
                    size_t errlen);

#endif /* BASE_CONF_LINES_H */
