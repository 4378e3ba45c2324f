/*
 * test_metrics.c — the Prometheus endpoint (--metrics-listen, server/
 * metrics.h) against a real onced, scraped by a real HTTP client (curl,
 * started with posix_spawn).
 *
 * Owns: a parser strict enough to reject what Prometheus would (every
 * sample typed by a # TYPE line before it, # HELP for each family, label
 * syntax and escapes, numeric values, histograms with increasing le bounds,
 * cumulative buckets, a last le="+Inf" bucket equal to _count, and _sum);
 * the checks that each figure moves with the calls that should move it, by
 * exactly the expected amount where the amount is known; and the refusals
 * of a URL onced cannot serve.
 * Invariant: every wait is bounded (curl --max-time, polls of at most
 * POLL_MS); figures published once a second (retention, disk) are waited
 * for, never slept for.
 * Never: parses the text with the same code that wrote it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"

extern char **environ;

#define POLL_MS      60000 /* longest wait for a published figure */
#define MAX_SAMPLES  1024
#define MAX_FAMILY   128
#define CURL_OUT_MAX (1u << 20) /* a scrape is some 20 KiB */

typedef struct sample {
    char key[320]; /* name{labels} exactly as written */
    double v;
} sample;

typedef struct family {
    char name[128];
    char type[16];
    bool help;
    bool seen_sample;
} family;

typedef struct scrape {
    char head[2048]; /* status line and headers */
    char *body;      /* malloc'd */
    sample s[MAX_SAMPLES];
    size_t n;
} scrape;

/* ---- the HTTP client ------------------------------------------------- */

/* Runs curl with args (NULL-terminated, after the program name), its
 * stdout (CURL_OUT_MAX at most) into a malloc'd *out. Returns curl's exit
 * status. Bounded: curl gives up after --max-time and closes its stdout. */
static int
curl_run(const char *const *args, char **out)
{
    assert_non_null(*out = malloc(CURL_OUT_MAX));
    return harness_run(CURL_PATH, args, *out, CURL_OUT_MAX, NULL);
}

/* GET url with curl: head and body split at the blank line. */
static void
http_get(const char *url, scrape *sc)
{
    const char *args[] = {
        "--silent", "--show-error",      "--fail", "--include", "--max-time",
        "30",       "--connect-timeout", "10",     url,         NULL};
    char *out, *sep;

    memset(sc, 0, sizeof(*sc));
    assert_int_equal(curl_run(args, &out), 0);
    sep = strstr(out, "\r\n\r\n");
    assert_non_null(sep);
    assert_true((size_t)(sep - out) < sizeof(sc->head));
    memcpy(sc->head, out, (size_t)(sep - out));
    sc->body = strdup(sep + 4);
    assert_non_null(sc->body);
    free(out);
}

/* The HTTP status of method url (curl -w %{http_code}); HEAD is asked
 * with --head, as curl would otherwise wait for the body the
 * Content-Length announces. */
static int
http_status(const char *method, const char *url)
{
    bool head = strcmp(method, "HEAD") == 0;
    const char *args[] = {"--silent",
                          "--output",
                          "/dev/null",
                          "--write-out",
                          "%{http_code}",
                          "--max-time",
                          "30",
                          url,
                          head ? "--head" : "--request",
                          method,
                          NULL};
    char *out;
    int code;

    if (head) {
        args[9] = NULL;
    }
    assert_int_equal(curl_run(args, &out), 0);
    code = atoi(out);
    free(out);
    return code;
}

/* ---- the exposition format -------------------------------------------- */

static bool
is_name(const char *s, size_t n)
{
    if (n == 0 ||
        !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':')) {
        return false;
    }
    for (size_t i = 1; i < n; i++) {
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')) {
            return false;
        }
    }
    return true;
}

