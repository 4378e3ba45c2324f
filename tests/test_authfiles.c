/*
 * test_authfiles.c — files that grant authority, checked as ssh checks its
 * keys (issue 12 item 5), and the operator-facing errors of item 9, against
 * a real onced and the real oncectl.
 *
 * Owns: one onced per test on a temp data folder whose principals (written
 * by `oncectl principal add`) and policy are then damaged the ways a local
 * attacker or a careless operator would: the data folder group- or
 * world-writable or a symlink, the principals or policy file writable by
 * others, owned by another user (when the test runs as root) or a
 * symlink; at start (onced must refuse, naming the file and the fix) and
 * at reload (the tables in force must stay: a principal "mallory" added
 * through the damage is never accepted). Also a symlink planted at the
 * grants key's temp name, a policy whose long comment hides a rule and one
 * whose pattern matches no method, a --key-file that does not exist, and a
 * full disk at start (a tmpfs in a private mount namespace: root only,
 * skipped otherwise).
 * Invariant: every damage is shown to be the cause: undone, onced starts
 * (or reloads) again; every wait polls a condition, bounded.
 * Never: edits a file onced is reading except as the attacker would (a
 * whole-file write or a mode change); leaves a mount behind (the namespace
 * dies with its shell).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "proto/auth_tag.h"
#include "tests/harness.h"
#include "proto/principals.h"

#define POLL_MAX_MS 10000

/* Whether onced's log, from byte off on, holds needle. */
static bool
log_has_since(const harness *h, long off, const char *needle)
{
    FILE *f = fopen(h->log, "r");
    char line[4096];
    bool found = false;

    if (f == NULL) {
        return false;
    }
    fseek(f, off, SEEK_SET);
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

static long
log_size(const harness *h)
{
    struct stat st;
    return stat(h->log, &st) == 0 ? (long)st.st_size : 0;
}

/* One unsigned Stats: a request now and then (onced's watcher re-reads
 * changed files by itself; older ones did before a request). */
static void
nudge(const harness *h)
{
    uint8_t *req;
    size_t len;
    Once__V1__Response *r = NULL;

    assert_int_equal(
        harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len), 0);
    if (harness_raw_rpc(h->url, req, len, &r, 1000) == 0) {
        once__v1__response__free_unpacked(r, NULL);
    }
    free(req);
}

/* Polls (bounded) until the log from off holds needle, sending a request
 * now and then. */
static void
wait_log(const harness *h, long off, const char *needle)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;

    while (!log_has_since(h, off, needle) && harness_now_ms() < end) {
        nudge(h);
        harness_sleep_ms(20);
    }
    if (!log_has_since(h, off, needle)) {
        harness_dump_log(h);
        fail_msg("the log never said \"%s\"", needle);
    }
}

static void
path_in(const harness *h, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", h->data, name);
}

/* A code that says nothing about onced's answer (the machine is busy):
 * the call is tried again, a bounded number of times. */
static bool
transient(int rv)
{
    return rv == ONCE_DEADLINE_EXCEEDED || rv == ONCE_UNAVAILABLE ||
           rv == ONCE_UNKNOWN;
}

static int stats_once(const harness *h, const char *name);
static int incr_once(const harness *h, const char *name);

/* Whether a call signed as name (key DIR/name.key) gets through. */
static int
stats_as(const harness *h, const char *name)
{
    int rv = ONCE_UNKNOWN;

    for (int i = 0; i < 5 && transient(rv); i++) {
        rv = stats_once(h, name);
    }
    return rv;
}

static int
incr_as(const harness *h, const char *name)
{
    int rv = ONCE_UNKNOWN;

    for (int i = 0; i < 5 && transient(rv); i++) {
        rv = incr_once(h, name);
    }
    return rv;
}

static int
stats_once(const harness *h, const char *name)
{
    once_client *c = NULL;
    once_status st;
    once_stats s;
    int rv = harness_client_as(h, name, true, &c, &st);

    if (rv == ONCE_OK) {
        rv = once_admin_stats(c, &s, &st);
    }
    once_client_close(c);
    return rv;
}

