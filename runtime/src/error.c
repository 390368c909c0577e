/* error.c - error names and sentences, and the per-thread detail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* glibc 2.32+ names and describes errno values without a buffer (the
 * static strings rk_strerror and rk_err_name must return). */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#define RK__HAVE_ERRNO_NAMES 1
#endif

static _Thread_local char rk__detail[512];

/* |err| without overflow: INT_MIN becomes 2^31, which is no code. */
static unsigned rk__err_abs(int err) { return err < 0 ? 0u - (unsigned)err : (unsigned)err; }

const char *rk_strerror(int err)
{
    unsigned e = rk__err_abs(err);
    switch (e) {
    case 0:
        return "success";
#define RK__ERR_STR(name, num, msg)                                                                \
    case num:                                                                                      \
        return msg;
        RK_ERRNO_MAP(RK__ERR_STR) /* a duplicate value would not compile */
#undef RK__ERR_STR
    default:
        break;
    }
#ifdef RK__HAVE_ERRNO_NAMES
    const char *s = e < RK_ERRNO_BASE ? strerrordesc_np((int)e) : NULL;
    if (s)
        return s;
#endif
    return "unknown error";
}

const char *rk_err_name(int err)
{
    unsigned e = rk__err_abs(err);
    switch (e) {
    case 0:
        return "RK_OK";
#define RK__ERR_NAME(name, num, msg)                                                               \
    case num:                                                                                      \
        return "RK_" #name;
        RK_ERRNO_MAP(RK__ERR_NAME)
#undef RK__ERR_NAME
    default:
        break;
    }
#ifdef RK__HAVE_ERRNO_NAMES
    const char *s = e < RK_ERRNO_BASE ? strerrorname_np((int)e) : NULL;
    if (s)
        return s;
#endif
    return "RK_EUNKNOWN";
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