static bool
parse_value(const char *s, double *v)
{
    char *end;

    if (strcmp(s, "+Inf") == 0) {
        *v = INFINITY;
        return true;
    }
    if (strcmp(s, "-Inf") == 0) {
        *v = -INFINITY;
        return true;
    }
    if (strcmp(s, "NaN") == 0) {
        *v = NAN;
        return true;
    }
    *v = strtod(s, &end);
    return end != s && *end == '\0';
}

static family *
family_find(family *f, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0) {
            return &f[i];
        }
    }
    return NULL;
}

static family *
family_add(family *f, size_t *n, const char *name, size_t len)
{
    family *x = family_find(f, *n, name, len);

    if (x == NULL) {
        assert_true(*n < MAX_FAMILY);
        assert_true(len < sizeof(f[0].name));
        x = &f[(*n)++];
        memset(x, 0, sizeof(*x));
        memcpy(x->name, name, len);
    }
    return x;
}

/* The family a sample name belongs to: itself, or for a histogram's
 * _bucket/_sum/_count the histogram. */
static family *
family_of(family *f, size_t n, const char *name, size_t len)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    family *x = family_find(f, n, name, len);

    if (x != NULL && x->type[0] != '\0') {
        return x;
    }
    for (size_t i = 0; i < 3; i++) {
        size_t sl = strlen(sfx[i]);
        if (len > sl && strncmp(name + len - sl, sfx[i], sl) == 0 &&
            (x = family_find(f, n, name, len - sl)) != NULL &&
            strcmp(x->type, "histogram") == 0) {
            return x;
        }
    }
    return NULL;
}

/* Checks {a="b",c="d"} at *p and moves past it. */
static void
parse_labels(const char *line, const char **p)
{
    const char *q = *p + 1;

    while (*q != '}') {
        const char *ln = q;
        while (isalnum((unsigned char)*q) || *q == '_') {
            q++;
        }
        if (!is_name(ln, (size_t)(q - ln)) || q[0] != '=' || q[1] != '"') {
            fail_msg("bad label in \"%s\"", line);
        }
        q += 2;
        while (*q != '"') {
            if (*q == '\0' || *q == '\n') {
                fail_msg("unterminated label value in \"%s\"", line);
            }
            if (*q == '\\') {
                if (q[1] != '\\' && q[1] != '"' && q[1] != 'n') {
                    fail_msg("bad escape in \"%s\"", line);
                }
                q++;
            }
            q++;
        }
        q++;
        if (*q == ',') {
            q++;
        } else if (*q != '}') {
            fail_msg("labels not separated by commas in \"%s\"", line);
        }
    }
    *p = q + 1;
}

/* Parses sc->body as the text format, failing the test on anything
 * Prometheus would reject, and fills sc->s. */
