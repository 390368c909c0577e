/* log.c - librk's messages: the level filter, the handler, the RK_LOG
 * default (rk/log.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "internal.h"

/* The level in force, or RK__LEVEL_UNSET until RK_LOG is read or a level
 * is set. Relaxed everywhere: it is one word that each message tests, and
 * no other data is published with it. */
#define RK__LEVEL_UNSET (-1)
static atomic_int rk__level = RK__LEVEL_UNSET;
static pthread_once_t rk__env_once = PTHREAD_ONCE_INIT;

/* The handler and its user pointer change together under the write lock;
 * rk__log holds the read lock while it calls the handler, so a set returns
 * only when no call of the old handler is in flight. Writer-preferring
 * where glibc offers it, so a stream of messages cannot starve a set; no
 * thread takes the read lock twice (rk__in_handler). */
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
static pthread_rwlock_t rk__handler_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
#else
static pthread_rwlock_t rk__handler_lock = PTHREAD_RWLOCK_INITIALIZER;
#endif
static rk_log_fn rk__handler = rk_log_stderr;
static void *rk__handler_user;
static _Thread_local bool rk__in_handler;

static const char *const rk__level_names[] = {"off", "error", "warn", "info", "debug"};

const char *rk_log_level_name(rk_log_level level)
{
    return (unsigned)level <= RK_LOG_DEBUG ? rk__level_names[level] : "?";
}

/* The parse without a detail sentence (the RK_LOG read must not overwrite
 * the detail of whatever call on this thread logged first). */
static bool rk__level_parse(const char *s, rk_log_level *out)
{
    for (int l = RK_LOG_OFF; l <= RK_LOG_DEBUG; l++) {
        if (!strcasecmp(s, rk__level_names[l])) {
            *out = (rk_log_level)l;
            return true;
        }
    }
    if (!strcasecmp(s, "none"))
        *out = RK_LOG_OFF;
    else if (!strcasecmp(s, "warning"))
        *out = RK_LOG_WARN;
    else
        return false;
    return true;
}

int rk_log_level_parse(const char *s, rk_log_level *out)
{
    if (!s || !out)
        return rk__fail(RK_EINVAL, "rk_log_level_parse: %s is NULL", s ? "out" : "the string");
    if (!rk__level_parse(s, out))
        return rk__fail(RK_EINVAL, "log level \"%s\": expected off, error, warn, info or debug", s);
    return 0;
}

static void rk__level_from_env(void)
{
    rk_log_level l = RK_LOG_OFF;
    const char *s = getenv("RK_LOG");
    if (s && !rk__level_parse(s, &l))
        l = RK_LOG_OFF; /* nowhere to say it: an unknown value stays silent */
    int unset = RK__LEVEL_UNSET;
    /* a rk_log_set_level made before the first message wins */
    atomic_compare_exchange_strong_explicit(&rk__level, &unset, (int)l, memory_order_relaxed,
                                            memory_order_relaxed);
}

rk_log_level rk_log_get_level(void)
{
    int l = atomic_load_explicit(&rk__level, memory_order_relaxed);
    if (l == RK__LEVEL_UNSET) {
        pthread_once(&rk__env_once, rk__level_from_env);
        l = atomic_load_explicit(&rk__level, memory_order_relaxed);
    }
    return (rk_log_level)l;
}

int rk_log_set_level(rk_log_level level)
{
    if ((unsigned)level > RK_LOG_DEBUG)
        return rk__fail(RK_EINVAL, "log level %d is outside %d..%d", (int)level, RK_LOG_OFF,
                        RK_LOG_DEBUG);
    atomic_store_explicit(&rk__level, (int)level, memory_order_relaxed);
    return 0;
}

int rk_log_set_handler(rk_log_fn fn, void *user)
{
    if (rk__in_handler) /* the read lock is ours: the write lock would wait forever */
        return rk__fail(RK_EBUSY, "rk_log_set_handler called from inside a log handler");
    pthread_rwlock_wrlock(&rk__handler_lock);
    rk__handler = fn ? fn : rk_log_stderr;
    rk__handler_user = fn ? user : NULL;
    pthread_rwlock_unlock(&rk__handler_lock);
    return 0;
}

void rk_log_stderr(rk_log_level level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "rk %s: %s\n", rk_log_level_name(level), msg); /* one locked stdio call */
}

void rk__log(int level, const char *fmt, ...)
{
    if (level <= RK_LOG_OFF || level > (int)rk_log_get_level() || rk__in_handler)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_rwlock_rdlock(&rk__handler_lock);
    rk__in_handler = true;
    rk__handler((rk_log_level)level, line, rk__handler_user);
    rk__in_handler = false;
    pthread_rwlock_unlock(&rk__handler_lock);
}
