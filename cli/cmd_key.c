/*
 * cmd_key.c — `oncectl key show`: onced's Ed25519 public key for start
 * grant credentials (Grants GetPublicKey).
 *
 * Owns: the key command's output (hex).
 * Invariant: the key is printed only after an OK answer.
 * Never: prints more than one JSON object.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "once/grants.h"

/* key show: the server's Ed25519 public key for start-grant credentials,
 * in hex — what an agent passes to once_grant_credential_verify. */
static int
cmd_key_show(const cli *g, int argc, char **argv)
{
    uint8_t pk[ONCE_GRANT_PUBLIC_KEY_BYTES];
    char hex[2 * ONCE_GRANT_PUBLIC_KEY_BYTES + 1];
    once_client *c = NULL;
    once_status st;
    int rv;

    if (argc > 0 && is_help(argv[0])) {
        fputs("usage: oncectl [GLOBAL OPTIONS] key show\n"
              "Prints onced's Ed25519 public key (hex), which verifies the\n"
              "credentials of start grants offline.\n"
              "Output: public_key HEX | --json {\"public_key\":\"HEX\"}\n",
              stdout);
        return ONCECTL_EXIT_OK;
    }
    if (argc > 0) {
        return usage_error(g, "e.g. oncectl key show",
                           "unexpected argument '%s'", argv[0]);
    }
    if ((rv = open_client(g, true, &c, &st)) == ONCE_OK) {
        rv = once_grants_public_key(c, pk, &st);
    }
    if (!call_end(g, c, rv, &st, &rv)) {
        return rv;
    }
    for (size_t i = 0; i < sizeof(pk); i++) {
        snprintf(hex + 2 * i, 3, "%02x", pk[i]);
    }
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "public_key", hex);
        json_end(&j);
    } else {
        printf("public_key %s\n", hex);
    }
    return ONCECTL_EXIT_OK;
}

/* `oncectl key show`; argv[0] is the subcommand. */
int
cmd_key(const cli *g, int argc, char **argv)
{
    const char *sub = argc > 0 ? argv[0] : NULL;

    if (sub != NULL && strcmp(sub, "show") == 0) {
        return cmd_key_show(g, argc - 1, argv + 1);
    }
    return usage_error(g, "the key command is: key show",
                       "key needs the subcommand show");
}
