/* error.c - error names, sentences, the per-thread detail and logging. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local char rk__detail[512];

const char *rk_strerror(int err)
{
    switch (err < 0 ? -err : err) {
    case 0:
        return "success";
#define RK__ERR_STR(name, num, msg)                                                                \
    case num:                                                                                      \
        return msg;
        RK_ERRNO_MAP(RK__ERR_STR)
#undef RK__ERR_STR
    default:
        return "unknown error";
    }
}

const char *rk_err_name(int err)
{
    switch (err < 0 ? -err : err) {
    case 0:
        return "RK_OK";
#define RK__ERR_NAME(name, num, msg)                                                               \
    case num:                                                                                      \
        return "RK_" #name;
        RK_ERRNO_MAP(RK__ERR_NAME)
#undef RK__ERR_NAME
    default:
        return "RK_EUNKNOWN";
    }
}

const char *rk_last_detail(void) { return rk__detail; }

void rk__clear_detail(void) { rk__detail[0] = '\0'; }

int rk__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rk__detail, sizeof rk__detail, fmt, ap);
    va_end(ap);
    return code < 0 ? code : -code;
}

static int rk__log_level(void)
{
    static int level = -1; /* benign race: every thread computes the same value */
    if (level < 0) {
        const char *s = getenv("RK_LOG");
        int l = RK__LOG_WARN;
        if (s) {
            if (!strcmp(s, "error"))
                l = RK__LOG_ERROR;
            else if (!strcmp(s, "info"))
                l = RK__LOG_INFO;
            else if (!strcmp(s, "debug"))
                l = RK__LOG_DEBUG;
        }
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&level, __ATOMIC_RELAXED);
}

void rk__log(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (level > rk__log_level())
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rk %s: %s\n", names[level], line);
}
