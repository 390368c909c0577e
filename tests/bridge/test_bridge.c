/* tests/bridge/test_bridge.c - rk-bridge over real sockets (suite 'bridge').
 *
 *   test_bridge PATH-TO-rk-bridge [GROUP]
 *
 * Each group starts its own rk-bridge (--backend cpu) on an ipc:// endpoint
 * in a fresh temporary directory (no port clashes), drives it with the rkc
 * client library or raw ZeroMQ, and stops it with SIGTERM expecting exit 0.
 * Timeouts are generous and nothing asserts on timing: a loaded 2-core
 * machine must pass. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <zmq.h>

#include "client.h"

#define TMO 20000 /* ms: any reply that takes longer is a failure */

static const char *g_bridge_path;
/* extra rk-bridge options for every bridge a group starts (argv[3..]),
 * e.g. --io-threads 3 */
static const char *g_extra[16];
static int g_n_extra;

typedef struct bridge {
    pid_t pid;
    char dir[64];
    char ep[128];
} bridge;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts rk-bridge with extra args (NULL-terminated); waits for its
 * start-up line. */
static void bridge_start(bridge *b, const char *extra, ...)
{
    snprintf(b->dir, sizeof b->dir, "/tmp/rkbt-XXXXXX");
    assert_non_null(mkdtemp(b->dir));
    snprintf(b->ep, sizeof b->ep, "ipc://%s/b.sock", b->dir);
    const char *argv[64] = {g_bridge_path, "--backend", "cpu", "--bind", b->ep, "--log-level", "warn"};
    int n = 7;
    for (int i = 0; i < g_n_extra; i++)
        argv[n++] = g_extra[i];
    va_list ap;
    va_start(ap, extra);
    for (const char *a = extra; a && n < 62; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    b->pid = fork();
    assert_true(b->pid >= 0);
    if (b->pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execv(g_bridge_path, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    char buf[4096];
    size_t len = 0;
    int64_t deadline = now_ms() + 60000;
    while (!memchr(buf, '\n', len) && now_ms() < deadline && len < sizeof buf - 1) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        ssize_t r = read(pfd[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = 0;
    close(pfd[0]); /* the bridge writes nothing more to stdout */
    if (!strstr(buf, "listening on")) {
        fprintf(stderr, "rk-bridge did not start: \"%s\"\n", buf);
        fail();
    }
}

/* SIGTERM, then the exit status (-1: did not exit within 60 s). */
static int bridge_stop(bridge *b)
{
    kill(b->pid, SIGTERM);
    int st = 0;
    int64_t deadline = now_ms() + 60000;
    pid_t r;
    while ((r = waitpid(b->pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
        usleep(10000);
    if (r == 0) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, &st, 0);
        return -1;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", b->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", b->dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static rkc *client(const bridge *b)
{
    rkc *c;
    assert_int_equal(rkc_connect(&c, b->ep, NULL), 0);
    return c;
}

/* The bridge still answers another client correctly: echo and vadd. */
static void assert_alive(const bridge *b)
{
    rkc *c = client(b);
    rkc_reply r;
    rkc_request rq = {.op = RKC_ECHO, .data = "still here", .len = 10};
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    assert_int_equal(r.len, 10);
    assert_memory_equal(r.data, "still here", 10);
    rkc_reply_free(&r);
    float a[3] = {1.5f, -2.0f, 1e30f}, bb[3] = {2.25f, 0.5f, 1e30f};
    rkc_request vq = {.op = RKC_VADD, .a = a, .b = bb, .n = 3};
    assert_int_equal(rkc_call(c, &vq, &r, TMO), 0);
    assert_true(r.ok);
    assert_int_equal(r.len, 12);
    for (int i = 0; i < 3; i++) {
        float want = a[i] + bb[i], got;
        memcpy(&got, r.data + 4 * i, 4);
        assert_memory_equal(&got, &want, 4);
    }
    rkc_reply_free(&r);
    rkc_close(c);
}

/* ---- every error row ------------------------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_s(buf *b, const char *s) /* fixstr */
{
    uint8_t h = (uint8_t)(0xa0 | strlen(s));
    put(b, &h, 1);
    put(b, s, strlen(s));
}
static void put_byte(buf *b, uint8_t x) { put(b, &x, 1); }
static void put_head(buf *b, int nkeys, int with_v, int with_id, uint64_t id, const char *op)
{
    put_byte(b, (uint8_t)(0x80 | nkeys));
    if (with_v)
        put_s(b, "v"), put_byte(b, 1);
    if (with_id) {
        put_s(b, "id");
        put_byte(b, 0xcf);
        for (int i = 7; i >= 0; i--)
            put_byte(b, (uint8_t)(id >> (8 * i)));
    }
    if (op)
        put_s(b, "op"), put_s(b, op);
}
static void put_bin(buf *b, const char *key, size_t n)
{
    put_s(b, key);
    if (n < 256) {
        put_byte(b, 0xc4), put_byte(b, (uint8_t)n);
    } else {
        put_byte(b, 0xc6);
        for (int i = 3; i >= 0; i--)
            put_byte(b, (uint8_t)(n >> (8 * i)));
    }
    for (size_t i = 0; i < n; i++)
        put_byte(b, (uint8_t)i);
}

typedef struct bad_case {
    const char *name;
    const char *code;
    const char *msg_has; /* a substring the message must contain */
    int has_id;          /* the reply must echo id 77 (1) or carry nil (0) */
    int frames;          /* body frames (default 1) */
} bad_case;

static void build(const char *name, buf *b)
{
    b->n = 0;
    if (!strcmp(name, "garbage")) {
        put(b, "\xc1\xc1 not msgpack at all", 21);
    } else if (!strcmp(name, "array")) {
        put(b, "\x93\x01\x02\x03", 4);
    } else if (!strcmp(name, "int")) {
        put_byte(b, 0x05);
    } else if (!strcmp(name, "trailing")) {
        put_head(b, 3, 1, 1, 77, "ping");
        put_byte(b, 0xc0);
    } else if (!strcmp(name, "frames")) {
        put_head(b, 3, 1, 1, 77, "ping");
    } else if (!strcmp(name, "v_missing")) {
        put_head(b, 2, 0, 1, 77, "ping");
    } else if (!strcmp(name, "v_str")) {
        put_byte(b, 0x83), put_s(b, "v"), put_s(b, "1");
        put_s(b, "id"), put_byte(b, 77), put_s(b, "op"), put_s(b, "ping");
    } else if (!strcmp(name, "v_2")) {
        put_byte(b, 0x83), put_s(b, "v"), put_byte(b, 2);
        put_s(b, "id"), put_byte(b, 77), put_s(b, "op"), put_s(b, "ping");
    } else if (!strcmp(name, "id_missing")) {
        put_head(b, 2, 1, 0, 0, "ping");
    } else if (!strcmp(name, "id_str")) {
        put_byte(b, 0x83), put_s(b, "v"), put_byte(b, 1);
        put_s(b, "id"), put_s(b, "77"), put_s(b, "op"), put_s(b, "ping");
    } else if (!strcmp(name, "id_negative")) {
        put_byte(b, 0x83), put_s(b, "v"), put_byte(b, 1);
        put_s(b, "id"), put_byte(b, 0xff), put_s(b, "op"), put_s(b, "ping");
    } else if (!strcmp(name, "op_missing")) {
        put_head(b, 2, 1, 1, 77, NULL);
    } else if (!strcmp(name, "op_int")) {
        put_head(b, 3, 1, 1, 77, NULL);
        put_s(b, "op"), put_byte(b, 3);
    } else if (!strcmp(name, "op_unknown")) {
        put_head(b, 3, 1, 1, 77, "teleport");
    } else if (!strcmp(name, "echo_no_data")) {
        put_head(b, 3, 1, 1, 77, "echo");
    } else if (!strcmp(name, "echo_data_str")) {
        put_head(b, 4, 1, 1, 77, "echo");
        put_s(b, "data"), put_s(b, "text");
    } else if (!strcmp(name, "vadd_mismatch")) {
        put_head(b, 5, 1, 1, 77, "vadd");
        put_bin(b, "a", 8), put_bin(b, "b", 12);
    } else if (!strcmp(name, "vadd_not4")) {
        put_head(b, 5, 1, 1, 77, "vadd");
        put_bin(b, "a", 6), put_bin(b, "b", 6);
    } else if (!strcmp(name, "vadd_empty")) {
        put_head(b, 5, 1, 1, 77, "vadd");
        put_bin(b, "a", 0), put_bin(b, "b", 0);
    } else if (!strcmp(name, "vadd_b_missing")) {
        put_head(b, 4, 1, 1, 77, "vadd");
        put_bin(b, "a", 8);
    } else if (!strcmp(name, "bin_4gib")) {
        put_head(b, 4, 1, 1, 77, "echo");
        put_s(b, "data");
        put(b, "\xc6\xff\xff\xff\xff", 5);
        put(b, "abc", 3);
    } else if (!strcmp(name, "nested_100000")) {
        for (int i = 0; i < 100000; i++)
            put_byte(b, 0x91);
        put_byte(b, 0x01);
    } else if (!strcmp(name, "nested_in_map")) {
        put_head(b, 4, 1, 1, 77, "ping");
        put_s(b, "x");
        for (int i = 0; i < 100000; i++)
            put_byte(b, 0x91);
        put_byte(b, 0x01);
    } else if (!strcmp(name, "million_keys")) {
        put_byte(b, 0xdf), put(b, "\x00\x0f\x42\x40", 4); /* map32 of 1 000 000 */
        for (uint32_t i = 0; i < 1000000; i++) {
            put_byte(b, 0xce);
            uint8_t k[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
            put(b, k, 4);
            put_byte(b, 0xc0);
        }
    } else if (!strcmp(name, "too_large")) {
        put_head(b, 4, 1, 1, 77, "echo");
        put_bin(b, "data", (size_t)9 << 20);
    } else if (!strcmp(name, "launch_grid_str")) {
        put_head(b, 6, 1, 1, 77, "launch");
        put_s(b, "grid"), put_s(b, "all");
        put_s(b, "block"), put_byte(b, 64), put_s(b, "smem"), put_byte(b, 0);
    } else if (!strcmp(name, "empty_frame")) {
        /* nothing */
    } else {
        fail_msg("no builder for %s", name);
    }
}

static const bad_case bad_cases[] = {
    {"garbage", "MALFORMED", "not msgpack", 0, 1},
    {"array", "MALFORMED", "must be a msgpack map", 0, 1},
    {"int", "MALFORMED", "must be a msgpack map", 0, 1},
    {"trailing", "MALFORMED", "trailing", 1, 1},
    {"frames", "MALFORMED", "2 body frames", 1, 2},
    {"empty_frame", "MALFORMED", "", 0, 1},
    {"v_missing", "UNSUPPORTED_VERSION", "`v` is missing", 1, 1},
    {"v_str", "UNSUPPORTED_VERSION", "`v` is a str", 1, 1},
    {"v_2", "UNSUPPORTED_VERSION", "`v`", 1, 1},
    {"id_missing", "INVALID_ARGUMENT", "`id` is missing", 0, 1},
    {"id_str", "INVALID_ARGUMENT", "`id` is a str", 0, 1},
    {"id_negative", "INVALID_ARGUMENT", "`id` is negative", 0, 1},
    {"op_missing", "UNKNOWN_OP", "`op` is missing", 1, 1},
    {"op_int", "UNKNOWN_OP", "must be a str", 1, 1},
    {"op_unknown", "UNKNOWN_OP", "\"teleport\"", 1, 1},
    {"echo_no_data", "INVALID_ARGUMENT", "`data` is missing", 1, 1},
    {"echo_data_str", "INVALID_ARGUMENT", "`data`", 1, 1},
    {"vadd_mismatch", "INVALID_ARGUMENT", "equal lengths", 1, 1},
    {"vadd_not4", "INVALID_ARGUMENT", "multiple of 4", 1, 1},
    {"vadd_empty", "INVALID_ARGUMENT", "empty", 1, 1},
    {"vadd_b_missing", "INVALID_ARGUMENT", "`b`", 1, 1},
    {"bin_4gib", "MALFORMED", "4294967295", 1, 1},
    {"nested_100000", "MALFORMED", "map", 0, 1},
    {"nested_in_map", "MALFORMED", "", 1, 1},
    {"million_keys", "MALFORMED", "limit", 0, 1},
    {"too_large", "TOO_LARGE", "8388608", 1, 1},
    {"launch_grid_str", "INVALID_ARGUMENT", "`grid`", 1, 1},
};

static void test_error_rows(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--max-message-bytes", "8M", NULL);
    buf fb = {0};
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *bc = &bad_cases[i];
        build(bc->name, &fb);
        rkc *c = client(&b);
        void *s = rkc_socket(c);
        for (int f = 0; f < bc->frames; f++)
            assert_true(zmq_send(s, fb.p, fb.n, f + 1 < bc->frames ? ZMQ_SNDMORE : 0) >= 0);
        rkc_reply r;
        int rc = rkc_recv(c, &r, TMO);
        if (rc) {
            fprintf(stderr, "%s: no reply (%s)\n", bc->name, rkc_errmsg(c));
            fail();
        }
        fprintf(stderr, "  %-16s -> %s: %s\n", bc->name, r.code, r.message);
        assert_false(r.ok);
        assert_string_equal(r.code, bc->code);
        assert_true(r.message[0] != 0);
        if (!strstr(r.message, bc->msg_has)) {
            fprintf(stderr, "%s: message lacks \"%s\"\n", bc->name, bc->msg_has);
            fail();
        }
        assert_int_equal(r.has_id, bc->has_id);
        if (bc->has_id)
            assert_int_equal(r.id, 77);
        else
            assert_non_null(rkc_reply_get(&r, "id")); /* present, nil */
        rkc_reply_free(&r);
        rkc_close(c);
        assert_alive(&b);
    }
    free(fb.p);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- envelopes ------------------------------------------------------- */

static void test_envelopes(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, NULL);
    /* REQ (keeps its empty delimiter) */
    rkc_options o = {.socket_type = RKC_REQ};
    rkc *c;
    assert_int_equal(rkc_connect(&c, b.ep, &o), 0);
    for (int i = 0; i < 20; i++) {
        rkc_reply r;
        rkc_request rq = {.op = i % 2 ? RKC_PING : RKC_ECHO, .data = "req", .len = 3};
        assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
        assert_true(r.ok);
        if (rq.op == RKC_PING)
            assert_string_equal(r.backend, "cpu");
        else
            assert_memory_equal(r.data, "req", 3);
        rkc_reply_free(&r);
    }
    /* a bad request on REQ is answered through the same envelope */
    assert_int_equal(rkc_send_raw(c, "\xc1", 1, TMO), 0);
    rkc_reply r;
    assert_int_equal(rkc_recv(c, &r, TMO), 0);
    assert_string_equal(r.code, "MALFORMED");
    rkc_reply_free(&r);
    rkc_close(c);

    /* DEALER emulating REQ: ["", body] comes back as ["", reply] */
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int tmo = TMO, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(s, b.ep), 0);
    buf fb = {0};
    put_head(&fb, 3, 1, 1, 5, "ping");
    zmq_send(s, "", 0, ZMQ_SNDMORE);
    zmq_send(s, fb.p, fb.n, 0);
    char f1[16], f2[256];
    assert_int_equal(zmq_recv(s, f1, sizeof f1, 0), 0);
    int more;
    size_t ml = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    assert_true(more);
    assert_true(zmq_recv(s, f2, sizeof f2, 0) > 0);
    /* plain DEALER: just the reply frame */
    zmq_send(s, fb.p, fb.n, 0);
    assert_true(zmq_recv(s, f2, sizeof f2, 0) > 0);
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    assert_false(more);
    free(fb.p);
    zmq_close(s);
    zmq_ctx_term(ctx);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- many in flight, out of order ------------------------------------ */

static uint32_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

static void test_pipeline(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, NULL);
    rkc *c = client(&b);
    enum { N = 1500 };
    uint64_t seed = 12345;
    static size_t sizes[N];
    static int ops[N];
    static uint8_t seen[N + 1];
    static uint8_t pay[200000];
    static float fa[50000], fb[50000];
    for (size_t i = 0; i < sizeof pay; i++)
        pay[i] = (uint8_t)(i * 31 + 7);
    for (int i = 0; i < 50000; i++)
        fa[i] = (float)i * 0.5f, fb[i] = 1.0f / (float)(i + 1);
    for (int i = 0; i < N; i++) {
        ops[i] = rng(&seed) % 4 == 0 ? RKC_VADD : RKC_ECHO;
        uint32_t r = rng(&seed);
        sizes[i] = ops[i] == RKC_VADD ? 1 + r % (r % 10 == 0 ? 50000 : 300)
                                      : (r % 20 == 0 ? r % 200000 : r % 400);
        rkc_request rq = {.op = ops[i], .data = pay, .len = sizes[i], .a = fa, .b = fb, .n = sizes[i]};
        uint64_t id;
        assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
        assert_int_equal(id, (uint64_t)i + 1);
    }
    int out_of_order = 0;
    uint64_t last = 0;
    for (int k = 0; k < N; k++) {
        rkc_reply r;
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        assert_true(r.ok);
        assert_true(r.has_id && r.id >= 1 && r.id <= N);
        assert_int_equal(seen[r.id], 0);
        seen[r.id] = 1;
        out_of_order += r.id < last;
        last = r.id;
        int i = (int)r.id - 1;
        if (ops[i] == RKC_ECHO) {
            assert_int_equal(r.len, sizes[i]);
            assert_memory_equal(r.data, pay, sizes[i]);
        } else {
            assert_int_equal(r.len, sizes[i] * 4);
            for (size_t j = 0; j < sizes[i]; j++) {
                float w = fa[j] + fb[j], g;
                memcpy(&g, r.data + 4 * j, 4);
                assert_memory_equal(&g, &w, 4);
            }
        }
        rkc_reply_free(&r);
    }
    fprintf(stderr, "  %d requests in flight, all answered once; %d came back out of order\n", N,
            out_of_order);
    rkc_close(c);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- launch and status ------------------------------------------------ */

static uint64_t map_uint(const msgpack_object *m, const char *k)
{
    const msgpack_object *o = rkc_map_get(m, k);
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    return o->via.u64;
}

static void test_launch_status(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, NULL);
    rkc *c = client(&b);
    rkc_reply r;
    rkc_request rq = {.op = RKC_LAUNCH, .grid = 8, .block = 128, .smem = 1024};
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    assert_string_equal(r.backend, "cpu");
    const msgpack_object *k = rkc_reply_get(&r, "kernel");
    assert_int_equal(map_uint(k, "grid"), 8);
    assert_int_equal(map_uint(k, "block"), 128);
    assert_int_equal(map_uint(k, "smem"), 1024);
    rkc_reply_free(&r);
    assert_alive(&b);
    rkc_request sq = {.op = RKC_STATUS};
    assert_int_equal(rkc_call(c, &sq, &r, TMO), 0);
    assert_true(r.ok);
    assert_string_equal(r.backend, "cpu");
    const msgpack_object *dev = rkc_reply_get(&r, "device");
    assert_non_null(dev);
    assert_int_equal(dev->type, MSGPACK_OBJECT_NIL);
    k = rkc_reply_get(&r, "kernel");
    assert_int_equal(map_uint(k, "grid"), 8);
    assert_int_equal(map_uint(k, "block"), 128);
    assert_int_equal(map_uint(k, "smem"), 1024);
    const msgpack_object *lim = rkc_reply_get(&r, "limits");
    map_uint(lim, "max_grid");
    map_uint(lim, "max_block");
    map_uint(lim, "max_smem");
    const msgpack_object *cn = rkc_reply_get(&r, "counters");
    assert_true(map_uint(cn, "requests") >= 4);
    assert_true(map_uint(cn, "replies") >= 3);
    map_uint(cn, "errors");
    assert_int_equal(map_uint(cn, "restarts"), 0);
    /* the start-up ring calibration: 10 000 round trips, p50 <= p99 */
    const msgpack_object *ring = rkc_reply_get(&r, "ring");
    assert_int_equal(map_uint(ring, "count"), 10000);
    assert_true(map_uint(ring, "p50_ns") > 0);
    assert_true(map_uint(ring, "p50_ns") <= map_uint(ring, "p99_ns"));
    rkc_reply_free(&r);
    rkc_close(c);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- back-pressure: BUSY ---------------------------------------------- */

static void test_busy(void **state)
{
    (void)state;
    bridge b;
    /* a 2 MiB arena holds one 128 Ki-element vadd (1.5 MiB) at a time */
    bridge_start(&b, "--arena-bytes", "2M", "--admission-ms", "0", NULL);
    rkc *c = client(&b);
    enum { N = 200, E = 131072 };
    float *a = malloc(E * 4), *bb = malloc(E * 4);
    for (int i = 0; i < E; i++)
        a[i] = (float)i, bb[i] = 0.25f;
    for (int i = 0; i < N; i++) {
        rkc_request rq = {.op = RKC_VADD, .a = a, .b = bb, .n = E};
        assert_int_equal(rkc_send(c, &rq, NULL, TMO), 0);
    }
    static uint8_t seen[N + 1];
    int busy = 0, ok = 0;
    for (int k = 0; k < N; k++) {
        rkc_reply r;
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        assert_true(r.has_id && r.id >= 1 && r.id <= N);
        assert_int_equal(seen[r.id]++, 0);
        if (r.ok) {
            ok++;
            assert_int_equal(r.len, E * 4);
            float g;
            memcpy(&g, r.data + 4 * 1000, 4);
            assert_true(g == 1000.25f);
        } else {
            assert_string_equal(r.code, "BUSY");
            assert_non_null(strstr(r.message, "admission time"));
            busy++;
        }
        rkc_reply_free(&r);
    }
    fprintf(stderr, "  %d answered, %d BUSY\n", ok, busy);
    assert_true(busy > 0);
    assert_true(ok > 0);
    free(a);
    free(bb);
    rkc_close(c);
    assert_alive(&b);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- SIGTERM: in flight answered, SHUTTING_DOWN, exit 0 --------------- */

static void test_shutdown(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--shutdown-grace-ms", "3000", NULL);
    rkc *c = client(&b);
    enum { N = 300, E = 65536 };
    float *a = calloc(E, 4), *bb = calloc(E, 4);
    static uint8_t pay[4096];
    /* everything is in the bridge's hands before the signal */
    rkc_request pq = {.op = RKC_PING};
    rkc_reply r;
    for (int i = 0; i < N; i++) {
        rkc_request rq = {.op = i % 6 ? RKC_ECHO : RKC_VADD, .data = pay, .len = sizeof pay,
                          .a = a, .b = bb, .n = E};
        assert_int_equal(rkc_send(c, &rq, NULL, TMO), 0);
    }
    kill(b.pid, SIGTERM);
    static uint8_t seen[N + 1];
    int ok = 0, sd = 0;
    for (int k = 0; k < N; k++) {
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        assert_true(r.has_id && r.id >= 1 && r.id <= N);
        assert_int_equal(seen[r.id]++, 0);
        if (r.ok)
            ok++;
        else {
            assert_string_equal(r.code, "SHUTTING_DOWN");
            sd++;
        }
        rkc_reply_free(&r);
    }
    fprintf(stderr, "  after SIGTERM: %d answered, %d SHUTTING_DOWN\n", ok, sd);
    /* a new request during the grace period */
    rkc *c2 = client(&b);
    assert_int_equal(rkc_call(c2, &pq, &r, TMO), 0);
    assert_false(r.ok);
    assert_string_equal(r.code, "SHUTTING_DOWN");
    rkc_reply_free(&r);
    rkc_close(c2);
    rkc_close(c);
    free(a);
    free(bb);
    int st = 0;
    int64_t deadline = now_ms() + 60000;
    pid_t w;
    while ((w = waitpid(b.pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
        usleep(10000);
    assert_int_equal(w, b.pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", b.dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- CURVE allow-list ------------------------------------------------- */

static void read_z85(const char *path, char out[41])
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, 41, f));
    fclose(f);
    out[40] = 0;
}

static void test_curve(void **state)
{
    (void)state;
    char dir[] = "/tmp/rkbk-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[512], p[256];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/allowed && %s --gen-keys %s/server >/dev/null && "
             "%s --gen-keys %s/allowed/alice >/dev/null && %s --gen-keys %s/mallory >/dev/null",
             dir, g_bridge_path, dir, g_bridge_path, dir, g_bridge_path, dir);
    assert_int_equal(system(cmd), 0);
    char srv_pub[41], alice[41], mallory[41];
    snprintf(p, sizeof p, "%s/server.pub", dir);
    read_z85(p, srv_pub);
    snprintf(p, sizeof p, "%s/allowed/alice.key", dir);
    read_z85(p, alice);
    snprintf(p, sizeof p, "%s/mallory.key", dir);
    read_z85(p, mallory);
    char skey[256], adir[256];
    snprintf(skey, sizeof skey, "%s/server.key", dir);
    snprintf(adir, sizeof adir, "%s/allowed", dir);
    bridge b;
    bridge_start(&b, "--curve-secret-key-file", skey, "--curve-allow-dir", adir, NULL);
    rkc_request rq = {.op = RKC_ECHO, .data = "secret", .len = 6};
    rkc_reply r;
    /* listed: works */
    rkc_options oa = {.server_public_key = srv_pub, .secret_key = alice};
    rkc *c;
    assert_int_equal(rkc_connect(&c, b.ep, &oa), 0);
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    assert_memory_equal(r.data, "secret", 6);
    rkc_reply_free(&r);
    rkc_close(c);
    /* unlisted: nothing comes back */
    rkc_options om = {.server_public_key = srv_pub, .secret_key = mallory};
    assert_int_equal(rkc_connect(&c, b.ep, &om), 0);
    assert_int_equal(rkc_call(c, &rq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    /* plain text: nothing either */
    assert_int_equal(rkc_connect(&c, b.ep, NULL), 0);
    assert_int_equal(rkc_call(c, &rq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    /* and the listed one still works */
    assert_int_equal(rkc_connect(&c, b.ep, &oa), 0);
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    rkc_close(c);
    assert_int_equal(bridge_stop(&b), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- flood: >= 100 clients pipelining --------------------------------- */

#ifndef __has_feature /* clang spells the sanitizers this way, gcc with macros */
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_BOUND_KB (768 * 1024) /* sanitizer shadow memory and quarantine */
#else
#define RSS_BOUND_KB (96 * 1024)  /* the bound the bridge states: 96 MiB */
#endif
#ifndef __has_feature
#define __has_feature(x) 0
#endif

enum { FLOOD_CLIENTS = 100, FLOOD_PER = 400, FLOOD_WINDOW = 32 };

typedef struct flood_arg {
    void *ctx;
    const char *ep;
    int idx;
    int answered, dup, bad;
} flood_arg;

static void *flood_main(void *p)
{
    flood_arg *f = p;
    void *s = zmq_socket(f->ctx, ZMQ_DEALER);
    int tmo = TMO, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, f->ep);
    uint8_t seen[FLOOD_PER + 1] = {0};
    uint64_t seed = 0x1234567ULL + (uint64_t)f->idx;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    uint8_t pay[3000];
    for (size_t i = 0; i < sizeof pay; i++)
        pay[i] = (uint8_t)(i ^ (size_t)f->idx);
    int sent = 0;
    while (f->answered < FLOOD_PER) {
        while (sent < FLOOD_PER && sent - f->answered < FLOOD_WINDOW) {
            size_t n = rng(&seed) % sizeof pay;
            sb.size = 0;
            msgpack_pack_map(&pk, 4);
            msgpack_pack_str_with_body(&pk, "v", 1), msgpack_pack_uint8(&pk, 1);
            msgpack_pack_str_with_body(&pk, "id", 2), msgpack_pack_uint64(&pk, (uint64_t)sent + 1);
            msgpack_pack_str_with_body(&pk, "op", 2), msgpack_pack_str_with_body(&pk, "echo", 4);
            msgpack_pack_str_with_body(&pk, "data", 4), msgpack_pack_bin_with_body(&pk, pay, n);
            if (zmq_send(s, sb.data, sb.size, 0) < 0)
                break;
            sent++;
        }
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, zmq_msg_data(&m), zmq_msg_size(&m), NULL) ==
            MSGPACK_UNPACK_SUCCESS) {
            const msgpack_object *id = rkc_map_get(&up.data, "id");
            const msgpack_object *ok = rkc_map_get(&up.data, "ok");
            const msgpack_object *d = rkc_map_get(&up.data, "data");
            if (id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER && id->via.u64 >= 1 &&
                id->via.u64 <= FLOOD_PER) {
                if (seen[id->via.u64]++)
                    f->dup++;
                if (!ok || !ok->via.boolean || !d || (d->via.bin.size && memcmp(d->via.bin.ptr, pay, d->via.bin.size))) {
                    if (f->bad++ == 0) { /* say what the first wrong reply was */
                        const msgpack_object *c = rkc_map_get(&up.data, "code");
                        const msgpack_object *e = rkc_map_get(&up.data, "message");
                        bool cs = c && c->type == MSGPACK_OBJECT_STR, es = e && e->type == MSGPACK_OBJECT_STR;
                        fprintf(stderr, "  flood client %d: request %" PRIu64 ": ok %d, code %.*s, data %s: %.*s\n",
                                f->idx, id->via.u64, ok && ok->type == MSGPACK_OBJECT_BOOLEAN ? ok->via.boolean : -1,
                                cs ? (int)c->via.str.size : 1, cs ? c->via.str.ptr : "-", !d ? "none" : "differs",
                                es ? (int)e->via.str.size : 0, es ? e->via.str.ptr : "");
                    }
                }
            } else {
                f->bad++;
            }
        } else {
            f->bad++;
        }
        msgpack_unpacked_destroy(&up);
        zmq_msg_close(&m);
        f->answered++;
    }
    msgpack_sbuffer_destroy(&sb);
    zmq_close(s);
    return NULL;
}

static long proc_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = strtol(line + strlen(key) + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static void test_flood(void **state)
{
    (void)state;
    bridge b;
    /* every request must come back ok: a generous admission time, so that
     * a sanitizer build on a loaded 2-core machine does not turn a slow
     * moment into BUSY (test_busy checks BUSY) */
    bridge_start(&b, "--admission-ms", "10000", NULL);
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, 4096);
    static flood_arg fa[FLOOD_CLIENTS];
    static pthread_t th[FLOOD_CLIENTS];
    long rss0 = proc_kb(b.pid, "VmRSS:");
    for (int i = 0; i < FLOOD_CLIENTS; i++) {
        fa[i] = (flood_arg){ctx, b.ep, i, 0, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, flood_main, &fa[i]), 0);
    }
    long answered = 0, dup = 0, bad = 0;
    for (int i = 0; i < FLOOD_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        answered += fa[i].answered;
        dup += fa[i].dup;
        bad += fa[i].bad;
    }
    long rss = proc_kb(b.pid, "VmRSS:"), hwm = proc_kb(b.pid, "VmHWM:");
    fprintf(stderr, "  flood: %d clients x %d requests (window %d): %ld answered, %ld duplicates, "
            "%ld wrong; bridge RSS %ld KiB at start, %ld KiB after, peak %ld KiB (bound %d KiB)\n",
            FLOOD_CLIENTS, FLOOD_PER, FLOOD_WINDOW, answered, dup, bad, rss0, rss, hwm, RSS_BOUND_KB);
    zmq_ctx_term(ctx);
    assert_int_equal(answered, (long)FLOOD_CLIENTS * FLOOD_PER);
    assert_int_equal(dup, 0);
    assert_int_equal(bad, 0);
    assert_true(hwm > 0 && hwm < RSS_BOUND_KB);
    assert_alive(&b);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- start-up validation ---------------------------------------------- */

static void test_startup(void **state)
{
    (void)state;
    /* bad options exit non-zero before binding */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --backend cpu --ring-slots 1000 --bind ipc:///tmp/rkbt-never 2>/dev/null", g_bridge_path);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_int_not_equal(access("/tmp/rkbt-never", F_OK), 0);
    snprintf(cmd, sizeof cmd, "%s --help >/dev/null", g_bridge_path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --backend gpu 2>/dev/null", g_bridge_path);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-rk-bridge [errors|envelopes|pipeline|launch|busy|"
                "shutdown|curve|flood|startup] [EXTRA rk-bridge OPTIONS...]\n", argv[0]);
        return 2;
    }
    g_bridge_path = argv[1];
    const char *only = argc > 2 ? argv[2] : NULL;
    for (int i = 3; i < argc && g_n_extra < 16; i++)
        g_extra[g_n_extra++] = argv[i];
    signal(SIGPIPE, SIG_IGN);
    struct { const char *name; struct CMUnitTest t; } all[] = {
        {"errors", cmocka_unit_test(test_error_rows)},
        {"envelopes", cmocka_unit_test(test_envelopes)},
        {"pipeline", cmocka_unit_test(test_pipeline)},
        {"launch", cmocka_unit_test(test_launch_status)},
        {"busy", cmocka_unit_test(test_busy)},
        {"shutdown", cmocka_unit_test(test_shutdown)},
        {"curve", cmocka_unit_test(test_curve)},
        {"flood", cmocka_unit_test(test_flood)},
        {"startup", cmocka_unit_test(test_startup)},
    };
    struct CMUnitTest sel[16];
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!only || !strcmp(only, all[i].name))
            sel[n++] = all[i].t;
    if (!n) {
        fprintf(stderr, "no test group %s\n", only);
        return 2;
    }
    return _cmocka_run_group_tests("bridge", sel, n, NULL, NULL);
}
