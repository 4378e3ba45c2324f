/*
 * server_default.h — which onced a plain `oncectl` talks to.
 *
 * Owns: the default of --server when neither the flag nor $ONCE_SERVER is
 * given: a URL onced's configuration file listens on (the packaged
 * /etc/once/onced.conf, or $ONCE_CONFIG), else ipc:///tmp/once.ipc (what
 * `make run` listens on).
 * Invariant: a URL is taken only from a `listen` line of the file; an ipc://
 * URL only when this user may connect to its socket; an unreadable or
 * malformed file falls back to the built-in default, silently.
 * Never: dials anything or writes anything.
 */
#ifndef CLI_SERVER_DEFAULT_H
#define CLI_SERVER_DEFAULT_H

#include <stddef.h>

/* Built-in default when no configuration file names a listener. */
#define ONCECTL_DEFAULT_SERVER "ipc:///tmp/once.ipc"
/* The packaged configuration file. */
#define ONCECTL_SYSTEM_CONFIG "/etc/once/onced.conf"

/*
 * Writes the default server URL into buf (len bytes) and returns buf.
 * *from is set to the configuration file it came from, or NULL for the
 * built-in default (a static or getenv string; not to be freed).
 */
const char *server_default(char *buf, size_t len, const char **from);

#endif /* CLI_SERVER_DEFAULT_H */