static void
parse_exposition(scrape *sc)
{
    family fam[MAX_FAMILY];
    size_t nfam = 0;
    char *text = strdup(sc->body), *save = NULL;

    assert_non_null(text);
    assert_true(strlen(sc->body) > 0);
    assert_int_equal(sc->body[strlen(sc->body) - 1], '\n');
    for (char *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0 ||
            strncmp(line, "# TYPE ", 7) == 0) {
            const char *name = line + 7, *sp = strchr(name, ' ');
            family *f;
            if (sp == NULL || !is_name(name, (size_t)(sp - name))) {
                fail_msg("bad comment line \"%s\"", line);
            }
            f = family_add(fam, &nfam, name, (size_t)(sp - name));
            if (line[2] == 'H') {
                assert_false(f->help);
                f->help = true;
            } else {
                if (f->type[0] != '\0' || f->seen_sample ||
                    (strcmp(sp + 1, "counter") != 0 &&
                     strcmp(sp + 1, "gauge") != 0 &&
                     strcmp(sp + 1, "histogram") != 0)) {
                    fail_msg("bad or late # TYPE line \"%s\"", line);
                }
                snprintf(f->type, sizeof(f->type), "%s", sp + 1);
            }
            continue;
        }
        if (line[0] == '#') {
            continue; /* other comments are allowed */
        }
        {
            const char *p = line;
            family *f;
            sample *s;
            size_t nlen;
            while (isalnum((unsigned char)*p) || *p == '_' || *p == ':') {
                p++;
            }
            nlen = (size_t)(p - line);
            if (!is_name(line, nlen)) {
                fail_msg("bad sample line \"%s\"", line);
            }
            if ((f = family_of(fam, nfam, line, nlen)) == NULL || !f->help) {
                fail_msg("sample without # TYPE and # HELP before it: \"%s\"",
                         line);
            }
            f->seen_sample = true;
            if (*p == '{') {
                parse_labels(line, &p);
            }
            if (*p != ' ') {
                fail_msg("no value in \"%s\"", line);
            }
            assert_true(sc->n < MAX_SAMPLES);
            s = &sc->s[sc->n++];
            assert_true((size_t)(p - line) < sizeof(s->key));
            memcpy(s->key, line, (size_t)(p - line));
            s->key[p - line] = '\0';
            if (!parse_value(p + 1, &s->v)) {
                fail_msg("bad value in \"%s\"", line);
            }
            if (strcmp(f->type, "counter") == 0 && !(s->v >= 0)) {
                fail_msg("negative counter \"%s\"", line);
            }
            for (size_t i = 0; i + 1 < sc->n; i++) {
                if (strcmp(sc->s[i].key, s->key) == 0) {
                    fail_msg("sample written twice: %s", s->key);
                }
            }
        }
    }
    free(text);
    for (size_t i = 0; i < nfam; i++) {
        if (!fam[i].help || fam[i].type[0] == '\0') {
            fail_msg("family %s lacks # HELP or # TYPE", fam[i].name);
        }
    }
}

/* The value of key (name{labels} as written); NAN when absent. */
static double
val(const scrape *sc, const char *key)
{
    for (size_t i = 0; i < sc->n; i++) {
        if (strcmp(sc->s[i].key, key) == 0) {
            return sc->s[i].v;
        }
    }
    return NAN;
}

/* val, 0 when absent (a labelled counter appears once it moves). */
static double
val0(const scrape *sc, const char *key)
{
    double v = val(sc, key);
    return isnan(v) ? 0 : v;
}

/* A histogram name without labels besides le: increasing bounds,
 * cumulative counts, a last +Inf bucket equal to _count, a _sum. */
static void
check_histogram(const scrape *sc, const char *name)
{
    char prefix[160], key[200];
    double last_le = -INFINITY, last = 0, inf = NAN;
    size_t buckets = 0;

    snprintf(prefix, sizeof(prefix), "%s_bucket{le=\"", name);
    for (size_t i = 0; i < sc->n; i++) {
        const char *k = sc->s[i].key;
        char lebuf[32];
        const char *q;
        double le;
        if (strncmp(k, prefix, strlen(prefix)) != 0) {
            continue;
        }
        k += strlen(prefix);
        q = strchr(k, '"');
        assert_non_null(q);
        assert_string_equal(q, "\"}");
        assert_true((size_t)(q - k) < sizeof(lebuf));
        memcpy(lebuf, k, (size_t)(q - k));
        lebuf[q - k] = '\0';
        assert_true(parse_value(lebuf, &le));
        assert_false(isinf(last_le) && last_le > 0); /* nothing after +Inf */
        assert_true(le > last_le);
        assert_true(sc->s[i].v >= last);
        last_le = le;
        last = sc->s[i].v;
        if (isinf(le)) {
            assert_string_equal(lebuf, "+Inf");
            inf = sc->s[i].v;
        }
        buckets++;
    }
    assert_true(buckets >= 2);
    assert_false(isnan(inf)); /* a le="+Inf" bucket */
    snprintf(key, sizeof(key), "%s_count", name);
    assert_true(val(sc, key) == inf);
    snprintf(key, sizeof(key), "%s_sum", name);
    assert_false(isnan(val(sc, key)));
}

static void
scrape_free(scrape *sc)
{
    free(sc->body);
    sc->body = NULL;
}

/* ---- onced with metrics ------------------------------------------------ */

