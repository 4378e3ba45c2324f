/*
 * cmd_console.c — `oncectl console-token`: a short-lived token for the
 * operator console (docs/console.md), signed locally with the key file.
 *
 * Owns: the command's options and output (the bare token, so that
 * $(oncectl console-token) is the token; --json adds the principal and
 * the expiry).
 * Invariant: no RPC: the token is made from the key file alone; onced
 * decides whether its principal is an operator when the token is used.
 * Never: prints the key.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "cli/cli.h"
#include "cli/cmds.h"
#include "cli/json_out.h"
#include "proto/console_token.h"
#include "base/duration.h"
#include "base/keyfile.h"
#include "proto/principals.h"

static const char console_usage[] =
    "usage: oncectl [--key-file FILE] console-token [--ttl DURATION]\n"
    "Prints a token for onced's console (http://HOST:PORT/console#token=T),\n"
    "signed with the key file's principal (an operator's), valid for\n"
    "--ttl (default 1h, at most 12h). No call is made.\n"
    "Output: the token | --json {\"token\",\"principal\",\"expires_unix_s\"}\n";

int
cmd_console_token(const cli *g, int argc, char **argv)
{
    uint64_t ttl_ms = 3600 * 1000;
    char name[PRINCIPAL_NAME_MAX + 1], err[256], token[CONSOLE_TOKEN_MAX];
    uint8_t key[AUTH_KEY_BYTES];
    uint64_t expiry;

    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(console_usage, stdout);
            return ONCECTL_EXIT_OK;
        }
        if (strcmp(argv[i], "--ttl") == 0 && i + 1 < argc &&
            duration_parse(argv[i + 1], &ttl_ms) == 0 && ttl_ms >= 1000 &&
            ttl_ms <= CONSOLE_TOKEN_TTL_MAX_S * 1000ull) {
            i++;
            continue;
        }
        return usage_error(g, "e.g. oncectl console-token --ttl 30m",
                           "'%s': console-token takes --ttl DURATION "
                           "(1s to 12h)",
                           argv[i]);
    }
    if (g->key_file == NULL ||
        keyfile_read(g->key_file, name, key, err, sizeof(err)) != 0) {
        return usage_error(g, "pass an operator's key file: --key-file FILE",
                           "console-token needs a key file: %s",
                           g->key_file == NULL ? "none given" : err);
    }
    expiry = (uint64_t)time(NULL) + (ttl_ms + 999) / 1000;
    console_token_make(name, expiry, key, token, sizeof(token));
    sodium_memzero(key, sizeof(key));
    if (g->json) {
        json_obj j;
        json_begin(&j, stdout);
        json_str(&j, "token", token);
        json_str(&j, "principal", name);
        json_u64(&j, "expires_unix_s", expiry);
        json_end(&j);
    } else {
        printf("%s\n", token);
    }
    return ONCECTL_EXIT_OK;
}
