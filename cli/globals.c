/*
 * globals.c — oncectl's global options table (globals.h).
 *
 * Owns: GLOBAL_OPTS in the order of `oncectl --help`, and reading it.
 * Invariant: globals_find matches a name whole ("--server" or
 * "--server=...", never "--serverx").
 * Never: parses a value or reports an error (main.c does, by the row).
 */
#include "cli/globals.h"

#include <stddef.h>
#include <string.h>

#include "cli/server_default.h"

#define AT(m) offsetof(cli, m)

/* clang-format off */
const global_opt GLOBAL_OPTS[] = {
    {"--server", "URL", GLOBAL_STRING, AT(server),
     "e.g. --server ipc:///tmp/once.ipc",
     "default: $ONCE_SERVER, else the first listener\n"
     "of $ONCE_CONFIG or " ONCECTL_SYSTEM_CONFIG " this\n"
     "user can reach (ipc://, then tcp://), else\n"
     ONCECTL_DEFAULT_SERVER},
    {"--json", NULL, GLOBAL_FLAG, AT(json), NULL,
     "print exactly one JSON object on stdout"},
    {"--timeout", "DURATION", GLOBAL_DURATION, AT(timeout_ms),
     "write a positive duration like 500ms, 2s, 1m",
     "deadline over all attempts (default 10s); one\n"
     "attempt waits at most a third of it (min 100ms,\n"
     "max 2s)"},
    {"--principal", "NAME", GLOBAL_STRING, AT(principal), NULL,
     "default: anonymous (or the key file's name)"},
    {"--key-file", "FILE", GLOBAL_STRING, AT(key_file), NULL,
     "sign every request with this principal's key\n"
     "(\"NAME KEYHEX\"); default: $ONCE_KEY_FILE, else\n"
     ONCECTL_DEV_KEY " when it exists (onced --dev)"},
    {"--tls-ca", "FILE", GLOBAL_STRING, AT(tls_ca), NULL,
     "PEM CA that a tls+tcp:// server must be signed by"},
    {"--tls-server-name", "NAME", GLOBAL_STRING, AT(tls_server_name), NULL,
     "name its certificate must carry (a DNS name in\n"
     "subjectAltName); default: the host of --server"},
    {"--version", NULL, GLOBAL_VERSION, 0, NULL, "oncectl's version"},
    {"--help", NULL, GLOBAL_HELP, 0, NULL,
     "this text; `oncectl COMMAND --help` for a command"},
};
/* clang-format on */

const size_t GLOBAL_NOPTS = sizeof(GLOBAL_OPTS) / sizeof(GLOBAL_OPTS[0]);

#define HELP_COLUMN 22 /* where --help's explanations start */

const global_opt *
globals_find(const char *a)
{
    for (size_t i = 0; i < GLOBAL_NOPTS; i++) {
        size_t n = strlen(GLOBAL_OPTS[i].name);

        if (strncmp(a, GLOBAL_OPTS[i].name, n) == 0 &&
            (a[n] == '\0' || a[n] == '=')) {
            return &GLOBAL_OPTS[i];
        }
    }
    return NULL;
}

void
globals_usage(FILE *f)
{
    for (size_t i = 0; i < GLOBAL_NOPTS; i++) {
        const global_opt *o = &GLOBAL_OPTS[i];
        int n = fprintf(f, "  %s%s%s%s", o->kind == GLOBAL_HELP ? "-h, " : "",
                        o->name, o->arg != NULL ? " " : "",
                        o->arg != NULL ? o->arg : "");

        fprintf(f, "%*s", n < HELP_COLUMN ? HELP_COLUMN - n : 2, "");
        for (const char *s = o->help; *s != '\0'; s++) {
            if (*s == '\n') {
                fprintf(f, "\n%*s", HELP_COLUMN, "");
            } else {
                fputc(*s, f);
            }
        }
        fputc('\n', f);
    }
}

void
globals_list(char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < GLOBAL_NOPTS && used < len; i++) {
        const global_opt *o = &GLOBAL_OPTS[i];

        if (o->kind != GLOBAL_VERSION && o->kind != GLOBAL_HELP) {
            used += (size_t)snprintf(buf + used, len - used, "%s%s",
                                     used == 0 ? "" : ", ", o->name);
        }
    }
}
