/*
 * cli.h — what oncectl's files share: the global options (struct cli and
 * their table, globals.h), the exit statuses, error and usage reporting, option
 * and number parsing, opening a client. Never installed.
 *
 * Owns: declarations only; the bodies are in cli.c.
 * Invariant: the bottom of oncectl — cli.c calls no command and main.c is
 * called by nothing.
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/globals.h"
#include "once/client.h"

enum {
    ONCECTL_EXIT_OK = 0,
    ONCECTL_EXIT_CALL = 1,
    ONCECTL_EXIT_USAGE = 2,
    ONCECTL_EXIT_UNKNOWN = 3,
};

#define GLOBAL_HINT                                                            \
    "global options go before the command, e.g. oncectl --json counter get x"

/* A usage error: text on stderr (with a hint and a pointer to --help) and,
 * with --json, the same as an INVALID_ARGUMENT/USAGE object on stdout.
 * Returns ONCECTL_EXIT_USAGE. */
int usage_error(const cli *g, const char *hint, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Reports a failed call (with --json as {"code","reason","message"[,
 * "rpc_id"]}); id is NULL when no rpc id is involved. Returns the exit
 * status. */
int report_error(const cli *g, const once_status *st, const once_rpc_id *id);

/* -h or --help. */
bool is_help(const char *a);

/* A global option written after the command. */
bool is_global_opt(const char *a);

/* "--name VALUE" or "--name=VALUE": 1 and *val, 0 another argument, -1
 * the value is missing. */
int opt_value(int argc, char **argv, int *i, const char *name,
              const char **val);

/* A whole argument as a signed decimal: 0, EINVAL or ERANGE. */
int parse_i64(const char *s, int64_t *v);

/* The exit status for a call's status: ONCECTL_EXIT_OK, _UNKNOWN for an
 * unknown outcome (once_status_outcome_unknown), _CALL otherwise. */
int exit_for(const once_status *st);

/* The arguments every command takes the same way: -h/--help prints usage
 * and ends the command with ONCECTL_EXIT_OK; a global option written after
 * the command is a usage error. Returns true when a was one of them, with
 * the exit status in *ex. */
bool common_arg(const cli *g, const char *a, const char *usage, int *ex);

/* "CLIENT:SEQ", both non-zero: 0 or EINVAL. */
int parse_rpc_id(const char *s, once_rpc_id *id);

/* Opens a client from the global options (no_lease as in once_options). */
int open_client(const cli *g, bool no_lease, once_client **cp, once_status *st);

/* The end of a command's call: closes c (NULL is fine). Returns true when
 * the call succeeded (rv is ONCE_OK: print its result); else reports st as
 * report_error does (no rpc id) and returns false with the exit status in
 * *ex. */
bool call_end(const cli *g, once_client *c, int rv, const once_status *st,
              int *ex);

/* The end of a mutating one-shot call (counter incr, kv put|del|txn):
 * closes c leaving its lease alive for its TTL, so the printed rpc id can
 * still be retried after oncectl exits; until (len bytes) receives the UTC
 * time it can be retried until (RFC 3339), or "" for a retry of an
 * explicit id. When rv is not ONCE_OK, reports st with the id when it may
 * have reached the server, and returns false with the exit status in *ex.
 */
bool call_end_keep_lease(const cli *g, once_client *c, int rv,
                         const once_status *st, bool explicit_id,
                         const once_rpc_id *id, char *until, size_t len,
                         int *ex);

/* One subcommand of a command family. */
typedef struct cli_sub {
    const char *name;
    int (*run)(const cli *g, int argc, char **argv); /* argv[0]: its first
                                                        argument */
} cli_sub;

/* `oncectl FAMILY SUBCOMMAND ...` with argv[0] the subcommand: runs the
 * one of the n subs it names; -h/--help prints usage; none or another is
 * a usage error ("FAMILY needs a subcommand", "unknown FAMILY subcommand
 * 'X'") with hint. Returns the exit status. */
int cli_dispatch(const cli *g, const char *family, const cli_sub *subs,
                 size_t n, const char *usage, const char *hint, int argc,
                 char **argv);

#endif /* CLI_CLI_H */
