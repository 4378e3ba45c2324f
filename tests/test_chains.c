/*
 * test_chains.c — chains across client crashes (once/journal.h,
 * docs/chains.md; SPEC.md section 13): Theorem 17.2 of Weikum & Vossen as
 * tests, against a real onced.
 *
 * Owns: the client-side crash matrix and the journal's own rules:
 *   crash_matrix            for each crash point of libonce_seams
 *                           (before_record, after_record, after_send,
 *                           after_reply, after_commit) at the first step,
 *                           the grant step and the last step: the driver
 *                           (chain_driver.c) is SIGKILLed there, a new
 *                           process resumes the chain from the journal
 *                           and runs it to the end. Then every step ran
 *                           exactly once on the server (counters a = 101,
 *                           b = 10, out = 1 exactly; the grant's reply is
 *                           the one that created it, existing = 0), every
 *                           output line exists at least once and all
 *                           lines of a step agree.
 *   matrix_fails_write_after_send  the same matrix on the test build's
 *                           broken journal (ONCE_CHAIN_WRITE_AFTER_SEND=1:
 *                           a request is recorded only with its reply):
 *                           a crash after the send re-executes the step
 *                           under a new id, and the checks above catch it.
 *   random_kills            a 200-step chain (40 rounds of the five)
 *                           driven by a process SIGKILLed at random
 *                           moments (at least 10 kills), onced SIGKILLed
 *                           and restarted once meanwhile: every counter
 *                           exact, every output present and agreeing.
 *   lease_ended_not_resent  the crashed step's lease ends before the
 *                           resume: the chain says LEASE_ENDED, nothing
 *                           is re-sent (a = 1, not 2).
 *   lease_ended_signed      the same with authentication on (alice's
 *                           key): the renewal's NOT_YOUR_LEASE is read as
 *                           an ended lease.
 *   other_principal_refused a chain opened by alice cannot be resumed by
 *                           bob (PERMISSION_DENIED / OTHER_PRINCIPAL).
 *   many_chains_share_journal  16 threads, a chain each, one handle and
 *                           one journal: every step once, every chain
 *                           IDLE after its 20 steps.
 *   oncectl_shows_crashed_chain  oncectl chain list|show --json on the
 *                           journal of a driver killed after a send: the
 *                           PENDING step and its request; then resumed.
 *   api_rules               the state machine: step on a busy chain,
 *                           commit with a step in flight, a REPLIED
 *                           chain hands its reply back (and the
 *                           journal's show and list see that reply, kept
 *                           by the reply log), forget.
 *   reply_survives_kill     the driver SIGKILLed right after its first
 *                           reply went to the reply log: the journal
 *                           opened after it holds the reply (REPLIED,
 *                           sent once, value 1), the log's files are
 *                           gone, the resume runs the chain once.
 *   torn_reply_ignored      the same after the grant step's reply, the
 *                           log's last record cut short, or one byte of
 *                           it changed: the journal opens, says so on
 *                           stderr, the step is PENDING; the resume
 *                           re-sends it under its id, exactly once.
 * Invariant: each case uses its own tag (counters, surface) and journal.
 * Never: sleeps to wait for a condition other than a lease's TTL.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <once/client.h>
#include <once/journal.h>

#include "proto/grants.pb-c.h"
#include "tests/harness.h"

typedef struct fx {
    harness *h;
    once_client *c;
    uint64_t gen; /* the placement generation of every case's surface */
} fx;

static int
setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    assert_int_equal(harness_start(&f->h), 0);
    assert_int_equal(harness_client(f->h, false, &f->c), ONCE_OK);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fx *f = *state;

    once_client_close(f->c);
    harness_stop(f->h);
    harness_free(f->h);
    free(f);
    return 0;
}

/* SetPlacement of tag's surface on m1 at /w; its generation. */
static uint64_t
place(once_client *c, const char *tag)
{
    Once__V1__SetPlacementRequest r = ONCE__V1__SET_PLACEMENT_REQUEST__INIT;
    Once__V1__SetPlacementResponse *p;
    char surface[128];
    uint8_t *buf;
    void *resp = NULL;
    size_t len, rlen = 0;
    once_status st;
    uint64_t g;

    snprintf(surface, sizeof(surface), "%s-s", tag);
    r.surface = surface;
    r.machine = "m1";
    r.location = "/w";
    len = once__v1__set_placement_request__get_packed_size(&r);
    buf = malloc(len + 1);
    once__v1__set_placement_request__pack(&r, buf);
    assert_int_equal(once_call(c, "/once.v1.Grants/SetPlacement", true, NULL,
                               buf, len, &resp, &rlen, &st),
                     ONCE_OK);
    free(buf);
    p = once__v1__set_placement_response__unpack(NULL, rlen, resp);
    assert_non_null(p);
    g = p->generation;
    once__v1__set_placement_response__free_unpacked(p, NULL);
    once_free(resp);
    return g;
}

