/* tests/bridge/harness.h - what the rk-bridge tests share: starting and
 * stopping a bridge (its own temporary directory, an ipc:// endpoint by
 * default, stderr captured), running the command-line programs, building
 * request frames by hand, reading status. Timeouts are generous and
 * nothing asserts on timing: a loaded 2-core machine must pass. */
#ifndef RKBT_HARNESS_H
#define RKBT_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <msgpack.h>
#include <zmq.h>

#include "rk/client.h"

#define TMO 20000 /* ms: any reply that takes longer is a failure */

#ifndef __has_feature /* clang spells the sanitizers this way, gcc with macros */
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RKBT_SANITIZER 1
#else
#define RKBT_SANITIZER 0
#endif

extern const char *g_bridge_path;  /* rk-bridge */
extern char g_client_path[4096];   /* rk-client, next to it */
/* extra rk-bridge options for every bridge a group starts (argv[3..]),
 * e.g. --io-threads 3 */
extern const char *g_extra[16];
extern int g_n_extra;

typedef struct bridge {
    pid_t pid;
    char dir[64];    /* a fresh temporary directory, removed by bridge_stop */
    char ep[256];    /* the endpoint clients use */
    char sep[256];   /* the status endpoint (bridge_opts.status_bind), as bound; "" without */
    char line[4096]; /* the start-up line */
    int status;      /* exit status, after bridge_stop or a failed start */
    bool own_dir;    /* dir is removed when the bridge stops */
} bridge;

/* The stderr of the bridge that stopped (or failed to start) last. */
extern char *g_last_err;

typedef struct bridge_opts {
    const char *bind;        /* NULL: ipc://DIR/b.sock */
    const char *const *env;  /* extra "K=V" entries, NULL-terminated */
    int nofile;              /* > 0: RLIMIT_NOFILE hard limit (and soft) */
    int nofile_soft;         /* > 0: ... but this soft limit */
    int umask;               /* >= 0: the bridge's umask */
    bool no_extra;           /* leave out g_extra */
    bool may_fail;           /* return -1 instead of failing when it does not start */
    bool keep_dir;           /* dir exists already (b->dir set by the caller) and stays */
    const char *status_bind; /* --status-bind this; "": ipc://DIR/s.sock; NULL: none */
} bridge_opts;

/* Starts rk-bridge --backend cpu --log-level warn [g_extra] args...
 * (NULL-terminated) and waits for its start-up line. Returns 0, or -1 when
 * it exited first (may_fail; b->status, b->err say how). */
int bridge_start_opts(bridge *b, const bridge_opts *o, const char *const *args);
/* bridge_start_opts with default options. */
void bridge_start(bridge *b, const char *first, ...);
/* SIGTERM, then waits; g_last_err gets its stderr (its tail is copied to
 * ours), b->dir is removed. Returns the exit status (-1: still running
 * after 60 s, killed). */
int bridge_stop(bridge *b);
/* cmocka's group teardown: kills the bridges a failed test left running
 * and copies their stderr into the test's log. */
int bridge_teardown(void **state);
/* Waits (up to ms) for an exit already under way; returns the status,
 * reads g_last_err and removes the directory like bridge_stop. */
int bridge_reap(bridge *b, int ms);

rkc *client(const bridge *b);
rkc *client_ep(const char *ep);
/* The bridge still answers another client correctly: echo and vadd. */
void assert_alive(const bridge *b);
/* A bystander: BYSTANDER echoes of 64 B (ids base..) sent now, and read
 * later by bystander_check: every one answered ok, once (closes c). */
enum { BYSTANDER = 32 };
rkc *bystander_send(const bridge *b, uint64_t base);
void bystander_check(rkc *c, uint64_t base);
/* A `status` reply's counter (fails when absent). */
uint64_t status_counter(const bridge *b, const char *name);
/* The whole status reply (free it with rkc_reply_free). */
void status_get(const bridge *b, rkc_reply *r);
uint64_t map_uint(const msgpack_object *m, const char *k);