typedef struct fixture {
    harness *h;
    char listen[64];  /* http://127.0.0.1:PORT */
    char metrics[96]; /* .../metrics */
} fixture;

static int
setup(void **state)
{
    static fixture fx;
    int port = harness_free_port();

    memset(&fx, 0, sizeof(fx));
    if (port <= 0) {
        return -1;
    }
    snprintf(fx.listen, sizeof(fx.listen), "http://127.0.0.1:%d", port);
    snprintf(fx.metrics, sizeof(fx.metrics), "%s/metrics", fx.listen);
    const char *args[] = {"--metrics-listen", fx.listen, NULL};
    if (harness_start_args(&fx.h, args) != 0) {
        return -1;
    }
    *state = &fx;
    return 0;
}

static int
teardown(void **state)
{
    fixture *fx = *state;
    int rv = harness_stop(fx->h);

    harness_free(fx->h);
    return rv;
}

/* The status, the content type, the format. */
static void
scrape_check(scrape *sc)
{
    char head[sizeof(sc->head)];

    /* Header names are case-insensitive. */
    for (size_t i = 0; i < sizeof(head); i++) {
        head[i] = (char)tolower((unsigned char)sc->head[i]);
    }
    assert_non_null(strstr(head, "http/1.1 200"));
    assert_non_null(
        strstr(head, "\r\ncontent-type: text/plain; version=0.0.4"));
    parse_exposition(sc);
    check_histogram(sc, "once_call_duration_seconds");
    check_histogram(sc, "once_group_commit_size");
}

/* Scrapes with curl and checks what came back. */
static void
scrape_now(const fixture *fx, scrape *sc)
{
    http_get(fx->metrics, sc);
    scrape_check(sc);
}

/* Scrapes until done(scrape, arg) holds; fails after POLL_MS. */
static void
scrape_until(const fixture *fx, scrape *sc, const char *what,
             bool (*done)(const scrape *, const scrape *), const scrape *arg)
{
    int64_t deadline = harness_now_ms() + POLL_MS;

    for (;;) {
        scrape_now(fx, sc);
        if (done(sc, arg)) {
            return;
        }
        if (harness_now_ms() > deadline) {
            print_message("last scrape:\n%s", sc->body);
            fail_msg("%s did not move in %d ms", what, POLL_MS);
        }
        scrape_free(sc);
        harness_sleep_ms(100);
    }
}

/* Records retained went up since s0 and have an age; a lease is live;
 * the data folder has bytes. */
static bool
published(const scrape *s1, const scrape *s0)
{
    return val(s1, "once_records_retained") >
               val(s0, "once_records_retained") &&
           val(s1, "once_oldest_record_age_seconds") > 0 &&
           val(s1, "once_leases_live") >= 1 && val(s1, "once_disk_bytes") > 0;
}

/* Records reclaimed went up since s0 and none is retained any more. */
static bool
reclaimed(const scrape *s1, const scrape *s0)
{
    return val(s1, "once_records_reclaimed_total") >
               val(s0, "once_records_reclaimed_total") &&
           val(s1, "once_records_retained") == 0 &&
           val(s1, "once_records_retained_bytes") == 0;
}

#define INCR_OK                                                                \
    "once_requests_total{method=\"/once.v1.Counter/Increment\",code=\"OK\"}"
#define INCR_CONFLICT                                                          \
    "once_requests_total{method=\"/once.v1.Counter/Increment\","               \
    "code=\"ALREADY_EXISTS\"}"
#define INCR_EXPIRED                                                           \
    "once_requests_total{method=\"/once.v1.Counter/Increment\","               \
    "code=\"FAILED_PRECONDITION\"}"
#define UNKNOWN_METHOD                                                         \
    "once_requests_total{method=\"unknown\",code=\"UNIMPLEMENTED\"}"
#define LEASE_EXPIRED "once_refusals_total{reason=\"LEASE_EXPIRED\"}"