/* Starts the driver on tag's chain with env (NULL-terminated "K=V"
 * list), lease TTL ttl and rounds; its pid. */
static pid_t
drive_start(const fx *f, const char *tag, const char *const *env,
            const char *ttl, const char *rounds)
{
    char journal[400], out[400], gen[24];
    pid_t pid;

    snprintf(journal, sizeof(journal), "%s/journal-%s", f->h->dir, tag);
    snprintf(out, sizeof(out), "%s/out-%s", f->h->dir, tag);
    snprintf(gen, sizeof(gen), "%llu", (unsigned long long)f->gen);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
            putenv((char *)env[i]);
        }
        execl(CHAIN_DRIVER, "chain_driver", f->h->url, journal, "chain", tag,
              gen, out, ttl, rounds, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs the driver (one round) to its end; its wait status. */
static int
drive(const fx *f, const char *tag, const char *const *env, const char *ttl)
{
    pid_t pid = drive_start(f, tag, env, ttl, "1");
    int ws;

    assert_int_equal(waitpid(pid, &ws, 0), pid);
    return ws;
}

/* The lines of tag's output file for step k: how many, and whether they
 * all equal the first, copied to first[256]. */
static int
output_lines(const fx *f, const char *tag, int k, char *first, bool *agree)
{
    char path[400], line[256], want[24];
    FILE *fp;
    int n = 0;

    snprintf(path, sizeof(path), "%s/out-%s", f->h->dir, tag);
    snprintf(want, sizeof(want), "step %d ", k);
    *agree = true;
    first[0] = '\0';
    if ((fp = fopen(path, "r")) == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), fp) != NULL) {
        if (strncmp(line, want, strlen(want)) != 0) {
            continue;
        }
        if (n++ == 0) {
            snprintf(first, 256, "%s", line);
        } else if (strcmp(first, line) != 0) {
            *agree = false;
        }
    }
    fclose(fp);
    return n;
}

static int64_t
counter(const fx *f, const char *tag, const char *name)
{
    char full[128];

    snprintf(full, sizeof(full), "%s.%s", tag, name);
    return harness_get(f->c, full);
}

/* The output line step k of a chain must have produced ("" for the
 * grant step, checked by its existing=0) into want[64]. */
static void
expected_line(int k, char *want)
{
    int r = k / 5;

    switch (k % 5) {
    case 0:
        snprintf(want, 64, "step %d value=%d\n", k, 101 * r + 1);
        break;
    case 1:
        snprintf(want, 64, "step %d value=%d\n", k, 10 * (r + 1));
        break;
    case 2:
        snprintf(want, 64, k == 2 ? "" : "step %d value=%d\n", k, 1000 * r);
        break;
    case 3:
        snprintf(want, 64, "step %d value=%d\n", k, 101 * (r + 1));
        break;
    default:
        snprintf(want, 64, "step %d value=%d\n", k, r + 1);
    }
}

/* Theorem 17.2's checks on tag's finished chain of `rounds` rounds; NULL
 * when they hold, else what failed (a static buffer). */
static const char *
chain_verdict_rounds(const fx *f, const char *tag, int rounds)
{
    static char why[512];
    int64_t a = counter(f, tag, "a"), b = counter(f, tag, "b");
    int64_t c = counter(f, tag, "c"), out = counter(f, tag, "out");
    char first[256], want[64];
    bool agree;

    if (a != 101 * rounds || b != 10 * rounds || c != 1000 * (rounds - 1) ||
        out != rounds) {
        snprintf(why, sizeof(why),
                 "counters a=%lld b=%lld c=%lld out=%lld (want %d, %d, %d, "
                 "%d)",
                 (long long)a, (long long)b, (long long)c, (long long)out,
                 101 * rounds, 10 * rounds, 1000 * (rounds - 1), rounds);
        return why;
    }
    for (int k = 0; k < 5 * rounds; k++) {
        int n = output_lines(f, tag, k, first, &agree);
        expected_line(k, want);
        bool ok = n >= 1 && agree &&
                  (want[0] != '\0' ? strcmp(first, want) == 0
                                   : strstr(first, " existing=0\n") != NULL);
        if (!ok) {
            snprintf(why, sizeof(why),
                     "step %d: %d output line(s), %s, first \"%.*s\"", k, n,
                     agree ? "agreeing" : "DISAGREEING",
                     (int)strcspn(first, "\n"), first);
            return why;
        }
    }
    return NULL;
}

