/*
 * console_assets.h — the operator console's files (server/console/),
 * built into onced as byte arrays by scripts/embed_files.cmake.
 *
 * Owns: the table's shape only; the bytes are generated.
 * Invariant: the table ends with a row whose path is NULL.
 * Never: read at run time from the file system or the internet.
 */
#ifndef SERVER_CONSOLE_ASSETS_H
#define SERVER_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct console_asset {
    const char *path; /* "/console", "/console/console.js" */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
} console_asset;

extern const console_asset console_assets[];

#endif /* SERVER_CONSOLE_ASSETS_H */
