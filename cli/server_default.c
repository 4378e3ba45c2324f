/*
 * server_default.c — the default --server of oncectl (server_default.h).
 *
 * Owns: reading the `listen` lines of onced's configuration file and
 * choosing one: the first ipc:// whose socket this user may write to (the
 * packaged socket is open to root and the group `once`), else the first
 * tcp://, else the first tls+tcp://.
 * Invariant: the choice depends only on the file and the socket's mode, so
 * the same user on the same machine always gets the same default.
 * Never: reports an error; a file that cannot be read is no file.
 */
#include "cli/server_default.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/conf_lines.h"

/* The candidates of one file, one per kind; "" when the file has none. */
typedef struct listen_pick {
    char ipc[CONF_LINE_MAX];
    char tcp[CONF_LINE_MAX];
    char tls[CONF_LINE_MAX];
} listen_pick;

static bool
has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void
keep_first(char *slot, const char *url)
{
    if (slot[0] == '\0') {
        snprintf(slot, CONF_LINE_MAX, "%s", url);
    }
}

static int
pick_line(const char *file, int lineno, const char *key, const char *value,
          void *arg)
{
    listen_pick *p = arg;

    (void)file;
    (void)lineno;
    if (strcmp(key, "listen") != 0) {
        return 0;
    }
    if (has_prefix(value, "ipc://")) {
        if (access(value + strlen("ipc://"), W_OK) == 0) {
            keep_first(p->ipc, value);
        }
    } else if (has_prefix(value, "tcp://")) {
        keep_first(p->tcp, value);
    } else if (has_prefix(value, "tls+tcp://")) {
        keep_first(p->tls, value);
    }
    return 0;
}

/* The configuration file oncectl reads, or NULL when there is none. */
static const char *
config_path(void)
{
    const char *env = getenv("ONCE_CONFIG");

    if (env != NULL && env[0] != '\0') {
        return env;
    }
    return access(ONCECTL_SYSTEM_CONFIG, R_OK) == 0 ? ONCECTL_SYSTEM_CONFIG
                                                    : NULL;
}

const char *
server_default(char *buf, size_t len, const char **from)
{
    listen_pick p;
    const char *file = config_path();
    char err[256];

    *from = NULL;
    snprintf(buf, len, "%s", ONCECTL_DEFAULT_SERVER);
    memset(&p, 0, sizeof(p));
    if (file == NULL ||
        conf_lines_read(file, pick_line, &p, err, sizeof(err)) != 0) {
        return buf;
    }
    const char *url = p.ipc[0] != '\0'   ? p.ipc
                      : p.tcp[0] != '\0' ? p.tcp
                                         : p.tls;
    if (url[0] != '\0' && strlen(url) < len) {
        snprintf(buf, len, "%s", url);
        *from = file;
    }
    return buf;
}