static const char *
chain_verdict(const fx *f, const char *tag)
{
    return chain_verdict_rounds(f, tag, 1);
}

static const char *const points[] = {"before_record", "after_record",
                                     "after_send", "after_reply",
                                     "after_commit"};
static const int hits[] = {1, 3, 5};

/* One cell: crash at point@hit, resume, run to the end. NULL when the
 * theorem's checks hold. *killed says whether the crash point was met. */
static const char *
matrix_cell(fx *f, const char *point, int hit, bool late, bool *killed)
{
    char tag[64], arm[96];
    const char *env[3] = {arm, NULL, NULL};
    int ws;

    snprintf(tag, sizeof(tag), "%s%s%d", late ? "L" : "J", point, hit);
    snprintf(arm, sizeof(arm), "ONCE_CHAIN_CRASH=%s@%d", point, hit);
    if (late) {
        env[1] = "ONCE_CHAIN_WRITE_AFTER_SEND=1";
    }
    f->gen = place(f->c, tag);
    ws = drive(f, tag, env, "120000");
    *killed = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
    env[0] = late ? "ONCE_CHAIN_WRITE_AFTER_SEND=1" : NULL;
    env[1] = NULL;
    ws = drive(f, tag, env, "120000");
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        static char why[64];
        snprintf(why, sizeof(why), "resume ended with status 0x%x", ws);
        return why;
    }
    return chain_verdict(f, tag);
}

static void
crash_matrix(void **state)
{
    fx *f = *state;

    for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
        for (size_t i = 0; i < sizeof(hits) / sizeof(hits[0]); i++) {
            bool killed;
            const char *why =
                matrix_cell(f, points[p], hits[i], false, &killed);
            print_message("journal   %-13s @%d: %s, %s\n", points[p], hits[i],
                          killed ? "killed" : "not reached",
                          why != NULL ? why : "exactly once");
            /* after_commit@5 is the last commit: reached; every other
             * cell is met on the way too. */
            assert_true(killed);
            assert_null(why);
        }
    }
}

static void
matrix_fails_write_after_send(void **state)
{
    fx *f = *state;
    int failed = 0;

    for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
        for (size_t i = 0; i < sizeof(hits) / sizeof(hits[0]); i++) {
            bool killed;
            const char *why = matrix_cell(f, points[p], hits[i], true, &killed);
            print_message("late-write %-13s @%d: %s, %s\n", points[p], hits[i],
                          killed ? "killed" : "not reached",
                          why != NULL ? why : "exactly once");
            if (why != NULL) {
                failed++;
                /* the duplicate the journal exists to prevent */
                assert_string_equal(points[p], "after_send");
            }
        }
    }
    /* every after_send cell fails: a step re-executed under a new id */
    assert_int_equal(failed, 3);
}

#define KILL_ROUNDS "40"

/* The driver SIGKILLed at random moments (no crash point: inside LevelDB
 * writes, sends, anywhere) until it runs a 200-step chain to its end, and
 * onced itself SIGKILLed and restarted once on the way. */
static void
random_kills(void **state)
{
    fx *f = *state;
    const char *tag = "rk";
    unsigned seed = (unsigned)harness_now_ms();
    int kills = 0, runs = 0, ws = 0;

    print_message("random_kills seed %u\n", seed);
    srand(seed);
    f->gen = place(f->c, tag);
    for (; runs < 400; runs++) {
        pid_t pid = drive_start(f, tag, NULL, "120000", KILL_ROUNDS);
        harness_sleep_ms(2 + rand() % (12 + runs / 8)); /* grows: ends */
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        kills += WIFSIGNALED(ws);
        if (WIFEXITED(ws)) {
            assert_int_equal(WEXITSTATUS(ws), 0);
            break; /* the chain ended before the kill */
        }
        if (kills == 6) {
            assert_int_not_equal(harness_kill(f->h, SIGKILL), -1);
            assert_int_equal(harness_restart(f->h), 0);
        }
    }
    if (!WIFEXITED(ws)) { /* 400 runs were not enough: finish it */
        pid_t pid = drive_start(f, tag, NULL, "120000", KILL_ROUNDS);
        assert_int_equal(waitpid(pid, &ws, 0), pid);
    }
    print_message("random_kills: %d runs, %d kills\n", runs + 1, kills);
    assert_true(kills >= 10);
    assert_null(chain_verdict_rounds(f, tag, atoi(KILL_ROUNDS)));
}

