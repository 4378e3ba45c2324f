/*
 * main.c — oncectl, the command-line client of onced, for people and
 * scripts: global options and dispatch to the command files (cmds.h).
 *
 *   oncectl [--server URL] [--json] [--timeout DURATION] [--principal NAME]
 *           [--key-file FILE] [--tls-ca FILE] [--tls-server-name NAME]
 *           COMMAND ...
 *
 * Owns: the global options and the top usage text; which command file
 * runs a command. Output forms (text for people; with --json exactly one
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
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/server_default.h"
#include "proto/conf_lines.h"
#include "proto/duration.h"

/* onced --dev (make run) writes its operator key here; used when no key
 * is given otherwise. */
#define ONCECTL_DEV_KEY "./data/dev.key"

static const char usage_top[] =
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
    "Global options (before the command):\n"
    "  --server URL        default: $ONCE_SERVER, else the first listener\n"
    "                      of $ONCE_CONFIG or " ONCECTL_SYSTEM_CONFIG " this\n"
    "                      user can reach (ipc://, then tcp://), else\n"
    "                      " ONCECTL_DEFAULT_SERVER "\n"
    "  --json              print exactly one JSON object on stdout\n"
    "  --timeout DURATION  deadline over all attempts (default 10s); one\n"
    "                      attempt waits at most a third of it (min 100ms,\n"
    "                      max 2s)\n"
    "  --principal NAME    default: anonymous (or the key file's name)\n"
    "  --key-file FILE     sign every request with this principal's key\n"
    "                      (\"NAME KEYHEX\"); default: $ONCE_KEY_FILE, else\n"
    "                      " ONCECTL_DEV_KEY " when it exists (onced --dev)\n"
    "  --tls-ca FILE       PEM CA that a tls+tcp:// server must be signed by\n"
    "  --tls-server-name NAME  name its certificate must carry (a DNS name in\n"
    "                      subjectAltName); default: the host of --server\n"
    "  --version           oncectl's version\n"
    "  -h, --help          this text; `oncectl COMMAND --help` for a command\n"
    "\n"
    "DURATION is <number><unit> with unit ms, s, m or h (200ms, 2s, 5m, 1h,\n"
    "1m30s); a bare number is milliseconds.\n"
    "\n"
    "Exit status: 0 OK; 1 the call failed (code printed); 2 usage error;\n"
    "3 outcome unknown (retry the printed rpc id with --rpc-id).\n";

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
        fputs(usage_top, stdout);
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

int
main(int argc, char **argv)
{
    cli g;
    char default_server[CONF_LINE_MAX];
    const char *v_env;
    int i;

    memset(&g, 0, sizeof(g));
    g.json = wants_json(argc, argv);
    g.server = getenv("ONCE_SERVER");
    if (g.server == NULL || g.server[0] == '\0') {
        g.server = server_default(default_server, sizeof(default_server),
                                  &g.server_from);
    }

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int m;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            break; /* the command */
        }
        if (is_help(a)) {
            fputs(usage_top, stdout);
            return ONCECTL_EXIT_OK;
        }
        if (strcmp(a, "--version") == 0) {
            printf("oncectl %s\n", ONCE_VERSION);
            return ONCECTL_EXIT_OK;
        }
        if (strcmp(a, "--json") == 0) {
            g.json = true;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--server", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, "e.g. --server ipc:///tmp/once.ipc",
                                   "--server needs a URL");
            }
            g.server = v;
            g.server_from = NULL;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--timeout", &v)) != 0) {
            uint64_t ms = 0;
            if (m < 0 || duration_parse(v, &ms) != 0 || ms == 0 ||
                ms > UINT32_MAX) {
                return usage_error(&g,
                                   "write a positive duration like 500ms, "
                                   "2s, 1m",
                                   "bad --timeout '%s'", m < 0 ? "" : v);
            }
            g.timeout_ms = ms;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--principal", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--principal needs a NAME");
            }
            g.principal = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--key-file", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--key-file needs a FILE");
            }
            g.key_file = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--tls-ca", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--tls-ca needs a FILE");
            }
            g.tls_ca = v;
            continue;
        }
        if ((m = opt_value(argc, argv, &i, "--tls-server-name", &v)) != 0) {
            if (m < 0 || v[0] == '\0') {
                return usage_error(&g, NULL, "--tls-server-name needs a NAME");
            }
            g.tls_server_name = v;
            continue;
        }
        return usage_error(&g,
                           "global options are --server, --json, --timeout, "
                           "--principal, --key-file, --tls-ca, "
                           "--tls-server-name; command "
                           "options go after the command",
                           "unknown option '%s'", a);
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