/* The format, and each figure moving with the calls that move it. */
static void
test_scrape_moves_with_calls(void **state)
{
    fixture *fx = *state;
    once_client *a = NULL, *b = NULL;
    once_rpc_id id = {0, 0}, again;
    once_status st;
    scrape s0, s1;
    uint8_t *env = NULL;
    size_t env_len;
    Once__V1__Response *resp = NULL;
    int64_t v;

    assert_int_equal(harness_client(fx->h, false, &a), ONCE_OK);
    assert_int_equal(harness_client(fx->h, true, &b), ONCE_OK);
    scrape_now(fx, &s0);
    print_message("first scrape: %zu samples, %zu bytes\n", s0.n,
                  strlen(s0.body));
    assert_true(val(&s0, "once_build_info{version=\"" ONCE_VERSION "\"}") == 1);

    /* One increment, its replay from another handle, a conflict on the
     * same id, a call under a lease that never existed, and a method
     * that does not exist. */
    assert_int_equal(once_counter_incr(a, "jobs", 1, &id, &v, &st), ONCE_OK);
    again = id;
    assert_int_equal(once_counter_incr(b, "jobs", 1, &again, &v, &st), ONCE_OK);
    assert_true(st.replayed);
    again = id;
    assert_int_equal(once_counter_incr(b, "jobs", 2, &again, &v, &st),
                     ONCE_ALREADY_EXISTS);
    assert_int_equal(harness_incr_id(b, "jobs", 1, 1u << 30, 1, &v, &st),
                     ONCE_FAILED_PRECONDITION);
    assert_string_equal(st.reason, "LEASE_EXPIRED");
    assert_int_equal(harness_envelope("/once.v1.Counter/NoSuchMethod", 0, 0,
                                      NULL, 0, &env, &env_len),
                     0);
    assert_int_equal(harness_raw_rpc(fx->h->url, env, env_len, &resp, 10000),
                     0);
    assert_int_equal(resp->status->code, ONCE_UNIMPLEMENTED);
    once__v1__response__free_unpacked(resp, NULL);
    free(env);

    /* Counters move when the call is answered; the published figures
     * (records, their age, leases, disk) within a publication or two. */
    scrape_until(fx, &s1, "records, their age, leases and disk", published,
                 &s0);
    print_message("records %g, leases live %g, disk %g bytes, fsyncs %g -> "
                  "%g, calls timed %g -> %g\n",
                  val(&s1, "once_records_retained"),
                  val(&s1, "once_leases_live"), val(&s1, "once_disk_bytes"),
                  val(&s0, "once_fsyncs_total"), val(&s1, "once_fsyncs_total"),
                  val(&s0, "once_call_duration_seconds_count"),
                  val(&s1, "once_call_duration_seconds_count"));

    /* Exact where nothing else can move them. */
    assert_true(val0(&s1, INCR_OK) - val0(&s0, INCR_OK) == 2);
    assert_true(val0(&s1, INCR_CONFLICT) - val0(&s0, INCR_CONFLICT) == 1);
    assert_true(val0(&s1, INCR_EXPIRED) - val0(&s0, INCR_EXPIRED) == 1);
    assert_true(val0(&s1, UNKNOWN_METHOD) - val0(&s0, UNKNOWN_METHOD) == 1);
    assert_true(
        val(&s1, "once_replays_total") - val(&s0, "once_replays_total") == 1);
    assert_true(val(&s1, "once_conflicts_total") -
                    val(&s0, "once_conflicts_total") ==
                1);
    assert_true(val(&s1, LEASE_EXPIRED) - val(&s0, LEASE_EXPIRED) == 1);
    /* The increment wrote: at least one fsync, one group commit that
     * answered at least one transaction, and its record retained. */
    assert_true(val(&s1, "once_fsyncs_total") > val(&s0, "once_fsyncs_total"));
    assert_true(val(&s1, "once_commits_total") >
                val(&s0, "once_commits_total"));
    assert_true(val(&s1, "once_group_commit_size_count") >
                val(&s0, "once_group_commit_size_count"));
    assert_true(val(&s1, "once_group_commit_size_sum") >
                val(&s0, "once_group_commit_size_sum"));
    assert_true(val(&s1, "once_records_retained_bytes") > 0);
    /* Five calls at least were timed from receipt to reply (lease
     * renewals of handle a may add more). */
    assert_true(val(&s1, "once_call_duration_seconds_count") -
                    val(&s0, "once_call_duration_seconds_count") >=
                5);
    assert_true(val(&s1, "once_call_duration_seconds_sum") >
                val(&s0, "once_call_duration_seconds_sum"));

    /* Closing a's lease lets the collector reclaim its record. */
    once_client_close(a);
    scrape_free(&s0);
    s0 = s1;
    scrape_until(fx, &s1, "reclaimed", reclaimed, &s0);
    print_message("reclaimed %g -> %g, records %g\n",
                  val(&s0, "once_records_reclaimed_total"),
                  val(&s1, "once_records_reclaimed_total"),
                  val(&s1, "once_records_retained"));
    assert_true(val(&s1, "once_gc_passes_total") >
                val(&s0, "once_gc_passes_total"));
    scrape_free(&s0);
    scrape_free(&s1);
    once_client_close(b);
}