/* Runs argv (argv[0] a path) with an optional umask (-1: ours) and extra
 * environment; its stdout and stderr go to out (NUL-terminated, cut at
 * cap). Returns the exit status (128 + signal when killed). */
int run_prog(const char *const *argv, int umask_v, const char *const *env, char *out, size_t cap);
/* The first line of a key file (a Z85 key, 40 characters) into out. */
void read_z85(const char *path, char out[41]);
/* CURVE keys for a test, made with rk-bridge --gen-keys in a fresh
 * directory: the server's pair, alice's (listed: in dir/allowed),
 * mallory's (not listed) and root's (an admin: in dir/admins);
 * curve_keys_remove removes them. */
typedef struct curve_keys {
    char dir[32];
    /* for --curve-secret-key-file, --curve-allow-dir, --curve-admin-dir */
    char server_key[256], allow_dir[256], admin_dir[256];
    char server_pub[41], alice[41], mallory[41], root[41];
} curve_keys;
void curve_keys_make(curve_keys *k);
void curve_keys_remove(const curve_keys *k);
/* Runs a program (test_cli.c); expects its exit status and, when one_line
 * names something, exactly one line that names it and points to --help. */
void cli(const char *const *argv, int want, const char *one_line, char *out, size_t cap);
/* Lines in s (counting a last line without a newline). */
int count_lines(const char *s);
/* Occurrences of needle in s. */
int count_str(const char *s, const char *needle);

int64_t now_ms(void);
long proc_kb(pid_t pid, const char *key);
/* user + system CPU time of a process, microseconds */
uint64_t proc_cpu_us(pid_t pid);

/* ---- building frames by hand ---------------------------------------------- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;
void put(buf *b, const void *d, size_t n);
void put_s(buf *b, const char *s);   /* fixstr */
void put_byte(buf *b, uint8_t x);
void put_head(buf *b, int nkeys, int with_v, int with_id, uint64_t id, const char *op);
void put_bin(buf *b, const char *key, size_t n);  /* bytes 0, 1, 2, ... */
/* {v: 1, id, op: "echo", data: bin of n bytes} */
void put_echo(buf *b, uint64_t id, size_t n);
/* One reply frame of a load of put_echo(b, id, 64) requests: ECHO_OK (ok,
 * with the 64 bytes put_echo wrote), ECHO_SHUT (SHUTTING_DOWN) or ECHO_BAD
 * (anything else, or an id outside 1..max_id); *id gets the id of a reply
 * that is not ECHO_BAD. */
typedef enum echo_kind { ECHO_BAD, ECHO_OK, ECHO_SHUT } echo_kind;
echo_kind echo_reply(const void *frame, size_t len, uint64_t max_id, uint64_t *id);

uint32_t rng(uint64_t *s);

/* ---- the groups ---------------------------------------------------------- */
void test_error_rows(void **state);
void test_envelopes(void **state);
void test_pipeline(void **state);
void test_worker_kill(void **state);
void test_worker_faults(void **state);
void test_worker_gpu_faults(void **state);
void test_worker_gpu_crash_actor(void **state);
void test_worker_gpu_launch(void **state);
void test_launch_status(void **state);
void test_busy(void **state);
void test_shutdown(void **state);
void test_curve(void **state);
void test_flood(void **state);
void test_startup(void **state);
void test_large(void **state);
void test_cap(void **state);
void test_stall(void **state);
void test_stall_bytes(void **state);
void test_stall_entries(void **state);
void test_tiny_queue(void **state);
void test_proxies(void **state);
void test_sigterm(void **state);
void test_drain_deadline(void **state);
void test_sigterm_idle(void **state);
void test_sighup_stopping(void **state);
void test_logflood(void **state);
void test_counters(void **state);
void test_ipc(void **state);
void test_remote(void **state);
void test_keys(void **state);
void test_fdlimit(void **state);
void test_broker(void **state);
void test_devices(void **state);
void test_admin(void **state);
void test_cli(void **state);
void test_client(void **state);
void test_notify(void **state);
void test_status_stall(void **state);
void test_status_ops(void **state);
void test_status_startup(void **state);
void test_status_curve(void **state);

#endif
