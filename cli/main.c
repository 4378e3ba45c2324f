/*
 * main.c — oncectl, the command-line client of onced, for people and
 * scripts: global options and dispatch to the command files (cmds.h).
 *
 *   oncectl [--server URL] [--json] [--timeout DURATION] [--principal NAME]
 *           [--key-file FILE] [--tls-ca FILE] [--tls-server-name NAME]
 *           COMMAND ...
 *
 * Owns: parsing the global options by their table (globals.h: a new one
 * is a row there) and the top usage text; which command file runs a
 * command. Output forms (text for people; with --json exactly one
 * JSON object on stdout, success or not) are each command's, through
 * cli.c.
 * Exit status: 0 only for OK; 1 a call ended with an error code; 2 usage
 * error; 3 the outcome is unknown (UNKNOWN/OUTCOME_UNKNOWN: retry the
 * printed rpc id).
 * Never: invents an rpc id for a retry — `counter incr --rpc-id` sends
 * exactly the id given and opens no lease; without it a fresh lease and
 * seq 1 are used.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/globals.h"
#include "cli/server_default.h"
#include "base/conf_lines.h"
#include "base/duration.h"

static const char usage_head[] =
    "usage: oncectl [--server URL] [--json] [--timeout DURATION]\n"
    "               [--principal NAME] COMMAND ...\n"
    "\n"
    "Talks to onced, the exactly-once RPC server.\n"
    "\n"
    "Commands:\n"
    "  lease open [--ttl DURATION]        open a lease, print its client id\n"
    "  lease renew CLIENT_ID              renew a lease\n"
    "  lease close CLIENT_ID              end a lease now\n"
    "  lease info CLIENT_ID               state, TTL, watermark, retention\n"
    "  counter incr NAME [--by N] [--rpc-id CLIENT:SEQ]\n"
    "                                     increment a counter exactly once\n"
    "  counter get NAME                   read a counter\n"
    "  kv put KEY VALUE [--if-version N | --if-absent] [--lease]\n"
    "     [--rpc-id CLIENT:SEQ]           set a key exactly once\n"
    "  kv get KEY                         read a key: value, version\n"
    "  kv del KEY [--prefix]              delete a key (or a prefix)\n"
    "  kv range PREFIX [--limit N]        list keys under a prefix\n"
    "  kv txn --file TXN.json [--rpc-id CLIENT:SEQ]\n"
    "                                     compares, then/else ops, once\n"
    "  outbox subscribe|read|ack|topics   durable consumers of the outbox\n"
    "                                     (oncectl outbox --help)\n"
    "  grants SUBCOMMAND ...              start grants: set-placement, "
    "request,\n"
    "                                     enqueue, claim, finish, get-surface,"
    "\n"
    "                                     inputs, ... (oncectl grants --help)\n"
    "  key show                           the server's Ed25519 key for "
    "grant credentials\n"
    "  console-token [--ttl DURATION]     a token for onced's /console "
    "(operators)\n"
    "  records list [--client ID] [--limit N]\n"
    "                                     retained completion records\n"
    "  stats                              server statistics\n"
    "  admin compact [--wait]             compact onced's LevelDB now "
    "(operators)\n"
    "  admin backup DIR [--chunk-bytes N] consistent copy of the store "
    "into DIR\n"
    "  principal add|list|revoke|restore  the principals of a local data\n"
    "                                     folder (oncectl principal --help)\n"
    "  chain list|show --journal DIR      a chain journal of libonce, read\n"
    "                                     only (oncectl chain --help)\n"
    "\n"
    "Global options (before the command):\n";

/* After the global options. */
static const char usage_tail[] =
    "\n"
    "DURATION is <number><unit> with unit ms, s, m or h (200ms, 2s, 5m, 1h,\n"
    "1m30s); a bare number is milliseconds.\n"
    "\n"
    "Exit status: 0 OK; 1 the call failed (code printed); 2 usage error;\n"
    "3 outcome unknown (retry the printed rpc id with --rpc-id).\n";

/* The top usage text: the commands, the global options (globals.h). */
static void
usage(FILE *f)
{
    fputs(usage_head, f);
    globals_usage(f);
    fputs(usage_tail, f);
}

/* --json anywhere before a "--" makes usage errors JSON too, even ones
 * found before --json itself is parsed. */
static bool
wants_json(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            return true;
        }
    }
    return false;
}