/* Only GET (and HEAD) of /metrics is served. */
static void
test_only_get_metrics(void **state)
{
    fixture *fx = *state;
    char other[128];

    snprintf(other, sizeof(other), "%s/other", fx->listen);
    assert_int_equal(http_status("GET", fx->metrics), 200);
    assert_int_equal(http_status("HEAD", fx->metrics), 200);
    assert_int_equal(http_status("GET", other), 404);
    assert_int_equal(http_status("POST", fx->metrics), 405);
}

/* Runs onced with args and returns its exit status; its stderr into err. */
static int
onced_exit(const char *const *args, char *err, size_t cap)
{
    char *argv[16] = {(char *)ONCED_PATH};
    char dir[] = "/tmp/once-metrics-XXXXXX", data[64], log[64], cmd[128];
    posix_spawn_file_actions_t fa;
    size_t n = 1;
    int st = -1;
    pid_t pid;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(log, sizeof(log), "%s/log", dir);
    argv[n++] = "--data";
    argv[n++] = data;
    argv[n++] = "--listen";
    argv[n++] = "tcp://127.0.0.1:0";
    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT, 0600);
    assert_int_equal(posix_spawn(&pid, ONCED_PATH, &fa, NULL, argv, environ),
                     0);
    posix_spawn_file_actions_destroy(&fa);
    /* Bounded: both cases exit before the server is up; SIGKILL after
     * 20 s otherwise (and the test fails on the status). */
    for (int i = 0; i < 2000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            break;
        }
        if (i == 1999) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        harness_sleep_ms(10);
    }
    err[0] = '\0';
    if ((f = fopen(log, "r")) != NULL) {
        err[fread(err, 1, cap - 1, f)] = '\0';
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A URL onced cannot serve is refused at the start, saying why. */
static void
test_refused_urls(void **state)
{
    char err[4096], url[64];
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int s;

    (void)state;
    const char *https[] = {"--metrics-listen", "https://127.0.0.1:9464", NULL};
    assert_int_equal(onced_exit(https, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "only http://"));
    const char *path[] = {"--metrics-listen", "http://127.0.0.1:9464/x", NULL};
    assert_int_equal(onced_exit(path, err, sizeof(err)), 2);
    assert_non_null(strstr(err, "/metrics"));

    /* A port another socket listens on. */
    s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s, 1), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    const char *busy[] = {"--metrics-listen", url, NULL};
    assert_int_equal(onced_exit(busy, err, sizeof(err)), 1);
    print_message("port in use: %s", err);
    assert_non_null(strstr(err, "cannot serve metrics"));
    close(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scrape_moves_with_calls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_only_get_metrics, setup, teardown),
        cmocka_unit_test(test_refused_urls),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