static void
lease_ended_not_resent(void **state)
{
    fx *f = *state;
    const char *tag = "ended";
    const char *env[] = {"ONCE_CHAIN_CRASH=after_send@1", NULL};
    int ws;

    f->gen = place(f->c, tag);
    ws = drive(f, tag, env, "2000");
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    /* the crashed process's lease ends by itself after its TTL */
    harness_sleep_ms(2500);
    ws = drive(f, tag, NULL, "2000");
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 3);
    assert_int_equal(counter(f, tag, "a"), 1);
}

/* oncectl chain list|show on a crashed driver's journal: the pending
 * step, its rpc id and its request, decoded; nothing resumed. */
static void
oncectl_shows_crashed_chain(void **state)
{
    fx *f = *state;
    const char *tag = "ctl";
    const char *env[] = {"ONCE_CHAIN_CRASH=after_send@2", NULL};
    char journal[400], out[4096];
    int ws;

    f->gen = place(f->c, tag);
    ws = drive(f, tag, env, "120000");
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    snprintf(journal, sizeof(journal), "%s/journal-%s", f->h->dir, tag);
    const char *list[] = {"chain", "list", "--journal", journal, NULL};
    assert_int_equal(harness_oncectl(f->h, NULL, out, sizeof(out), NULL, list),
                     0);
    assert_non_null(strstr(out, "\"chain_id\":\"chain\""));
    assert_non_null(strstr(out, "\"state\":\"PENDING\""));
    assert_non_null(strstr(out, "\"steps\":1"));
    const char *show[] = {"chain", "show", "--journal", journal, "chain", NULL};
    assert_int_equal(harness_oncectl(f->h, NULL, out, sizeof(out), NULL, show),
                     0);
    assert_non_null(strstr(out, "\"request\":{\"name\":\"ctl.b\""));
    assert_non_null(strstr(out, "\"context_len\":1"));
    const char *none[] = {"chain", "show", "--journal", journal, "nope", NULL};
    assert_int_equal(harness_oncectl(f->h, NULL, out, sizeof(out), NULL, none),
                     1);
    assert_non_null(strstr(out, "NO_CHAIN"));
    /* still PENDING: the resume runs it to the end, once */
    ws = drive(f, tag, NULL, "120000");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_null(chain_verdict(f, tag));
}

/* With authentication on: alice's chain is killed after a send, its lease
 * ends while it is down; the resume's renewal is answered NOT_YOUR_LEASE
 * (onced's one answer for an ended lease, no lease oracle), read as an
 * ended lease: LEASE_ENDED, nothing re-sent. */
static void
lease_ended_signed(void **state)
{
    fx *f = *state;
    const char *tag = "signed";
    char key[400], arm_key[420], journal[400];
    const char *env[] = {"ONCE_CHAIN_CRASH=after_send@1", arm_key, NULL};
    once_chain_info in;
    once_journal *j;
    once_client *alice;
    once_status st;
    int ws;

    harness_add_principal(f->h, "alice", "scheduler");
    assert_int_equal(harness_client_as(f->h, "alice", false, &alice, &st),
                     ONCE_OK);
    snprintf(key, sizeof(key), "%s/alice.key", f->h->dir);
    snprintf(arm_key, sizeof(arm_key), "CHAIN_KEY_FILE=%s", key);
    f->gen = place(alice, tag);
    ws = drive(f, tag, env, "2000");
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    harness_sleep_ms(2500);
    env[0] = arm_key;
    env[1] = NULL;
    ws = drive(f, tag, env, "2000");
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 3);
    snprintf(journal, sizeof(journal), "%s/journal-%s", f->h->dir, tag);
    assert_int_equal(once_journal_open(journal, &j, &st), ONCE_OK);
    assert_int_equal(
        once_journal_show(j, "chain", &in, NULL, NULL, NULL, NULL, &st),
        ONCE_OK);
    print_message("lease_ended_signed: %s %s %s\n",
                  once_chain_state_name(in.state), in.reason, in.message);
    assert_int_equal(in.state, ONCE_CHAIN_LEASE_ENDED);
    once_journal_close(j);
    assert_int_equal(harness_get(alice, "signed.a"), 1);
    once_client_close(alice);
}

