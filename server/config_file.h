/*
 * config_file.h — onced's configuration file: the long options, one a line.
 *
 * Owns: reading `--config FILE` and turning it into command-line arguments
 * that go through the same getopt table as the flags (onced's is built
 * from its options table, server/options.h). A key is any long option of
 * that table (so an option added to onced is a config key without further
 * work); the file's lines come first and the command line after, so
 * flags win; a key given on the command line drops every line of the file
 * for that key (so a repeatable flag such as --listen replaces the file's
 * list instead of adding to it).
 *
 * File format: `key = value`, `key value` or `key` (an option without an
 * argument; `key = true|false` also works). Blank lines and lines starting
 * with `#` are ignored; a value may be put in double quotes. Unknown keys
 * (and options the caller says are no keys: onced's config, help,
 * version), a missing or unexpected value are errors that name the file
 * and line.
 *
 * Invariant: the merged argument vector holds only strings the caller can
 * keep for the life of the process (they are never freed by this module
 * once handed out, except through config_args_free).
 * Never: interprets a value; that is the option parser's business.
 */
#ifndef SERVER_CONFIG_FILE_H
#define SERVER_CONFIG_FILE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* A merged argument vector: argv[0], the file's options, the flags. */
typedef struct config_args {
    int argc;
    char **argv;      /* NULL-terminated; strings owned by this struct */
    const char *file; /* the --config FILE found in the flags, or NULL */
} config_args;

/*
 * Looks for --config FILE (or --config=FILE) in argv and, when found, reads
 * FILE and builds out = argv[0] + the file's options (each as --key=value or
 * --key) + argv[1..]. Without --config, out is a copy of argv. opts is the
 * getopt_long table the result will be parsed with; is_key says which of
 * its long options the file may set (NULL: all). Returns 0, or -1 after
 * writing a message that names the file and line into err (errlen bytes).
 * On success free out with config_args_free.
 */
int config_args_build(const struct option *opts,
                      bool (*is_key)(const char *name), int argc,
                      char *const *argv, config_args *out, char *err,
                      size_t errlen);

/* Frees what config_args_build allocated. NULL members are fine. */
void config_args_free(config_args *a);

/*
 * Compares two merged vectors option by option (the values of each long
 * option, in order) and calls changed(name, arg) for every option whose
 * values differ. Returns how many differ.
 */
int config_args_diff(const struct option *opts, const config_args *a,
                     const config_args *b,
                     void (*changed)(const char *name, void *arg), void *arg);

#endif /* SERVER_CONFIG_FILE_H */
