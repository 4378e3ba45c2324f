/*
 * options_dump.c — prints onced's options table (server/options.h), one
 * row a line, for tests/test_options.sh to hold docs/man/onced.8,
 * `onced --help` and packaging/onced.conf against.
 *
 * Owns: nothing but the call; the format is options_dump's.
 * Never: part of the shipped onced (a test program, never installed).
 */
#include <stdio.h>

#include "server/options.h"

int
main(void)
{
    options_dump(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