static void
other_principal_refused(void **state)
{
    fx *f = *state;
    char dir[400];
    once_options o;
    once_client *bob;
    once_journal *j;
    once_chain *ch;
    once_status st;

    snprintf(dir, sizeof(dir), "%s/journal-principal", f->h->dir);
    assert_int_equal(once_journal_open(dir, &j, &st), ONCE_OK);
    assert_int_equal(once_chain_open(j, f->c, "mine", &ch, &st), ONCE_OK);
    once_chain_close(ch);
    once_options_init(&o);
    o.url = f->h->url;
    o.principal = "bob";
    o.no_lease = true;
    assert_int_equal(once_client_open(&bob, &o, &st), ONCE_OK);
    assert_int_equal(once_chain_open(j, bob, "mine", &ch, &st),
                     ONCE_PERMISSION_DENIED);
    assert_true(once_status_is(&st, ONCE_REASON_OTHER_PRINCIPAL));
    assert_null(ch);
    once_client_close(bob);
    once_journal_close(j);
}

/* ---- the reply log (client/journal_replies.c) ---------------------------- */

/* The path of the highest-numbered reply file of dir into last[600];
 * how many reply files dir holds. */
static int
reply_files(const char *dir, char *last)
{
    unsigned long top = 0;
    struct dirent *d;
    DIR *dp = opendir(dir);
    int n = 0;

    assert_non_null(dp);
    while ((d = readdir(dp)) != NULL) {
        if (strncmp(d->d_name, "replies.", 8) == 0) {
            unsigned long k = strtoul(d->d_name + 8, NULL, 10);
            n++;
            if (k > top) {
                top = k;
                snprintf(last, 600, "%s/%s", dir, d->d_name);
            }
        }
    }
    closedir(dp);
    return n;
}

