/* rk/log.h - where librk's own messages go.
 *
 * librk writes nothing to stdout or stderr unless asked. It has few
 * messages: why the backend was chosen (also in rk_runtime_info's `why`,
 * which a program should print itself if it wants to), faults it noticed
 * on a thread of its own, replies it had to drop. A program either
 *  - installs a handler and picks a level (rk_log_set_handler and
 *    rk_log_set_level): messages at that level or more severe go to the
 *    handler, and nowhere else; or
 *  - sets nothing: the level comes from the environment variable
 *    RK_LOG=off|error|warn|info|debug (read once, at the first message;
 *    unset or anything else means off), and messages go to stderr as
 *    "rk LEVEL: message" lines. So RK_LOG=warn shows them for any program.
 *
 * Settings are process-wide (like libcurl's global settings), not per
 * runtime. Thread-safety: every call here may be made from any thread, at
 * any time, also while other threads log. The handler may be called from
 * any thread that uses librk and from librk's own threads (the CPU worker,
 * the CUDA watchdog), several at once: it must be thread-safe itself.
 */
#ifndef RK_LOG_H
#define RK_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rk_log_level {
    RK_LOG_OFF = 0,   /* no messages */
    RK_LOG_ERROR = 1, /* something failed that no return value reports */
    RK_LOG_WARN = 2,  /* e.g. backend auto fell back to the CPU */
    RK_LOG_INFO = 3,  /* e.g. which backend runs, self-test timing */
    RK_LOG_DEBUG = 4,
} rk_log_level;

/* A handler: `msg` is one line without a newline, borrowed for the call.
 * `user` is what was given to rk_log_set_handler. It must not call
 * rk_log_set_handler; messages that librk would log from inside a handler
 * (on the same thread) are dropped rather than nested. */
typedef void (*rk_log_fn)(rk_log_level level, const char *msg, void *user);

/* Sends librk's messages to fn(level, msg, user); fn NULL restores the
 * stderr default (rk_log_stderr). When this returns, no thread is inside
 * the previous handler or will enter it again, so its `user` may be freed.
 * Does not change the level: call rk_log_set_level too (until then
 * RK_LOG decides, which is off when unset). Returns 0, or -RK_EBUSY when
 * called from inside a handler (nothing changes). */
int rk_log_set_handler(rk_log_fn fn, void *user);

/* Messages at `level` or more severe are delivered (RK_LOG_OFF: none).
 * Overrides RK_LOG. Returns 0 or -RK_EINVAL for a level out of range. */
int rk_log_set_level(rk_log_level level);

/* The level in force (after RK_LOG, when no rk_log_set_level was made). */
rk_log_level rk_log_get_level(void);

/* The default handler: one "rk LEVEL: msg" line on stderr. */
void rk_log_stderr(rk_log_level level, const char *msg, void *user);

/* "off", "error", "warn", "info", "debug" (or "?" out of range). */
const char *rk_log_level_name(rk_log_level level);

/* Parses the names above (case-insensitive; "warning" and "none" too).
 * Returns 0 or -RK_EINVAL, leaving *out unchanged. */
int rk_log_level_parse(const char *s, rk_log_level *out);

#ifdef __cplusplus
}
#endif
#endif /* RK_LOG_H */
