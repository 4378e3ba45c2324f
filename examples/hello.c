/* hello.c — one exactly-once call with libonce, then the same rpc id sent
 * again from a second handle, as a restarted process would: the answer is
 * the stored result of the first call (replayed), and it ran once. */
#include <once/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
    const char *url = getenv("ONCE_SERVER"), *key = getenv("ONCE_KEY_FILE");
    once_options o;
    once_security sec;
    once_client *c, *retry;
    once_status st;
    once_rpc_id id = {0, 0}; /* seq 0: libonce assigns the next rpc id */
    int64_t first, again;

    once_options_init(&o);
    o.url = url != NULL ? url : "ipc:///tmp/once.ipc";
    once_security_init(&sec); /* sign with the key of `make run`, if any */
    sec.key_file = key != NULL                         ? key
                   : access("data/dev.key", R_OK) == 0 ? "data/dev.key"
                                                       : NULL;
    if (once_client_open_secure(&c, &o, &sec, &st) != ONCE_OK ||
        once_counter_incr(c, "hello", 1, &id, &first, &st) != ONCE_OK) {
        fprintf(stderr, "hello: %s: %s\n", st.reason, st.message);
        return 1;
    }
    o.no_lease = true; /* the retry sends exactly id, under c's lease */
    if (once_client_open_secure(&retry, &o, &sec, &st) != ONCE_OK ||
        once_counter_incr(retry, "hello", 1, &id, &again, &st) != ONCE_OK) {
        fprintf(stderr, "hello: %s: %s\n", st.reason, st.message);
        return 1;
    }
    printf("rpc id %llu:%llu: hello = %lld, sent again: %lld%s\n",
           (unsigned long long)id.client_id, (unsigned long long)id.seq,
           (long long)first, (long long)again,
           st.replayed ? " (replayed)" : "");
    once_client_close(retry);
    once_client_close(c);
    return st.replayed && first == again ? 0 : 1;
}