/* once_journal_open of dir, what it printed on stderr into err[cap]. */
static int
open_captured(const char *dir, once_journal **j, char *err, size_t cap)
{
    char path[450];
    once_status st;
    int saved, fd, rv;
    ssize_t n;

    snprintf(path, sizeof(path), "%s.stderr", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    rv = once_journal_open(dir, j, &st);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    n = pread(fd, err, cap - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    if (rv != ONCE_OK) {
        print_message("open %s: %s %s\n", dir, st.reason, st.message);
    }
    return rv;
}

/* The driver on tag's chain SIGKILLed right after its hit-th reply went
 * to the reply log; the journal's directory into dir[400]. */
static void
kill_after_reply(fx *f, const char *tag, int hit, char *dir)
{
    char arm[64];
    const char *env[] = {arm, NULL};
    int ws;

    snprintf(arm, sizeof(arm), "ONCE_CHAIN_CRASH=after_reply@%d", hit);
    f->gen = place(f->c, tag);
    ws = drive(f, tag, env, "120000");
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    snprintf(dir, 400, "%s/journal-%s", f->h->dir, tag);
}

/* The chain of a journal opened after a kill; its state (and, when
 * value is not NULL, the counter its reply holds). */
static int
reopened_state(const char *dir, char *err, size_t cap, int64_t *value)
{
    once_chain_info in;
    once_journal *j;
    once_status st;
    void *pay = NULL;
    size_t plen = 0;

    assert_int_equal(open_captured(dir, &j, err, cap), ONCE_OK);
    assert_int_equal(
        once_journal_show(j, "chain", &in, NULL, NULL, &pay, &plen, &st),
        ONCE_OK);
    print_message("reopened: %s, %u send(s), %zu payload bytes; stderr: %s\n",
                  once_chain_state_name(in.state), (unsigned)in.sends, plen,
                  err[0] != '\0' ? err : "(nothing)\n");
    if (in.state == ONCE_CHAIN_REPLIED) { /* sent once, answered */
        assert_int_equal(in.sends, 1);
    }
    if (value != NULL && in.state == ONCE_CHAIN_REPLIED) {
        assert_int_equal(once_chain_counter_value(pay, plen, value, &st),
                         ONCE_OK);
    }
    once_free(pay);
    once_journal_close(j);
    return in.state;
}

/* A reply that is only in the reply log when the process is SIGKILLed
 * survives: the journal opened after the kill holds it (REPLIED, the
 * step sent once), the log's files are gone once it is in LevelDB, and
 * the resume consumes it without sending the step again. */
static void
reply_survives_kill(void **state)
{
    fx *f = *state;
    char dir[400], last[600], err[1024];
    int64_t v = 0;

    kill_after_reply(f, "rs1", 1, dir);
    assert_true(reply_files(dir, last) >= 1);
    assert_int_equal(reopened_state(dir, err, sizeof(err), &v),
                     ONCE_CHAIN_REPLIED);
    assert_int_equal(v, 1);
    assert_null(strstr(err, "not a whole record"));
    assert_int_equal(reply_files(dir, last), 0);
    int ws = drive(f, "rs1", NULL, "120000");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_null(chain_verdict(f, "rs1"));
}

/* The last record of the reply log cut short (cut) or with a byte
 * changed (flip), as a crash mid-write may leave it: the journal opens,
 * says so on stderr, and ignores it — the step is PENDING, and its
 * resume re-sends it under its recorded id (the server replays). */
static void
torn_reply_case(fx *f, const char *tag, bool cut)
{
    char dir[400], last[600], err[1024];
    struct stat sb;
    uint8_t b;
    int fd;

    kill_after_reply(f, tag, 3, dir); /* the grant step's reply */
    assert_true(reply_files(dir, last) >= 1);
    assert_int_equal(stat(last, &sb), 0);
    if (cut) {
        assert_int_equal(truncate(last, sb.st_size - 7), 0);
    } else {
        fd = open(last, O_RDWR);
        assert_int_equal(pread(fd, &b, 1, sb.st_size - 1), 1);
        b ^= 0x01; /* the last varint's last byte: still decodes */
        assert_int_equal(pwrite(fd, &b, 1, sb.st_size - 1), 1);
        close(fd);
    }
    assert_int_equal(reopened_state(dir, err, sizeof(err), NULL),
                     ONCE_CHAIN_PENDING);
    assert_non_null(strstr(err, "not a whole record"));
    int ws = drive(f, tag, NULL, "120000");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_null(chain_verdict(f, tag));
}

static void
torn_reply_ignored(void **state)
{
    torn_reply_case(*state, "tcut", true);
    torn_reply_case(*state, "tflip", false);
}

#define THREADS 16
#define ROUNDS  20

typedef struct worker {
    once_journal *j;
    once_client *c;
    int n;
    int fails;
} worker;

/* One chain of ROUNDS increments of "many.<n>", each step's request
 * recorded by the commit that consumed the reply before it. */
static void *
worker_run(void *arg)
{
    worker *w = arg;
    char id[32], name[32], ctx[16];
    once_chain *ch;
    once_status st;
    void *req;
    size_t len;

    snprintf(id, sizeof(id), "many-%d", w->n);
    snprintf(name, sizeof(name), "many.%d", w->n);
    if (once_chain_open(w->j, w->c, id, &ch, &st) != ONCE_OK) {
        w->fails++;
        return NULL;
    }
    for (int r = 0; r < ROUNDS; r++) {
        snprintf(ctx, sizeof(ctx), "%d", r);
        once_chain_counter_request(name, 1, &req, &len, &st);
        if (once_chain_commit(ch, ctx, strlen(ctx),
                              "/once.v1.Counter/Increment", req, len, NULL,
                              &st) != ONCE_OK ||
            once_chain_send(ch, NULL, NULL, NULL, &st) != ONCE_OK) {
            w->fails++;
        }
        once_free(req);
    }
    if (once_chain_commit(ch, "end", 3, NULL, NULL, 0, NULL, &st) != ONCE_OK) {
        w->fails++;
    }
    once_chain_close(ch);
    return NULL;
}

static void
many_chains_share_journal(void **state)
{
    fx *f = *state;
    char dir[400], name[32];
    pthread_t t[THREADS];
    worker w[THREADS];
    once_chain_info *rows;
    once_journal *j;
    once_status st;
    size_t n;

    snprintf(dir, sizeof(dir), "%s/journal-many", f->h->dir);
    assert_int_equal(once_journal_open(dir, &j, &st), ONCE_OK);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.j = j, .c = f->c, .n = i};
        assert_int_equal(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].fails, 0);
        snprintf(name, sizeof(name), "many.%d", i);
        assert_int_equal(harness_get(f->c, name), ROUNDS);
    }
    assert_int_equal(once_journal_list(j, &rows, &n, &st), ONCE_OK);
    assert_int_equal(n, THREADS);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rows[i].state, ONCE_CHAIN_IDLE);
        assert_int_equal(rows[i].steps, ROUNDS);
    }
    once_free(rows);
    once_journal_close(j);
}

