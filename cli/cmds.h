/*
 * cmds.h — the command families of oncectl, one file each, as main.c
 * dispatches to them. argv[0] is the first argument after the command
 * word; each returns oncectl's exit status.
 *
 * Owns: declarations only.
 * Invariant: a command file includes cli.h and this header and never
 * another command file's or main.c's functions.
 */
#ifndef CLI_CMDS_H
#define CLI_CMDS_H

#include <stdbool.h>

#include "cli/cli.h"

/* `counter incr|get` (cmd_counter.c). */
int cmd_counter(const cli *g, int argc, char **argv);

/* `outbox subscribe|read|ack|topics` (cmd_outbox.c). */
int cmd_outbox(const cli *g, int argc, char **argv);

/* `lease open|renew|close|info` (cmd_lease.c). */
int cmd_lease(const cli *g, int argc, char **argv);

/* `records list` (cmd_records.c). */
int cmd_records(const cli *g, int argc, char **argv);

/* `stats` and `admin compact` (cmd_admin.c). */
int cmd_stats(const cli *g, int argc, char **argv);
int cmd_admin(const cli *g, int argc, char **argv);

/* `admin backup DIR` (cmd_backup.c). */
int cmd_admin_backup(const cli *g, int argc, char **argv);

/* `grants SUBCOMMAND ...` (cmd_grants.c). */
int cmd_grants(const cli *g, int argc, char **argv);

/* `kv put|get|del|range|txn` (cmd_kv.c). */
int cmd_kv(const cli *g, int argc, char **argv);

/* `console-token [--ttl DURATION]` (cmd_console.c): a token for the
 * operator console, signed with the key file; no RPC. */
int cmd_console_token(const cli *g, int argc, char **argv);

/* `key show` (cmd_key.c). */
int cmd_key(const cli *g, int argc, char **argv);

/* `oncectl chain list|show --journal DIR` (cmd_chain.c): a chain journal,
 * read only. */
int cmd_chain(const cli *g, int argc, char **argv);

/* `principal add|list|revoke|restore` (cmd_principal.c): editing the
 * principals file of a local onced data folder, no RPC. Exit status 0 OK,
 * 1 the edit failed, 2 usage. */
int cmd_principal(int argc, char **argv, bool json);

#endif /* CLI_CMDS_H */
