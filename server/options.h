/*
 * options.h — onced's options: one table, everything else derived.
 *
 * Owns: the table of onced's options (options.c), one row per option:
 * long name, argument kind, default, bounds, whether SIGHUP applies it,
 * its lines in --help, and where it lands in onced_options (an offset or
 * a setter). From that table come the getopt_long table (so the
 * configuration file's keys, config_file.h), argv parsing with its
 * messages and exit statuses, the defaults, `onced --help`, the set of
 * keys a SIGHUP applies, and the dump that tests/test_options.sh checks
 * docs/man/onced.8 against. An option is added by adding its row.
 * Invariant: every option onced accepts is a row; no option is spelled
 * outside the table except where options that go together are checked
 * (options_parse's last step).
 * Never: opens files, sockets or the store (the --etcd-* files are only
 * checked readable).
 */
#ifndef SERVER_OPTIONS_H
#define SERVER_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "repl/replica.h"
#include "server/server.h"

/* Everything onced's options set. */
typedef struct onced_options {
    server_config srv;
    repl_config repl;        /* endpoints NULL: not a replica */
    bool json;               /* --log-format json */
    const char *metrics_url; /* --metrics-listen, or NULL */
    const char *http_url;    /* --http-listen, or NULL */
} onced_options;

/* options_parse's result when onced should go on; anything else is the
 * exit status (0 after --help or --version, 2 for a bad option). */
#define OPTIONS_GO_ON (-1)

/* Parses argv (config_file.h's merged vector) into *out, whose strings
 * then point into argv. Messages go to stderr. */
int options_parse(int argc, char **argv, onced_options *out);

/* The getopt_long table built from the rows (for config_file.h). Main
 * thread only; lives as long as the process. */
const struct option *options_getopt(void);

/* Whether the long option name may be a key of the configuration file
 * (all but config, help and version). */
bool options_file_key(const char *name);

/* Whether a SIGHUP puts a change of the long option name in force. */
bool options_reloadable(const char *name);

/* `onced --help`. */
void options_usage(FILE *f);

/* The table, one row a line: name, argument, kind, default as --help
 * writes it ("-" for none), "reload" or "restart", "key" or "flag-only"
 * (whether the configuration file may set it; tab-separated); for
 * tests/test_options.sh. */
void options_dump(FILE *f);

#endif /* SERVER_OPTIONS_H */
