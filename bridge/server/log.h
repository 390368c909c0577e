/* bridge/server/log.h - rk-bridge's stderr log (rkb_ = bridge internal).
 *
 * Lines that a client can cause (a reply dropped, a CURVE key refused, a
 * launch, ...) belong to a kind and are rate-limited per kind: at most
 * RKB_LOG_BURST lines of one kind per second; the rest are counted, and
 * rkb_log_flush() (called about once a second by the thread that owns the
 * socket, and at exit) writes one summary line per kind that lost lines:
 *   rk-bridge warn: 12345 more "reply dropped" lines in the last 1.0 s (at most 10 a second)
 * Start-up, shutdown and operator errors use RKB_LK_NONE: never limited.
 * Thread-safety: every function may be called from any thread. */
#ifndef RKB_LOG_H
#define RKB_LOG_H

#include <stdint.h>

enum { RKB_LOG_ERROR = 0, RKB_LOG_WARN = 1, RKB_LOG_INFO = 2, RKB_LOG_DEBUG = 3 };

/* The kinds: identifier and what the summary line calls them. */
#define RKB_LOG_KINDS(X)                                                       \
    X(DROPPED, "reply dropped")                                                \
    X(UNROUTABLE, "reply to a client that is gone")                            \
    X(ENVELOPE, "envelope too deep")                                           \
    X(CURVE, "CURVE key refused")                                              \
    X(LAUNCH, "launch")                                                        \
    X(DENIED, "admin operation refused")                                       \
    X(STATUS_OP, "request refused on the status endpoint")                     \
    X(INTERNAL, "internal error")                                              \
    X(RUNTIME, "runtime failure")                                              \
    X(LIBRK, "runtime message")                                                \
    X(ACCEPT, "accept failed")                                                 \
    X(SYSTEM, "system call failed")

typedef enum rkb_log_kind {
    RKB_LK_NONE = 0,
#define RKB__LK_ENUM(id, what) RKB_LK_##id,
    RKB_LOG_KINDS(RKB__LK_ENUM)
#undef RKB__LK_ENUM
    RKB_LK_COUNT
} rkb_log_kind;

#define RKB_LOG_BURST 10 /* lines per kind per second */

/* Lines above this level are not written (RKB_LOG_INFO by default). */
void rkb_log_set_level(int level);
int rkb_log_level(void);

/* One line "rk-bridge LEVEL: message" on stderr, unless the level is
 * filtered or kind's budget for this second is spent (then counted). */
void rkb_logk(rkb_log_kind kind, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define rkb_log(level, ...) rkb_logk(RKB_LK_NONE, (level), __VA_ARGS__)

/* Writes the summary of every kind whose lines were left out and whose
 * second is over (all of them when force). */
void rkb_log_flush(int force);

/* Lines left out since start-up (status `log_suppressed`). */
uint64_t rkb_log_suppressed(void);

#endif
