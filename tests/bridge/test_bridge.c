/* tests/bridge/test_bridge.c - rk-bridge over real sockets (suite 'bridge'):
 * the protocol's error rows, envelopes, pipelining, launch/status, BUSY,
 * SIGTERM with requests in flight, CURVE, the 100-client flood, start-up
 * validation. The other groups are in test_limits.c (sizes, proxies,
 * shutdown under load, logging, counters) and test_operator.c (ipc files,
 * remote binds, keys, file descriptors, admin operations, the command
 * line, systemd). main.c runs one group per meson test.
 *
 * Each group starts its own rk-bridge (--backend cpu) on an ipc:// endpoint
 * in a fresh temporary directory (no port clashes), drives it with the rkc
 * client library or raw ZeroMQ, and stops it with SIGTERM expecting exit 0. */
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

#include "harness.h"

/* ---- every error row ------------------------------------------------ */

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

/* Every row: its error, while another client's echoes are in flight (all
 * answered), then echo and vadd from a third; at the end the counters
 * account for every request (PROTOCOL.md, "Counters"). */
void test_error_rows(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--max-message-bytes", "8M", NULL);
    buf fb = {0};
    uint64_t malformed = 0, too_large = 0;
    const size_t rows = sizeof bad_cases / sizeof *bad_cases;
    for (size_t i = 0; i < rows; i++) {
        const bad_case *bc = &bad_cases[i];
        build(bc->name, &fb);
        rkc *by = bystander_send(&b, 1000 * (i + 1));
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
        malformed += !strcmp(bc->code, "MALFORMED");
        too_large += !strcmp(bc->code, "TOO_LARGE");
        rkc_reply_free(&r);
        rkc_close(c);
        bystander_check(by, 1000 * (i + 1));
        assert_alive(&b);
    }
    free(fb.p);
    rkc_reply r;
    status_get(&b, &r);
    const msgpack_object *n = rkc_reply_get(&r, "counters");
    /* each row: the bad request, the bystander's echoes, echo and vadd */
    const uint64_t sent = rows * (1 + BYSTANDER + 2) + 1;
    assert_int_equal(map_uint(n, "requests"), sent);
    assert_int_equal(map_uint(n, "replies"), sent - 1); /* all but this status */
    assert_int_equal(map_uint(n, "errors"), rows);
    assert_int_equal(map_uint(n, "malformed"), malformed);
    assert_int_equal(map_uint(n, "too_large"), too_large);
    assert_int_equal(map_uint(n, "dropped_replies") + map_uint(n, "unroutable") + map_uint(n, "in_flight") +
                     map_uint(n, "queued") + map_uint(n, "internal"), 0);
    rkc_reply_free(&r);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- envelopes ------------------------------------------------------- */

void test_envelopes(void **state)
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

void test_pipeline(void **state)
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

/* A launch no CUDA device could run is refused on every backend, naming
 * the value and the limit, and changes nothing (the CPU backend recorded
 * any shape: block 4096, smem 99999999 were ok: true); the maxima pass. */
static void launch_limits(rkc *c)
{
    static const struct { uint32_t grid, block, smem; const char *says; } bad[] = {
        {100000, 4096, 99999999, "block 4096 threads exceeds the per-block limit 1024 of every CUDA device"},
        {0, 256, 99999999, "shared memory 99999999 B exceeds the per-block limit 232448 B (227 KiB)"},
        {3000000000u, 256, 0, "grid 3000000000 blocks exceeds 2147483647"},
    };
    rkc_reply r;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rkc_request rq = {.op = RKC_LAUNCH, .grid = bad[i].grid, .block = bad[i].block, .smem = bad[i].smem};
        assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
        fprintf(stderr, "  launch %u/%u/%u -> %s %s\n", rq.grid, rq.block, rq.smem, r.code, r.message);
        assert_false(r.ok);
        assert_string_equal(r.code, "LAUNCH_INVALID");
        assert_non_null(strstr(r.message, bad[i].says));
        rkc_reply_free(&r);
    }
    /* beyond 32 bits: the limit named is the one that holds (it said
     * "exceeds 4294967295", as if that grid would run) */
    static const struct { const char *key, *says; } wide[] = {
        {"grid", "grid 4294967296 exceeds 2147483647"},
        {"block", "block 4294967296 exceeds 1024"},
        {"smem", "smem 4294967296 exceeds 232448"},
    };
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++) {
        buf fb = {0};
        put_head(&fb, 6, 1, 1, 40 + i, "launch");
        static const char *const keys[] = {"grid", "block", "smem"};
        for (int k = 0; k < 3; k++) {
            put_s(&fb, keys[k]);
            put_byte(&fb, 0xcf); /* uint64 4294967296 for the key under test, else 1 */
            const uint64_t v = !strcmp(keys[k], wide[i].key) ? (uint64_t)1 << 32 : 1;
            for (int j = 7; j >= 0; j--)
                put_byte(&fb, (uint8_t)(v >> (8 * j)));
        }
        assert_int_equal(rkc_send_raw(c, fb.p, fb.n, TMO), 0);
        free(fb.p);
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        fprintf(stderr, "  launch %s 2^32 -> %s %s\n", wide[i].key, r.code, r.message);
        assert_int_equal(r.id, 40 + i);
        assert_false(r.ok);
        assert_string_equal(r.code, "LAUNCH_INVALID");
        assert_non_null(strstr(r.message, wide[i].says));
        rkc_reply_free(&r);
    }
    rkc_request sq = {.op = RKC_STATUS};
    assert_int_equal(rkc_call(c, &sq, &r, TMO), 0);
    const msgpack_object *k = rkc_reply_get(&r, "kernel");
    assert_int_equal(map_uint(k, "block"), 128); /* test_launch_status' launch, unchanged */
    rkc_reply_free(&r);
    rkc_request max = {.op = RKC_LAUNCH, .grid = 2147483647u, .block = 1024, .smem = 232448};
    assert_int_equal(rkc_call(c, &max, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
}

void test_launch_status(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--allow-admin-ops", NULL);
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
    /* what PROTOCOL.md says each counts: counters.restarts the kernel's
     * relaunches (the launch above), worker.restarts the worker processes
     * started after the first (a launch relaunches inside the running one) */
    assert_int_equal(map_uint(cn, "restarts"), 1);
    assert_int_equal(map_uint(rkc_reply_get(&r, "worker"), "restarts"), 0);
    /* the start-up ring calibration: 10 000 round trips, p50 <= p99 */
    const msgpack_object *ring = rkc_reply_get(&r, "ring");
    assert_int_equal(map_uint(ring, "count"), 10000);
    assert_true(map_uint(ring, "p50_ns") > 0);
    assert_true(map_uint(ring, "p50_ns") <= map_uint(ring, "p99_ns"));
    rkc_reply_free(&r);
    launch_limits(c);
    rkc_close(c);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- back-pressure: BUSY ---------------------------------------------- */

void test_busy(void **state)
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
    /* BUSY needs requests arriving faster than the bridge serves them: a
     * slow client (a sanitizer build on a loaded machine) may not manage
     * it in one burst, so up to 5 bursts, each answered exactly once */
    int busy = 0, ok = 0;
    for (int round = 0; round < 5 && busy == 0; round++) {
        uint64_t first = 0, id;
        for (int i = 0; i < N; i++) {
            rkc_request rq = {.op = RKC_VADD, .a = a, .b = bb, .n = E};
            assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
            if (i == 0)
                first = id;
            assert_int_equal(id, first + (uint64_t)i);
        }
        static uint8_t seen[N + 1];
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < N; k++) {
            rkc_reply r;
            assert_int_equal(rkc_recv(c, &r, TMO), 0);
            assert_true(r.has_id && r.id >= first && r.id < first + N);
            assert_int_equal(seen[r.id - first]++, 0);
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

void test_shutdown(void **state)
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
    assert_int_equal(bridge_reap(&b, 60000), 0);
}

/* ---- CURVE allow-list ------------------------------------------------- */

void test_curve(void **state)
{
    (void)state;
    curve_keys k;
    curve_keys_make(&k);
    bridge b;
    bridge_start(&b, "--curve-secret-key-file", k.server_key, "--curve-allow-dir", k.allow_dir, NULL);
    rkc_request rq = {.op = RKC_ECHO, .data = "secret", .len = 6};
    rkc_reply r;
    /* listed: works */
    rkc_options oa = {.server_public_key = k.server_pub, .secret_key = k.alice};
    rkc *c;
    assert_int_equal(rkc_connect(&c, b.ep, &oa), 0);
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    assert_memory_equal(r.data, "secret", 6);
    rkc_reply_free(&r);
    rkc_close(c);
    /* unlisted: nothing comes back */
    rkc_options om = {.server_public_key = k.server_pub, .secret_key = k.mallory};
    assert_int_equal(rkc_connect(&c, b.ep, &om), 0);
    assert_int_equal(rkc_call(c, &rq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    /* plain text: nothing either */
    assert_int_equal(rkc_connect(&c, b.ep, NULL), 0);
    assert_int_equal(rkc_call(c, &rq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    /* 200 unlisted clients at once (each retries its handshake): the
     * refusals are logged at most 10 lines a second, the rest summed up */
    int64_t t0 = now_ms();
    static rkc *many[200];
    for (int i = 0; i < 200; i++) {
        assert_int_equal(rkc_connect(&many[i], b.ep, &om), 0);
        assert_int_equal(rkc_send(many[i], &rq, NULL, TMO), 0);
    }
    usleep(1500000);
    for (int i = 0; i < 200; i++)
        rkc_close(many[i]);
    /* and the listed one still works */
    assert_int_equal(rkc_connect(&c, b.ep, &oa), 0);
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    rkc_close(c);
    assert_int_equal(bridge_stop(&b), 0);
    int secs = (int)((now_ms() - t0) / 1000);
    int lines = count_str(g_last_err, "refused a client key");
    fprintf(stderr, "  %d CURVE refusal lines in %d s, %d summaries\n", lines, secs,
            count_str(g_last_err, "more \"CURVE key refused\" lines"));
    assert_true(lines >= 1 && lines <= 10 * (secs + 2));
    assert_true(count_str(g_last_err, "more \"CURVE key refused\" lines") >= 1);
    curve_keys_remove(&k);
}

/* ---- flood: >= 100 clients pipelining --------------------------------- */

#if RKBT_SANITIZER
#define RSS_BOUND_KB (768 * 1024) /* sanitizer shadow memory and quarantine */
#else
#define RSS_BOUND_KB (96 * 1024)  /* the bound the bridge states: 96 MiB */
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

void test_flood(void **state)
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

void test_startup(void **state)
{
    (void)state;
    /* bad options exit non-zero before binding */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --backend cpu --ring-slots 1000 --bind ipc:///tmp/rkbt-never 2>/dev/null", g_bridge_path);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2); /* a bad value: 2, as README promises */
    assert_int_not_equal(access("/tmp/rkbt-never", F_OK), 0);
    snprintf(cmd, sizeof cmd, "%s --help >/dev/null", g_bridge_path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --backend gpu 2>/dev/null", g_bridge_path);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