static int
incr_once(const harness *h, const char *name)
{
    once_client *c = NULL;
    once_status st;
    int64_t v;
    int rv = harness_client_as(h, name, false, &c, &st);

    if (rv == ONCE_OK) {
        rv = once_counter_incr(c, "n", 1, NULL, &v, &st);
    }
    once_client_close(c);
    return rv;
}

/* Waits until an unsigned call is refused UNAUTHENTICATED (onced has read
 * the principals file: until then it runs OPEN and lets everyone in) and
 * the operator's call gets through. */
static void
wait_auth_on(const harness *h)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;
    int code = -1, rv = -1;

    while (harness_now_ms() < end && code != ONCE_UNAUTHENTICATED) {
        uint8_t *req;
        size_t len;
        Once__V1__Response *r = NULL;

        assert_int_equal(
            harness_envelope("/once.v1.Admin/Stats", 0, 0, NULL, 0, &req, &len),
            0);
        if (harness_raw_rpc(h->url, req, len, &r, 1000) == 0) {
            code = r->status != NULL ? (int)r->status->code : 0;
            once__v1__response__free_unpacked(r, NULL);
        }
        free(req);
        if (code != ONCE_UNAUTHENTICATED) {
            harness_sleep_ms(20);
        }
    }
    assert_int_equal(code, ONCE_UNAUTHENTICATED);
    while (harness_now_ms() < end && (rv = stats_as(h, "op")) != ONCE_OK) {
        harness_sleep_ms(20);
    }
    assert_int_equal(rv, ONCE_OK);
}

/* onced with principals op (operator) and alice (scheduler). */
static harness *
start_auth(void)
{
    harness *h;

    umask(022);
    assert_int_equal(harness_start_args(&h, harness_no_gc), 0);
    harness_add_principal(h, "op", "operator");
    harness_add_principal(h, "alice", "scheduler");
    wait_auth_on(h);
    return h;
}

/* Writes mallory's key file (DIR/mallory.key) and returns her principals
 * line "mallory operator HEX\n" in line. */
static void
mallory(const harness *h, char *line, size_t len)
{
    uint8_t key[AUTH_KEY_BYTES];
    char hex[2 * AUTH_KEY_BYTES + 1], kp[512];
    FILE *f;

    randombytes_buf(key, sizeof(key));
    sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
    snprintf(kp, sizeof(kp), "%s/mallory.key", h->dir);
    assert_non_null(f = fopen(kp, "w"));
    fprintf(f, "mallory %s\n", hex);
    fclose(f);
    chmod(kp, 0600);
    snprintf(line, len, "mallory operator %s\n", hex);
}

static void
append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f;

    unlink(path);
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* Restarts onced and expects it to refuse, saying needle (and fix). */
static void
refused(harness *h, const char *needle, const char *fix)
{
    long off = log_size(h);

    assert_int_not_equal(harness_restart(h), 0);
    assert_int_equal(h->pid, 0);
    assert_true(log_has_since(h, off, needle));
    assert_true(log_has_since(h, off, fix));
    assert_true(log_has_since(h, off, "not started"));
}

/* ---- at start ------------------------------------------------------------ */

