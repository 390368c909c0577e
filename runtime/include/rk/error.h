/* rk/error.h - error codes.
 *
 * Every rk_ call that can fail returns 0 (or a count) on success and a
 * negative RK_E* code on failure: `return -RK_EINVAL`. rk_strerror() gives
 * the generic sentence; rk_last_detail() gives the specific one for the
 * calling thread's last failure, naming the value and the limit ("shared
 * memory 1049600 B exceeds the per-block limit 232448 B of NVIDIA H200").
 *
 * The values follow libuv and liburing: where an errno means the same
 * thing, the code IS that errno (RK_EINVAL == EINVAL, so a failed call
 * returns -EINVAL and a caller may test either name). Codes with no errno
 * of that meaning (GPU faults, launch limits) take values from
 * RK_ERRNO_BASE (1000) up, above every errno Linux defines (< 200), so the
 * two never collide. The numbers are this platform's errno values: compare
 * against the names, never against literals, and across machines (the
 * bridge's wire protocol) send names, not numbers.
 *
 * Both signs are accepted by rk_strerror and rk_err_name: f(-RK_EGRID) ==
 * f(RK_EGRID). A value that is no RK code gets the system's sentence and
 * name when it is an errno ("No such file or directory", "ENOENT"), else
 * "unknown error" and "RK_EUNKNOWN"; neither call ever returns NULL.
 */
#ifndef RK_ERROR_H
#define RK_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* First value of the codes that have no errno (see above). */
#define RK_ERRNO_BASE 1000

/* One X-macro generates the enum, rk_strerror and rk_err_name (libuv):
 * X(name, value, sentence). Add a code with an errno value only when the
 * errno means the same; otherwise take the next number from 1000 up. */
#define RK_ERRNO_MAP(X)                                                        \
    X(EINVAL, EINVAL, "invalid argument")                                      \
    X(ENOMEM, ENOMEM, "out of memory")                                         \
    X(EAGAIN, EAGAIN, "resource temporarily unavailable")                      \
    X(ETIMEDOUT, ETIMEDOUT, "timed out")                                       \
    X(EBUSY, EBUSY, "too many requests in flight")                             \
    X(EMSGSIZE, EMSGSIZE, "message too large")                                 \
    X(ENOSPC, ENOSPC, "data arena full")                                       \
    X(ENOTSUP, ENOTSUP, "operation not supported")                             \
    X(EPROTO, EPROTO, "corrupt or malformed message")                          \
    X(ENODEV, ENODEV, "no usable GPU device")                                  \
    X(ECLOSED, 1000, "runtime is closed or shutting down")                     \
    X(ESYS, 1001, "system call failed")                                        \
    X(EDEVICE, 1002, "device fault")                                           \
    X(ENODRIVER, 1003, "no usable CUDA driver")                                \
    X(ENOCOOP, 1004, "device does not support cooperative launch")             \
    X(EBLOCK, 1005, "block size outside the device's limits")                  \
    X(ESMEM, 1006, "shared memory outside the device's limits")                \
    X(EGRID, 1007, "grid size outside the co-residency limit")                 \
    X(ENOTMAPPED, 1008, "memory not visible to the device")                    \
    X(ESELFTEST, 1009, "device self-test failed")                              \
    X(ENOCUDA, 1010, "built without the CUDA backend")                         \
    X(EINTERNAL, 1011, "internal error")                                       \
    X(EACTOR, 1012, "the actor failed (its reply data says why)")

/* Positive values; calls return them negated. */
typedef enum rk_errno {
#define RK__ERR_ENUM(name, num, msg) RK_##name = (num),
    RK_ERRNO_MAP(RK__ERR_ENUM)
#undef RK__ERR_ENUM
} rk_errno;

/* Sentence for a code of either sign (see above for other values); never
 * NULL, a static string. Thread-safe. */
const char *rk_strerror(int err);

/* Name of a code of either sign, e.g. "RK_EGRID" (see above for other
 * values); never NULL, a static string. Thread-safe. */
const char *rk_err_name(int err);

/* The calling thread's detail sentence for its last failed rk_ call (empty
 * string when none). The buffer is thread-local and overwritten by the next
 * failure on the same thread. */
const char *rk_last_detail(void);

#ifdef __cplusplus
}
#endif
#endif /* RK_ERROR_H */