static void
api_rules(void **state)
{
    fx *f = *state;
    char dir[400];
    once_chain_info in, *rows;
    once_journal *j;
    once_chain *ch, *again;
    once_status st;
    void *ctx, *pay;
    size_t clen, plen, n;
    int64_t v = 0;

    snprintf(dir, sizeof(dir), "%s/journal-api", f->h->dir);
    assert_int_equal(once_journal_open(dir, &j, &st), ONCE_OK);
    assert_int_equal(once_chain_open(j, f->c, "api", &ch, &st), ONCE_OK);
    assert_int_equal(once_chain_open(j, f->c, "api", &again, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_true(once_status_is(&st, ONCE_REASON_CHAIN_BUSY));
    assert_int_equal(once_chain_counter_incr(ch, "api.x", 5, &v, &st), ONCE_OK);
    assert_int_equal(v, 5);
    /* REPLIED: a second step is refused, the reply is handed back */
    assert_int_equal(once_chain_counter_incr(ch, "api.x", 5, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_true(once_status_is(&st, ONCE_REASON_CHAIN_BUSY));
    assert_int_equal(once_chain_state(ch, &in, &ctx, &clen, &pay, &plen, &st),
                     ONCE_OK);
    assert_int_equal(in.state, ONCE_CHAIN_REPLIED);
    assert_int_equal(once_chain_counter_value(pay, plen, &v, &st), ONCE_OK);
    assert_int_equal(v, 5);
    once_free(pay);
    /* the journal's own view has it too (kept by the reply log) */
    assert_int_equal(
        once_journal_show(j, "api", &in, NULL, NULL, &pay, &plen, &st),
        ONCE_OK);
    assert_int_equal(in.state, ONCE_CHAIN_REPLIED);
    assert_int_equal(once_chain_counter_value(pay, plen, &v, &st), ONCE_OK);
    assert_int_equal(v, 5);
    once_free(pay);
    assert_int_equal(once_journal_list(j, &rows, &n, &st), ONCE_OK);
    assert_int_equal(rows[0].state, ONCE_CHAIN_REPLIED);
    once_free(rows);
    assert_int_equal(once_chain_commit(ch, "c1", 2, NULL, NULL, 0, NULL, &st),
                     ONCE_OK);
    assert_int_equal(once_chain_state(ch, &in, &ctx, &clen, &pay, &plen, &st),
                     ONCE_OK);
    assert_int_equal(in.state, ONCE_CHAIN_IDLE);
    assert_int_equal(in.steps, 1);
    assert_int_equal(clen, 2);
    assert_memory_equal(ctx, "c1", 2);
    assert_null(pay);
    once_free(ctx);
    /* the journal lists it; forget removes it */
    assert_int_equal(once_journal_list(j, &rows, &n, &st), ONCE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].chain_id, "api");
    once_free(rows);
    assert_int_equal(once_chain_forget(ch, &st), ONCE_OK);
    assert_int_equal(
        once_journal_show(j, "api", &in, NULL, NULL, NULL, NULL, &st),
        ONCE_NOT_FOUND);
    assert_true(once_status_is(&st, ONCE_REASON_NO_CHAIN));
    assert_int_equal(harness_get(f->c, "api.x"), 5);
    once_journal_close(j);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(api_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(other_principal_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(many_chains_share_journal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(oncectl_shows_crashed_chain, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(crash_matrix, setup, teardown),
        cmocka_unit_test_setup_teardown(matrix_fails_write_after_send, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(lease_ended_not_resent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(random_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(lease_ended_signed, setup, teardown),
        cmocka_unit_test_setup_teardown(reply_survives_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(torn_reply_ignored, setup, teardown),
    };

    harness_trap_crashes();
    return harness_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
