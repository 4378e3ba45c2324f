/*
 * inputs_driver.c — a process that opens an input store through
 * libonce_seams and closes it (test_grants.c, c19_import_crash_*):
 * opening imports the store's files of before (client/inputs_import.c),
 * so with ONCE_CHAIN_CRASH=import_written it dies between an imported
 * chain's write and its old file's unlink.
 *
 *   inputs_driver STORE_DIR
 *
 * Owns: nothing beyond one run. Exit: 0 opened and closed, 2 a failure
 * (printed); SIGKILL at an armed crash point (client/chain_seams.h).
 * Never: sends anything.
 */
#include <stdio.h>

#include <once/client.h>
#include <once/inputs.h>

int
main(int argc, char **argv)
{
    once_inputs *s;
    once_status st;

    if (argc != 2) {
        fprintf(stderr, "usage: inputs_driver STORE_DIR\n");
        return 2;
    }
    if (once_inputs_open(&s, argv[1], &st) != ONCE_OK) {
        fprintf(stderr, "inputs_driver: %s: %s %s\n", argv[1], st.reason,
                st.message);
        return 2;
    }
    once_inputs_close(s);
    return 0;
}
