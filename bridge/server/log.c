/* bridge/server/log.c - the rate-limited stderr log (see log.h). */
#include "log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static const char *const rkb__kind_what[RKB_LK_COUNT] = {
    [RKB_LK_NONE] = "",
#define RKB__LK_WHAT(id, what) [RKB_LK_##id] = what,
    RKB_LOG_KINDS(RKB__LK_WHAT)
#undef RKB__LK_WHAT
};

/* Per kind: the second that is being counted, lines written in it, lines
 * left out since the last summary. All under rkb__lock: lines are rare,
 * and a flood of one kind costs an uncontended lock per event. */
typedef struct rkb__budget {
    int64_t window_ns;
    uint32_t written;
    uint64_t left_out;
    int64_t first_left_out_ns;
} rkb__budget;

static pthread_mutex_t rkb__lock = PTHREAD_MUTEX_INITIALIZER;
static rkb__budget rkb__budgets[RKB_LK_COUNT];
static uint64_t rkb__suppressed_total;
static int rkb__level = RKB_LOG_INFO;

static int64_t rkb__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void rkb_log_set_level(int level) { __atomic_store_n(&rkb__level, level, __ATOMIC_RELAXED); }
int rkb_log_level(void) { return __atomic_load_n(&rkb__level, __ATOMIC_RELAXED); }

static void rkb__write(int level, const char *line)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "rk-bridge %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}

/* Caller holds rkb__lock. */
static void rkb__summary(rkb_log_kind k, int64_t now)
{
    rkb__budget *b = &rkb__budgets[k];
    if (!b->left_out)
        return;
    char line[256];
    snprintf(line, sizeof line,
             "%" PRIu64 " more \"%s\" lines in the last %.1f s (at most %d a second)",
             b->left_out, rkb__kind_what[k], (double)(now - b->first_left_out_ns) / 1e9 + 0.05,
             RKB_LOG_BURST);
    rkb__write(RKB_LOG_WARN, line);
    b->left_out = 0;
}

void rkb_logk(rkb_log_kind kind, int level, const char *fmt, ...)
{
    if (level > rkb_log_level())
        return;
    char line[1024];
    pthread_mutex_lock(&rkb__lock);
    if (kind != RKB_LK_NONE) {
        rkb__budget *b = &rkb__budgets[kind];
        int64_t now = rkb__mono_ns();
        if (now - b->window_ns >= 1000000000) {
            rkb__summary(kind, now);
            b->window_ns = now;
            b->written = 0;
        }
        if (b->written >= RKB_LOG_BURST) {
            if (!b->left_out++)
                b->first_left_out_ns = now;
            rkb__suppressed_total++;
            pthread_mutex_unlock(&rkb__lock);
            return;
        }
        b->written++;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rkb__write(level, line);
    pthread_mutex_unlock(&rkb__lock);
}

void rkb_log_flush(int force)
{
    int64_t now = rkb__mono_ns();
    pthread_mutex_lock(&rkb__lock);
    for (int k = RKB_LK_NONE + 1; k < RKB_LK_COUNT; k++)
        if (force || now - rkb__budgets[k].window_ns >= 1000000000)
            rkb__summary((rkb_log_kind)k, now);
    pthread_mutex_unlock(&rkb__lock);
}

uint64_t rkb_log_suppressed(void)
{
    pthread_mutex_lock(&rkb__lock);
    uint64_t n = rkb__suppressed_total;
    pthread_mutex_unlock(&rkb__lock);
    return n;
}