static int
dispatch(const cli *g, int argc, char **argv)
{
    const char *cmd = argv[0];

    if (strcmp(cmd, "help") == 0) {
        usage(stdout);
        return ONCECTL_EXIT_OK;
    }
    if (strcmp(cmd, "stats") == 0) {
        return cmd_stats(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "admin") == 0) {
        return cmd_admin(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "principal") == 0) {
        return cmd_principal(argc - 1, argv + 1, g->json);
    }
    if (strcmp(cmd, "grants") == 0) {
        return cmd_grants(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "key") == 0) {
        return cmd_key(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "console-token") == 0) {
        return cmd_console_token(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "chain") == 0) {
        return cmd_chain(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "lease") == 0) {
        return cmd_lease(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "counter") == 0) {
        return cmd_counter(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "outbox") == 0) {
        return cmd_outbox(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "records") == 0) {
        return cmd_records(g, argc - 1, argv + 1);
    }
    if (strcmp(cmd, "kv") == 0) {
        return cmd_kv(g, argc - 1, argv + 1);
    }
    return usage_error(g,
                       "commands are: lease open|renew|close|info, counter "
                       "incr, counter get, kv put|get|del|range|txn, records "
                       "list, stats, admin compact",
                       "unknown command '%s'", cmd);
}

/* global_arg's result when oncectl goes on to the next argument. */
#define GLOBAL_GO_ON (-1)

/* argv[*i], an option before the command, by its row of GLOBAL_OPTS:
 * GLOBAL_GO_ON (*i past its value), or the exit status (--help,
 * --version, a usage error). */
static int
global_arg(cli *g, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = NULL;
    const global_opt *o = globals_find(a);
    char names[256], hint[384];
    uint64_t ms = 0;
    int m = 0;

    if (is_help(a)) {
        usage(stdout);
        return ONCECTL_EXIT_OK;
    }
    if (o != NULL && o->arg != NULL) {
        m = opt_value(argc, argv, i, o->name, &v);
    } else if (o != NULL && strcmp(a, o->name) != 0) {
        o = NULL; /* "--json=...": no such option */
    }
    if (o == NULL) {
        globals_list(names, sizeof(names));
        snprintf(hint, sizeof(hint),
                 "global options are %s; command options go after the "
                 "command",
                 names);
        return usage_error(g, hint, "unknown option '%s'", a);
    }
    switch (o->kind) {
    case GLOBAL_HELP: /* is_help above took it; here for the switch */
        usage(stdout);
        return ONCECTL_EXIT_OK;
    case GLOBAL_VERSION:
        printf("oncectl %s\n", ONCE_VERSION);
        return ONCECTL_EXIT_OK;
    case GLOBAL_FLAG:
        *(bool *)((char *)g + o->off) = true;
        return GLOBAL_GO_ON;
    case GLOBAL_DURATION:
        if (m < 0 || duration_parse(v, &ms) != 0 || ms == 0 ||
            ms > UINT32_MAX) {
            return usage_error(g, o->hint, "bad %s '%s'", o->name,
                               m < 0 ? "" : v);
        }
        *(uint64_t *)((char *)g + o->off) = ms;
        return GLOBAL_GO_ON;
    case GLOBAL_STRING:
        if (m < 0 || v[0] == '\0') {
            return usage_error(g, o->hint, "%s needs a %s", o->name, o->arg);
        }
        *(const char **)((char *)g + o->off) = v;
        if (o->off == offsetof(cli, server)) {
            g->server_from = NULL; /* not a configuration file's */
        }
        return GLOBAL_GO_ON;
    }
    return GLOBAL_GO_ON;
}

int
main(int argc, char **argv)
{
    cli g;
    char default_server[CONF_LINE_MAX];
    const char *v_env;
    int i, rv;

    memset(&g, 0, sizeof(g));
    g.json = wants_json(argc, argv);
    g.server = getenv("ONCE_SERVER");
    if (g.server == NULL || g.server[0] == '\0') {
        g.server = server_default(default_server, sizeof(default_server),
                                  &g.server_from);
    }

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            break; /* the command */
        }
        if ((rv = global_arg(&g, argc, argv, &i)) != GLOBAL_GO_ON) {
            return rv;
        }
    }
    if (i >= argc) {
        return usage_error(&g, "e.g. oncectl counter incr jobs",
                           "missing command");
    }
    /* A --key-file that is not there is a usage error like any other
     * (exit 2), not a refused call. */
    if (g.key_file != NULL && access(g.key_file, F_OK) != 0) {
        return usage_error(&g,
                           "a key file is written by `oncectl principal add "
                           "--data DIR NAME --role ROLE --key-out FILE`",
                           "--key-file %s: %s", g.key_file, strerror(errno));
    }
    /* No key named: $ONCE_KEY_FILE, else the dev key of `make run` when
     * it is there (and no other principal was asked for). */
    if (g.key_file == NULL && (v_env = getenv("ONCE_KEY_FILE")) != NULL &&
        v_env[0] != '\0') {
        g.key_file = v_env;
    }
    if (g.key_file == NULL && g.principal == NULL &&
        access(ONCECTL_DEV_KEY, R_OK) == 0) {
        g.key_file = ONCECTL_DEV_KEY;
    }
    return dispatch(&g, argc - i, argv + i);
}
