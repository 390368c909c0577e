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
#include <sched.h>
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
    return rk__now_ns() + (int64_t)timeout_ms * 1000000;
}

bool rk__backoff_poll(rk__backoff *b)
{
    uint32_t i = b->iter++;
    if (i < RK__SPIN_ITERS) {
        rk__cpu_relax();
        return true;
    }
    if (i < RK__SPIN_ITERS + RK__YIELD_ITERS) {
        sched_yield();
        return true;
    }
    return false;
}

int64_t rk__backoff_sleep_ns(rk__backoff *b)
{
    /* iterations past the yield phase: 50 us, doubling to 1 ms */
    uint32_t k = b->iter - (RK__SPIN_ITERS + RK__YIELD_ITERS);
    b->iter++;
    int64_t ns = 50000;
    for (uint32_t j = 0; j < k && ns < 1000000; j++)
        ns *= 2;
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
