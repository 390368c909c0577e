/* error.c - error names, sentences, the per-thread detail and logging. */
#include <pthread.h>
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

int rk__fail_str(int code, const char *msg)
{
    size_t n = strlen(msg);
    if (n >= sizeof rk__detail)
        n = sizeof rk__detail - 1;
    memcpy(rk__detail, msg, n);
    rk__detail[n] = '\0';
    return code < 0 ? code : -code;
}

static int rk__level = RK__LOG_WARN;
static pthread_once_t rk__level_once = PTHREAD_ONCE_INIT;
static void rk__level_init(void)
{
    const char *s = getenv("RK_LOG");
    if (!s)
        return;
    if (!strcmp(s, "error"))
        rk__level = RK__LOG_ERROR;
    else if (!strcmp(s, "info"))
        rk__level = RK__LOG_INFO;
    else if (!strcmp(s, "debug"))
        rk__level = RK__LOG_DEBUG;
}

static int rk__log_level(void)
{
    pthread_once(&rk__level_once, rk__level_init);
    return rk__level;
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
