/* bench_finish.c - the end of an rk-bench run: the table and the JSON
 * record after a normal run, after a failure, or at Ctrl-C.
 *
 * Ctrl-C: the SIGINT handler only wakes a reporter thread through a pipe
 * (async-signal-safe); the reporter prints the rows measured so far, writes
 * the partial record and exits 130 at once. It does not ask the measuring
 * loops to stop (they are left exactly as they measure), so it leaves with
 * _exit: a persistent GPU kernel or a stuck peer cannot hold it up. The
 * handler, not a blocked signal mask, so that programs the runtime may
 * exec keep the default SIGINT. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bench_report *g_rep;
static const bench_output *g_out;
static int g_wake[2] = {-1, -1};
static volatile sig_atomic_t g_sigint;
/* Whoever ends the run first (the run's thread in bench_finish, or the
 * reporter) takes this and never gives it back: the table is printed once. */
static pthread_mutex_t g_end = PTHREAD_MUTEX_INITIALIZER;

static void on_sigint(int sig)
{
    (void)sig;
    int saved = errno;
    g_sigint = 1;
    char b = 1;
    ssize_t w = write(g_wake[1], &b, 1); /* a full pipe already holds a wake-up */
    (void)w;
    errno = saved;
}

int bench_interrupted(void)
{
    return g_sigint != 0;
}

/* Prints and writes what was measured before Ctrl-C. Called with g_end held;
 * keeps the rows locked: the process ends after it. Returns 130. */
static int emit_interrupted(bench_report *rep, const bench_output *out)
{
    bench_rows_lock();
    rep->interrupted = 1;
    fprintf(stderr, "\nrk-bench %s: interrupted (SIGINT); the rows measured so far:\n", out->mode);
    if (!bench_rows_measured(rep))
        fprintf(stderr, "  (none: the first measurement had not ended)\n");
    bench_print_table(rep, stdout);
    fflush(stdout);
    if (out->json) {
        if (bench_write_json(rep, out->json, out->mode, out->samples) != 0)
            fprintf(stderr, "rk-bench: cannot write %s: %s\n", out->json, strerror(errno));
        else
            fprintf(stderr, "rk-bench: partial record (\"interrupted\": true) written to %s\n", out->json);
    }
    return 130;
}

static void *reporter(void *arg)
{
    (void)arg;
    char b;
    ssize_t n;
    while ((n = read(g_wake[0], &b, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        return NULL;
    pthread_mutex_lock(&g_end);
    int rc = emit_interrupted(g_rep, g_out);
    fflush(stderr);
    _exit(rc);
}

int bench_finish_init(bench_report *rep, const bench_output *out)
{
    g_rep = rep;
    g_out = out;
    if (pipe2(g_wake, O_CLOEXEC) != 0)
        return -1;
    pthread_t t;
    int e = pthread_create(&t, NULL, reporter, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    pthread_detach(t);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGINT, &sa, NULL);
}

int bench_finish(bench_report *rep, const bench_output *out, int rc)
{
    pthread_mutex_lock(&g_end); /* kept: the process ends after this */
    if (g_sigint)
        return emit_interrupted(rep, out);
    if (rc != 0) {
        size_t measured = bench_rows_measured(rep);
        if (measured) {
            fprintf(stderr, "rk-bench %s: the run failed (exit status %d); no record written; "
                    "the %zu rows measured before the failure:\n", out->mode, rc, measured);
            bench_print_table(rep, stdout);
        }
        return rc;
    }
    bench_print_table(rep, stdout);
    if (out->json && bench_write_json(rep, out->json, out->mode, out->samples) != 0) {
        fprintf(stderr, "rk-bench: cannot write %s: %s\n", out->json, strerror(errno));
        return 1;
    }
    return 0;
}