static void
t_start_refused(void **state)
{
    harness *h = start_auth();
    char pp[512], pol[512], real[600], msg[700];

    (void)state;
    path_in(h, "principals", pp, sizeof(pp));
    path_in(h, "policy", pol, sizeof(pol));
    assert_int_equal(harness_kill(h, SIGTERM), 0);

    /* the data folder writable by everyone, by its group */
    assert_int_equal(chmod(h->data, 0777), 0);
    snprintf(msg, sizeof(msg), "%s is writable by everyone", h->data);
    refused(h, msg, "chmod 700");
    assert_int_equal(chmod(h->data, 0770), 0);
    snprintf(msg, sizeof(msg), "%s is writable by its group", h->data);
    refused(h, msg, "chmod 700");
    assert_int_equal(chmod(h->data, 0700), 0);

    /* the data folder a symlink */
    snprintf(real, sizeof(real), "%s.real", h->data);
    assert_int_equal(rename(h->data, real), 0);
    assert_int_equal(symlink(real, h->data), 0);
    snprintf(msg, sizeof(msg), "data folder %s is a symbolic link", h->data);
    refused(h, msg, "--data");
    assert_int_equal(unlink(h->data), 0);
    assert_int_equal(rename(real, h->data), 0);

    /* the principals file writable by its group, a symlink */
    assert_int_equal(chmod(pp, 0620), 0);
    snprintf(msg, sizeof(msg), "%s is writable by its group", pp);
    refused(h, msg, "chmod 600");
    assert_int_equal(chmod(pp, 0600), 0);
    snprintf(real, sizeof(real), "%s/principals.real", h->dir);
    assert_int_equal(rename(pp, real), 0);
    assert_int_equal(symlink(real, pp), 0);
    snprintf(msg, sizeof(msg), "%s is a symbolic link", pp);
    refused(h, msg, "Fix: replace the link");
    assert_int_equal(unlink(pp), 0);
    assert_int_equal(rename(real, pp), 0);

    /* owned by another user: only root can make one */
    if (chown(pp, 65534, 65534) == 0) {
        snprintf(msg, sizeof(msg), "%s is owned by uid 65534", pp);
        refused(h, msg, "chown");
        assert_int_equal(chown(pp, geteuid(), getegid()), 0);
    } else {
        print_message("  (not root: the other-owner case is skipped)\n");
    }

    /* the policy file writable by everyone */
    write_file(pol,
               "operator *\nscheduler /once.v1.Counter/* /once.v1.Lease/*\n",
               0666);
    snprintf(msg, sizeof(msg), "%s is writable by everyone", pol);
    refused(h, msg, "chmod 600");
    assert_int_equal(chmod(pol, 0600), 0);

    /* every damage undone: onced starts, alice still counts */
    assert_int_equal(harness_restart(h), 0);
    assert_int_equal(incr_as(h, "alice"), ONCE_OK);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* ---- at reload ----------------------------------------------------------- */

/* Polls the log (bounded) for needle without sending any request. */
static bool
wait_log_quiet(const harness *h, long off, const char *needle)
{
    int64_t end = harness_now_ms() + POLL_MAX_MS;

    while (!log_has_since(h, off, needle) && harness_now_ms() < end) {
        harness_sleep_ms(20);
    }
    return log_has_since(h, off, needle);
}

/* The principals are re-read off the request path (issue 13 item 4): a
 * principal added while no request arrives is loaded and logged by the
 * watcher, and the first call signed with its key goes through without a
 * reload in its way. */
static void
t_reload_off_request_path(void **state)
{
    harness *h = start_auth();
    long off;

    (void)state;
    off = log_size(h);
    harness_add_principal_nowait(h, "carol", "scheduler");
    /* no request, no SIGHUP: only a watcher can notice */
    if (!wait_log_quiet(h, off, "reloaded: authentication on: 3 principals")) {
        harness_dump_log(h);
        fail_msg("the added principal was not loaded while no request "
                 "arrived");
    }
    assert_int_equal(incr_as(h, "carol"), ONCE_OK);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* Damage, then mallory's line added through it: not reloaded, mallory
 * refused, alice served; the fix undone by mode makes onced reload. */
static void
t_reload_refused(void **state)
{
    harness *h = start_auth();
    char pp[512], line[200], real[600], msg[700];
    long off;

    (void)state;
    path_in(h, "principals", pp, sizeof(pp));
    mallory(h, line, sizeof(line));

    /* world-writable principals: anyone appends an operator */
    off = log_size(h);
    assert_int_equal(chmod(pp, 0666), 0);
    append(pp, line);
    kill(h->pid, SIGHUP);
    snprintf(msg, sizeof(msg), "%s is writable by everyone", pp);
    wait_log(h, off, msg);
    assert_true(log_has_since(h, off, "previous principals and policy stay"));
    assert_int_equal(stats_as(h, "mallory"), ONCE_UNAUTHENTICATED);
    assert_int_equal(incr_as(h, "alice"), ONCE_OK);
    assert_int_equal(stats_as(h, "op"), ONCE_OK);
    /* the operator decides the content is right and fixes the mode: the
     * check was all that held mallory back */
    off = log_size(h);
    assert_int_equal(chmod(pp, 0600), 0);
    kill(h->pid, SIGHUP);
    wait_log(h, off, "reloaded: ");
    assert_int_equal(stats_as(h, "mallory"), ONCE_OK);
    harness_add_principal(h, "bob", "scheduler");
    {
        int64_t end = harness_now_ms() + POLL_MAX_MS;
        while (incr_as(h, "bob") != ONCE_OK && harness_now_ms() < end) {
            harness_sleep_ms(20);
        }
        assert_int_equal(incr_as(h, "bob"), ONCE_OK);
    }

    /* the principals file swapped for a symlink to one without bob */
    snprintf(real, sizeof(real), "%s/principals.other", h->dir);
    {
        FILE *in = fopen(pp, "r"), *out = fopen(real, "w");
        char l[512];
        assert_non_null(in);
        assert_non_null(out);
        while (fgets(l, sizeof(l), in) != NULL) {
            if (strncmp(l, "bob ", 4) != 0) {
                fputs(l, out);
            }
        }
        fclose(in);
        fclose(out);
        chmod(real, 0600);
    }
    off = log_size(h);
    {
        char keep[600];
        snprintf(keep, sizeof(keep), "%s/principals.keep", h->dir);
        assert_int_equal(rename(pp, keep), 0);
        assert_int_equal(symlink(real, pp), 0);
        kill(h->pid, SIGHUP);
        snprintf(msg, sizeof(msg), "%s is a symbolic link", pp);
        wait_log(h, off, msg);
        assert_int_equal(incr_as(h, "bob"), ONCE_OK); /* bob stays */
        assert_int_equal(unlink(pp), 0);
        assert_int_equal(rename(keep, pp), 0);
    }

    /* the data folder made world-writable: nothing in it is believed */
    off = log_size(h);
    assert_int_equal(chmod(h->data, 0777), 0);
    assert_int_equal(truncate(pp, 0), 0); /* "everyone revoked" */
    kill(h->pid, SIGHUP);
    snprintf(msg, sizeof(msg), "%s is writable by everyone", h->data);
    wait_log(h, off, msg);
    assert_int_equal(incr_as(h, "alice"), ONCE_OK);
    assert_int_equal(chmod(h->data, 0700), 0);

    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* The readable-by-others warning says what the danger is. */
static void
t_readable_warning(void **state)
{
    harness *h = start_auth();
    char pp[512];
    long off = log_size(h);

    (void)state;
    path_in(h, "principals", pp, sizeof(pp));
    assert_int_equal(chmod(pp, 0644), 0);
    kill(h->pid, SIGHUP);
    wait_log(h, off, "is readable by others (mode 644)");
    assert_true(log_has_since(h, off, "can sign requests as any principal"));
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* A symlink planted where the grants key's temp file goes: onced creates
 * its own file (O_EXCL|O_NOFOLLOW) and never writes through the link. */
static void
t_temp_file_symlink(void **state)
{
    harness *h;
    char key[512], tmp[600], victim[600], buf[64] = "";
    struct stat st;
    FILE *f;

    (void)state;
    assert_int_equal(harness_start(&h), 0);
    assert_int_equal(harness_kill(h, SIGTERM), 0);
    path_in(h, "grants_ed25519.key", key, sizeof(key));
    snprintf(tmp, sizeof(tmp), "%s.tmp", key);
    snprintf(victim, sizeof(victim), "%s/victim", h->dir);
    write_file(victim, "victim\n", 0600);
    assert_int_equal(unlink(key), 0);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(harness_restart(h), 0);
    assert_non_null(f = fopen(victim, "r"));
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "victim\n");
    assert_int_equal(lstat(key, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* ---- item 9: the policy, --key-file, a full disk ------------------------ */

/* A policy line that does not parse refuses the whole file and says which
 * line; the policy in force (the default) stays. */
static void
t_policy_bad_line(void **state)
{
    harness *h = start_auth();
    char pol[512], *text;
    size_t n = 0;
    long off;

    (void)state;
    path_in(h, "policy", pol, sizeof(pol));
    /* The default lets a scheduler count but not read Stats. */
    assert_int_equal(stats_as(h, "alice"), ONCE_PERMISSION_DENIED);

    /* line 3: a comment whose tail, past 4095 bytes, reads as a rule */
    assert_non_null(text = malloc(8192));
    n += (size_t)sprintf(text, "operator *\nscheduler /once.v1.Counter/*\n#");
    memset(text + n, 'x', 4094);
    n += 4094;
    n += (size_t)sprintf(text + n, "@alice /once.v1.Admin/*\n");
    off = log_size(h);
    write_file(pol, text, 0600);
    kill(h->pid, SIGHUP);
    wait_log(h, off, "line 3: longer than");
    assert_true(log_has_since(h, off, "not reloaded"));
    assert_int_equal(stats_as(h, "alice"), ONCE_PERMISSION_DENIED);

    /* line 2: a pattern that matches no method (a typo) */
    off = log_size(h);
    write_file(pol, "operator *\nscheduler /once.v1.Countr/*\n", 0600);
    kill(h->pid, SIGHUP);
    wait_log(h, off, "line 2: \"/once.v1.Countr/*\" matches no method");
    assert_int_equal(incr_as(h, "alice"), ONCE_OK); /* the default stays */

    /* a good file is taken */
    off = log_size(h);
    write_file(pol, "operator *\n", 0600);
    kill(h->pid, SIGHUP);
    wait_log(h, off, "reloaded: ");
    assert_int_equal(incr_as(h, "alice"), ONCE_PERMISSION_DENIED);
    free(text);
    assert_int_equal(harness_stop(h), 0);
    harness_free(h);
}

/* --key-file that does not exist is a usage error (exit 2). */
static void
t_key_file_missing(void **state)
{
    static const char *const args[] = {"--server",   "ipc:///nonexistent.ipc",
                                       "--key-file", "/nonexistent/op.key",
                                       "stats",      NULL};

    (void)state;
    assert_int_equal(harness_oncectl_run(args, NULL, 0, NULL), 2);
}

/* A full disk at start says so, not "another onced" or permissions. */
static void
t_full_disk(void **state)
{
    char dir[] = "/tmp/once-fulldisk-XXXXXX", cmd[2048], log[300];
    FILE *f;
    char line[2048];
    bool full = false, other = false;
    int rv;

    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_non_null(mkdtemp(dir));
    snprintf(log, sizeof(log), "%s.log", dir);
    snprintf(cmd, sizeof(cmd),
             "unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs %s && "
             "mkdir -m 700 %s/data && "
             "(dd if=/dev/zero of=%s/fill bs=4k count=64 2>/dev/null; true) "
             "&& exec %s --data %s/data --listen ipc://%s/x.ipc' >%s 2>&1",
             dir, dir, dir, ONCED_PATH, dir, dir, log);
    rv = system(cmd);
    if (WIFEXITED(rv) && WEXITSTATUS(rv) != 1) {
        rmdir(dir);
        unlink(log);
        print_message("  (no private tmpfs here: skipped, exit %d)\n",
                      WEXITSTATUS(rv));
        skip();
    }
    assert_non_null(f = fopen(log, "r"));
    while (fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stderr);
        full = full || strstr(line, "disk is full") != NULL;
        other = other || strstr(line, "another onced") != NULL ||
                strstr(line, "permission") != NULL;
    }
    fclose(f);
    unlink(log);
    rmdir(dir);
    assert_true(WIFEXITED(rv));
    assert_true(full);
    assert_false(other);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_start_refused),
        cmocka_unit_test(t_reload_off_request_path),
        cmocka_unit_test(t_reload_refused),
        cmocka_unit_test(t_readable_warning),
        cmocka_unit_test(t_temp_file_symlink),
        cmocka_unit_test(t_policy_bad_line),
        cmocka_unit_test(t_key_file_missing),
        cmocka_unit_test(t_full_disk),
    };
    if (sodium_init() < 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
