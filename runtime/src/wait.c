/* wait.c - clocks, futexes and the adaptive backoff every wait loop uses.
 *
 * The machines this runs on may have 2 cores shared by a producer, a
 * consumer and a bridge thread: spinning forever would make every latency
 * worse, and sleeping at once would add tens of microseconds to every round
 * trip. So waits spin briefly (sub-microsecond hand-offs), then yield, then
 * block (futex where the other side rings a doorbell, timed sleep where it
 * cannot, e.g. a GPU producer). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int64_t rk__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rk__deadline(int timeout_ms)
{
    if (timeout_ms < 0)
        return INT64_MAX;
    if (timeout_ms == 0)
        return 0; /* "now" without reading the clock: any time is past it */
    return rk__now_ns() + (int64_t)timeout_ms * 1000000;
}

int64_t rk__deadline_at(int64_t *d)
{
    if (*d < 0)
        *d = rk__now_ns() + -*d * 1000000;
    return *d;
}

/* The phase lengths, read once from the environment. */
static int64_t rk__phase_ns(const char *env, int64_t dflt)
{
    const char *s = getenv(env);
    if (!s || !*s)
        return dflt;
    long long us = atoll(s);
    return us < 0 ? dflt : (int64_t)us * 1000;
}

static int64_t rk__spin_ns, rk__yield_ns;
static pthread_once_t rk__phases_once = PTHREAD_ONCE_INIT;
static void rk__phases_init(void)
{
    rk__spin_ns = rk__phase_ns("RK_SPIN_US", RK__SPIN_NS);
    rk__yield_ns = rk__phase_ns("RK_YIELD_US", RK__YIELD_NS);
}

bool rk__backoff_poll(rk__backoff *b)
{
    /* The first spins are bare: a reply usually comes within a few
     * microseconds, and both the clock (~20-40 ns in a VM) and a pause
     * (~40 ns on recent Xeons) would add to how late the waiter notices
     * it. The phases are timed from the end of these. */
    if (b->iter < RK__HOT_SPINS) {
        b->iter++;
        return true;
    }
    pthread_once(&rk__phases_once, rk__phases_init);
    const int64_t spin = rk__spin_ns, yield = rk__yield_ns;
    if (!b->t0)
        b->t0 = rk__now_ns();
    /* the clock costs ~20 ns: read it every 16th spin, every yield */
    if ((++b->iter & 15) == 0 || b->elapsed >= spin)
        b->elapsed = rk__now_ns() - b->t0;
    if (b->elapsed < spin) {
        rk__cpu_relax();
        return true;
    }
    if (b->elapsed < spin + yield) {
        sched_yield();
        return true;
    }
    return false;
}

void rk__lock_take(rk__lock *l)
{
    rk__backoff b;
    rk__backoff_reset(&b);
    /* naps of 20 us, not the growing ones of a reply wait: the holder
     * gives the lock back with a store and wakes nobody, so the nap is
     * how late a taker notices (the supervisor's, in a recovery) */
    while (!rk__lock_try(l))
        if (!rk__backoff_poll(&b))
            rk__sleep_ns(20000);
}

int64_t rk__backoff_sleep_ns(rk__backoff *b)
{
    int64_t ns = 50000;
    for (uint32_t j = 0; j < b->sleeps && ns < 1000000; j++)
        ns *= 2;
    b->sleeps++;
    return ns < 1000000 ? ns : 1000000;
}

void rk__sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

int rk__futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tp = &ts;
    }
    /* Not FUTEX_PRIVATE: the word may live in a mapping shared with another
     * process. */
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, tp, NULL, 0);
    return rc == -1 ? -errno : 0;
}

void rk__futex_wake(uint32_t *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

long long rk__env_ll(const char *name, long long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    long long v = strtoll(s, &end, 10);
    return *end ? dflt : v;
}

long long rk__env_range(const char *name, long long dflt, long long lo, long long hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    long long v = strtoll(s, &end, 10);
    /* a negative wait was one without end, a huge one wrapped in an int */
    if (*end || v < lo || v > hi) {
        rk__log(RK__LOG_WARN, "%s=%s is not an integer in %lld..%lld: the default %lld is used", name, s, lo, hi,
                dflt);
        return dflt;
    }
    return v;
}
