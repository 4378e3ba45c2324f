/*
 * principal_cmd.h — `oncectl principal add|list|revoke|restore`: editing
 * the principals file of a local onced data folder (no RPC).
 */
#ifndef CLIENT_PRINCIPAL_CMD_H
#define CLIENT_PRINCIPAL_CMD_H

#include <stdbool.h>

/* argv[0] is the subcommand. Returns oncectl's exit status (0 OK, 1 the
 * edit failed, 2 usage). */
int principal_cmd(int argc, char **argv, bool json);

#endif /* CLIENT_PRINCIPAL_CMD_H */
