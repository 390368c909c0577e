/* rk/error.h - error codes.
 *
 * Every rk_ call that can fail returns 0 (or a count) on success and a
 * negative RK_E* code on failure. rk_strerror() gives the generic sentence;
 * rk_last_detail() gives the specific one for the calling thread's last
 * failure, naming the value and the limit ("shared memory 1049600 B exceeds
 * the per-block limit 232448 B of NVIDIA H200").
 */
#ifndef RK_ERROR_H
#define RK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* One X-macro generates the enum, rk_strerror and rk_err_name (libuv). */
#define RK_ERRNO_MAP(X)                                                        \
    X(EINVAL, 1, "invalid argument")                                           \
    X(ENOMEM, 2, "out of memory")                                              \
    X(EAGAIN, 3, "resource temporarily unavailable")                           \
    X(ETIMEDOUT, 4, "timed out")                                               \
    X(EBUSY, 5, "too many requests in flight")                                 \
    X(EMSGSIZE, 6, "message too large")                                        \
    X(ENOSPC, 7, "data arena full")                                            \
    X(ECLOSED, 8, "runtime is closed or shutting down")                        \
    X(ENOTSUP, 9, "operation not supported")                                   \
    X(EPROTO, 10, "corrupt or malformed message")                              \
    X(ESYS, 11, "system call failed")                                          \
    X(EDEVICE, 12, "device fault")                                             \
    X(ENODRIVER, 13, "no usable CUDA driver")                                  \
    X(ENODEV, 14, "no usable GPU device")                                      \
    X(ENOCOOP, 15, "device does not support cooperative launch")               \
    X(EBLOCK, 16, "block size outside the device's limits")                    \
    X(ESMEM, 17, "shared memory outside the device's limits")                  \
    X(EGRID, 18, "grid size outside the co-residency limit")                   \
    X(ENOTMAPPED, 19, "memory not visible to the device")                      \
    X(ESELFTEST, 20, "device self-test failed")                                \
    X(ENOCUDA, 21, "built without the CUDA backend")                           \
    X(EINTERNAL, 22, "internal error")

typedef enum rk_errno {
#define RK__ERR_ENUM(name, num, msg) RK_##name = (num),
    RK_ERRNO_MAP(RK__ERR_ENUM)
#undef RK__ERR_ENUM
    RK_ERRNO_MAX
} rk_errno;

/* Generic sentence for a code (positive or negative); never NULL. */
const char *rk_strerror(int err);

/* Name of a code, e.g. "RK_EGRID"; never NULL. */
const char *rk_err_name(int err);

/* The calling thread's detail sentence for its last failed rk_ call (empty
 * string when none). The buffer is thread-local and overwritten by the next
 * failure on the same thread. */
const char *rk_last_detail(void);

#ifdef __cplusplus
}
#endif
#endif /* RK_ERROR_H */
