/*
 * globals.h — oncectl's global options (the ones before the command): one
 * table.
 *
 * Owns: struct cli (what the global options set) and GLOBAL_OPTS, a row
 * per global option (name, argument, kind, where
 * it lands in struct cli, the hint of its usage error, its --help lines),
 * and what is read off it: finding an argument's row, the option lines of
 * `oncectl --help`, the list the unknown-option hint gives. main.c parses
 * by the rows; is_global_opt (cli.h) asks globals_find; tests/
 * test_options.sh holds docs/man/oncectl.1 to the table.
 * Invariant: a global option is a row; nothing else lists them.
 * Never: reports errors or calls anything above it (cli.c calls in here,
 * not the other way round).
 */
#ifndef CLI_GLOBALS_H
#define CLI_GLOBALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* onced --dev (make run) writes its operator key here; used when no key
 * is given otherwise. */
#define ONCECTL_DEV_KEY "./data/dev.key"

/* The global options, as GLOBAL_OPTS set them (and main.c's defaults). */
typedef struct cli {
    const char *server;
    const char *server_from; /* the configuration file --server's default
                                came from, or NULL */
    bool json;
    uint64_t timeout_ms; /* 0: the library's default deadline */
    const char *principal;
    const char *key_file; /* --key-file, $ONCE_KEY_FILE, ./data/dev.key */
    const char *tls_ca;   /* --tls-ca: CA of tls+tcp:// servers */
    const char *tls_server_name; /* --tls-server-name: the name their
                                    certificates must carry */
} cli;

typedef enum global_kind {
    GLOBAL_FLAG,     /* no argument: the bool at off becomes true */
    GLOBAL_STRING,   /* a non-empty value, kept as given */
    GLOBAL_DURATION, /* a positive duration (ms) that fits 32 bits */
    GLOBAL_VERSION,
    GLOBAL_HELP, /* also -h */
} global_kind;

typedef struct global_opt {
    const char *name; /* "--server" */
    const char *arg;  /* its value's name ("URL"); NULL: takes none */
    global_kind kind;
    size_t off;       /* in struct cli (GLOBAL_FLAG/_STRING/_DURATION) */
    const char *hint; /* the hint beside its usage error, or NULL */
    const char *help; /* lines after the first are indented */
} global_opt;

extern const global_opt GLOBAL_OPTS[];
extern const size_t GLOBAL_NOPTS;

/* The row of a ("--name" or "--name=VALUE"), or NULL. */
const global_opt *globals_find(const char *a);

/* The option lines of `oncectl --help`. */
void globals_usage(FILE *f);

/* "--server, --json, ..." (the rows that set something) into buf. */
void globals_list(char *buf, size_t len);

#endif /* CLI_GLOBALS_H */
