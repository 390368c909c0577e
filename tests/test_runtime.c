/* test_runtime.c - the public runtime and actor API on the CPU backend:
 * configuration errors, backend choice, every error path of send / recv /
 * call, inline and arena payloads, user actors, closing with requests in
 * flight, counters. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <rk/rk.h>

#include "cpu_common.h"

static rk_runtime *open_cpu(rk_config *cfg)
{
    rk_config c;
    if (!cfg) {
        rk_config_init(&c);
        cfg = &c;
    }
    return test_open_cpu(cfg);
}

static void expect_open_fails(rk_config *cfg, int code, const char *detail_part)
{
    rk_runtime *rt = (rk_runtime *)1;
    assert_int_equal(rk_runtime_open(&rt, cfg), code);
    assert_null(rt);
    if (!strstr(rk_last_detail(), detail_part))
        fail_msg("detail \"%s\" lacks \"%s\"", rk_last_detail(), detail_part);
}

static void test_config_errors(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.ring_slots = 1000;
    expect_open_fails(&c, -RK_EINVAL, "ring_slots 1000");
    rk_config_init(&c);
    c.slot_size = 64;
    expect_open_fails(&c, -RK_EINVAL, "slot_size 64 B");
    rk_config_init(&c);
    c.slot_size = 8192;
    expect_open_fails(&c, -RK_EINVAL, "slot_size 8192 B");
    rk_config_init(&c);
    c.actor_window = 0;
    expect_open_fails(&c, -RK_EINVAL, "actor_window 0");
    rk_config_init(&c);
    c.max_actors = 70000;
    expect_open_fails(&c, -RK_EINVAL, "max_actors 70000");
    rk_config_init(&c);
    c.backend = (rk_backend_kind)9;
    expect_open_fails(&c, -RK_EINVAL, "backend 9");
    /* shapes no CUDA device runs, on the CPU backend too (it records the
     * shape it is given) */
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    c.block = 2048;
    expect_open_fails(&c, -RK_EBLOCK, "block 2048 threads exceeds the per-block limit 1024");
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    c.smem = RK_SMEM_MAX + 1;
    expect_open_fails(&c, -RK_ESMEM, "shared memory 232449 B exceeds the per-block limit 232448 B");
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    c.grid = RK_GRID_MAX + 1u;
    expect_open_fails(&c, -RK_EGRID, "grid 2147483648 blocks exceeds 2147483647");
    rk_config_init(&c);
    c.n_actors = 1;
    expect_open_fails(&c, -RK_EINVAL, "actors is NULL");
    rk_actor_def bad = {.type = 12, .name = "low"};
    rk_config_init(&c);
    c.actors = &bad;
    c.n_actors = 1;
    expect_open_fails(&c, -RK_EINVAL, "type 12");
    assert_int_equal(rk_runtime_open(NULL, NULL), -RK_EINVAL);
    rk_backend_kind k;
    assert_int_equal(rk_backend_parse("gpu", &k), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "\"gpu\""));
    assert_int_equal(rk_backend_parse("cuda", &k), 0);
    assert_int_equal(k, RK_BACKEND_CUDA);
    assert_string_equal(rk_backend_name(RK_BACKEND_CPU), "cpu");
}

/* Without a GPU, auto must fall back to the CPU and say why; a forced cuda
 * must fail loudly instead. (On a GPU machine the gpu suite covers it.) */
static void test_backend_choice(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    rk_runtime *rt;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_info in;
    rk_runtime_info(rt, &in);
    if (in.backend == RK_BACKEND_CUDA) {
        rk_runtime_close(rt);
        skip();
    }
    assert_int_equal(in.backend, RK_BACKEND_CPU);
    assert_string_equal(in.backend_name, "cpu");
    assert_true(strlen(in.why) > 10);
    assert_int_equal(in.has_device, 0);
    assert_int_equal(in.msg_max, 124);
    rk_runtime_close(rt);

    c.backend = RK_BACKEND_CUDA;
    rt = (rk_runtime *)1;
    int rc = rk_runtime_open(&rt, &c);
    assert_true(rc < 0);
    assert_null(rt);
    assert_true(strlen(rk_last_detail()) > 10);
}

static void test_echo_sizes_inline_and_arena(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.arena_size = 8 << 20;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    rk_info in;
    rk_runtime_info(rt, &in);
    const size_t inline_max = in.msg_max - sizeof(rk_msg_hdr);
    size_t sizes[] = {0, 1, 3, 4, 5, inline_max - 1, inline_max, inline_max + 1, 4096, 1 << 20, 4 << 20};
    uint8_t *buf = malloc(4 << 20);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (size_t k = 0; k < sizes[i]; k++)
            buf[k] = (uint8_t)(k * 31 + i);
        rk_reply r;
        assert_int_equal(rk_actor_call(a, RK_OP_ECHO, buf, sizes[i], 0, &r, 5000), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.len, sizes[i]);
        assert_int_equal(r.type, RK_OP_ECHO);
        if (sizes[i])
            assert_memory_equal(r.data, buf, sizes[i]);
        rk_reply_release(a, &r);
    }
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, sizeof sizes / sizeof *sizes);
    assert_int_equal(st.replies, st.requests);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.arena_used, 0);
    assert_int_equal(st.arena_peak, 8u << 20); /* 4 MiB in + 4 MiB out */
    free(buf);
    rk_runtime_close(rt);
}

static void test_send_errors(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.max_payload = 1 << 20;
    c.actor_window = 4;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    char x[16] = {0};
    assert_int_equal(rk_actor_send(NULL, RK_OP_ECHO, x, 1, 0, NULL, 0), -RK_EINVAL);
    assert_int_equal(rk_actor_send(a, RK_OP_NOP, x, 1, 0, NULL, 0), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "type 0"));
    assert_int_equal(rk_actor_send(a, 100, x, 1, 0, NULL, 0), -RK_EINVAL);
    assert_int_equal(rk_actor_send(a, 4242, x, 1, 0, NULL, 0), -RK_ENOTSUP);
    assert_non_null(strstr(rk_last_detail(), "4242"));
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, NULL, 5, 0, NULL, 0), -RK_EINVAL);
    assert_int_equal(rk_actor_sendv(a, RK_OP_ECHO, NULL, 2, 0, NULL, 0), -RK_EINVAL);
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, x, (1 << 20) + 1, 0, NULL, 0), -RK_EMSGSIZE);
    assert_non_null(strstr(rk_last_detail(), "1048577 B exceeds max_payload 1048576 B"));
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, x, 8, (1 << 20) + 1, NULL, 0), -RK_EMSGSIZE);
    assert_int_equal(rk_actor_send(a, RK_OP_VADD, x, 12, 0, NULL, 0), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "12 B"));
    assert_int_equal(rk_actor_send(a, RK_OP_VADD, x, 0, 0, NULL, 0), -RK_EINVAL);
    /* nothing in flight: recv says so instead of waiting */
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 1000), -RK_EAGAIN);
    assert_int_equal(rk_actor_recv(a, NULL, 0), -RK_EINVAL);
    /* the window: 4 in flight, the 5th is refused, nothing is lost */
    uint64_t ids[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(rk_actor_send(a, RK_OP_ECHO, &i, sizeof i, 0, &ids[i], 1000), 0);
    assert_int_equal(rk_actor_inflight(a), 4);
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, x, 1, 0, NULL, 1000), -RK_EBUSY);
    assert_non_null(strstr(rk_last_detail(), "4 requests in flight"));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
        assert_int_equal(r.id, ids[i]); /* one CPU worker: FIFO */
        assert_int_equal(*(const int *)r.data, i);
        rk_reply_release(a, &r);
    }
    assert_int_equal(rk_actor_inflight(a), 0);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, 4);
    assert_int_equal(st.replies, 4);
    rk_runtime_close(rt);
}

static void test_arena_exhaustion_and_reuse(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.arena_size = 1 << 20;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    size_t n = 256 << 10; /* echo: 256 KiB in + 256 KiB out per request */
    uint8_t *buf = calloc(1, n);
    rk_reply r1, r2;
    buf[0] = 1;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, buf, n, 0, &r1, 5000), 0);
    buf[0] = 2;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, buf, n, 0, &r2, 5000), 0);
    /* both replies held: the arena is full; a send waits its timeout and fails */
    int64_t t0 = (int64_t)time(NULL);
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, buf, n, 0, NULL, 100), -RK_ENOSPC);
    assert_non_null(strstr(rk_last_detail(), "arena full"));
    assert_true((int64_t)time(NULL) - t0 < 5);
    /* too big for the arena at all: refused at once */
    uint8_t *big = calloc(1, 2 << 20);
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, big, 2 << 20, 0, NULL, -1), -RK_EMSGSIZE);
    free(big);
    /* the held replies are intact, and releasing them makes room */
    assert_int_equal(((const uint8_t *)r1.data)[0], 1);
    assert_int_equal(((const uint8_t *)r2.data)[0], 2);
    rk_reply_release(a, &r1);
    rk_reply_release(a, &r2);
    rk_reply_release(a, &r2); /* double release is ignored */
    buf[0] = 3;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, buf, n, 0, &r1, 5000), 0);
    assert_int_equal(((const uint8_t *)r1.data)[0], 3);
    rk_reply_release(a, &r1);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.arena_used, 0);
    free(buf);
    rk_runtime_close(rt);
}

/* a user actor: sum of uint32s, slow on request so recv can time out */
static int sum_actor(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len,
                     void *user)
{
    (void)user;
    if (in_len % 4)
        return -RK_EINVAL;
    uint64_t s = 0;
    const uint32_t *v = in;
    for (size_t i = 0; i < in_len / 4; i++)
        s += v[i];
    if (in_len == 4 && v[0] == 0xdead)
        usleep(300000);
    if (out_cap < 8)
        return -RK_EMSGSIZE;
    memcpy(out, &s, 8);
    *out_len = 8;
    return 0;
}
static size_t sum_reply(size_t in_len)
{
    (void)in_len;
    return 8;
}

static void test_user_actor_and_timeouts(void **state)
{
    (void)state;
    rk_actor_def defs[] = {{.type = RK_OP_USER + 1, .name = "sum", .cpu = sum_actor, .reply_size = sum_reply}};
    rk_config c;
    rk_config_init(&c);
    c.actors = defs;
    c.n_actors = 1;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    uint32_t v[1000];
    uint64_t want = 0;
    for (int i = 0; i < 1000; i++)
        want += v[i] = (uint32_t)i * 7919u;
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_USER + 1, v, sizeof v, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, 8);
    assert_memory_equal(r.data, &want, 8);
    rk_reply_release(a, &r);
    /* the actor's error comes back as the reply's status */
    assert_int_equal(rk_actor_call(a, RK_OP_USER + 1, v, 6, 0, &r, 5000), 0);
    assert_int_equal(r.status, -RK_EINVAL);
    assert_int_equal(r.len, 0);
    rk_reply_release(a, &r);
    /* the test-only ops need test_faults and a worker process to crash */
    assert_int_equal(rk_actor_call(a, RK_OP_FAULT, NULL, 0, 0, &r, 5000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "test-only"));
    assert_int_equal(rk_actor_call(a, RK_OP_HANG, NULL, 0, 0, &r, 5000), -RK_EINVAL);
    /* a slow reply: recv times out, then the reply still arrives once */
    uint32_t slow = 0xdead;
    uint64_t id;
    assert_int_equal(rk_actor_send(a, RK_OP_USER + 1, &slow, 4, 0, &id, 1000), 0);
    assert_int_equal(rk_actor_recv(a, &r, 10), -RK_ETIMEDOUT);
    assert_non_null(strstr(rk_last_detail(), "1 requests in flight"));
    assert_non_null(strstr(rk_last_detail(), "timeout of 10 ms")); /* the limit it ran into */
    assert_int_equal(rk_actor_recv(a, &r, 10000), 0);
    assert_int_equal(r.id, id);
    rk_reply_release(a, &r);
    assert_int_equal(rk_actor_recv(a, &r, 0), -RK_EAGAIN);
    /* two failed replies reaped together: each one's own detail names its
     * request (rk_last_detail() names the last one only) */
    uint64_t ids[2];
    assert_int_equal(rk_actor_send(a, RK_OP_USER + 1, v, 6, 0, &ids[0], 1000), 0);
    assert_int_equal(rk_actor_send(a, RK_OP_USER + 1, v, 10, 0, &ids[1], 1000), 0);
    rk_reply rb[2];
    int got = 0;
    while (got < 2) {
        const int k = rk_actor_recv_batch(a, rb + got, 2 - got, 5000);
        assert_true(k > 0);
        got += k;
    }
    for (int i = 0; i < 2; i++) {
        char why[256], want_id[64];
        assert_int_equal(rk_reply_detail(a, &rb[i], why, sizeof why), 0);
        snprintf(want_id, sizeof want_id, "request %llu ", (unsigned long long)rb[i].id);
        assert_non_null(strstr(why, want_id));
        assert_non_null(strstr(why, "RK_EINVAL"));
    }
    assert_true(rb[0].id != rb[1].id);
    rk_reply_release_batch(a, rb, 2);
    char why[64];
    assert_int_equal(rk_reply_detail(a, &rb[0], why, sizeof why), -RK_EINVAL); /* released */
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.errors, 3);
    rk_runtime_close(rt);
}

/* call() waits for its own reply; replies that overtake it stay queued for
 * recv, in order, each exactly once */
static void test_call_keeps_other_replies(void **state)
{
    (void)state;
    rk_runtime *rt = open_cpu(NULL);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    uint64_t ids[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_actor_send(a, RK_OP_ECHO, &i, sizeof i, 0, &ids[i], 1000), 0);
    int x = 42;
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), 0);
    assert_int_equal(*(const int *)r.data, 42);
    rk_reply_release(a, &r);
    assert_int_equal(rk_actor_inflight(a), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
        assert_int_equal(r.id, ids[i]);
        rk_reply_release(a, &r);
    }
    assert_int_equal(rk_actor_recv(a, &r, 0), -RK_EAGAIN);
    rk_runtime_close(rt);
}

/* A reply released twice (or through a copy) gives nothing else back: a
 * later reply that took its record stays readable until its own release
 * (until 2026-11-26 the second release freed it: its data could be
 * overwritten and its record handed to a third request). */
static void test_double_release(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.actor_window = 1; /* every request takes the same record */
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    int x = 1, y = 2;
    rk_reply r1, copy, r2;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r1, 5000), 0);
    copy = r1;
    rk_reply_release(a, &r1);
    rk_reply_release(a, &r1); /* twice: nothing */
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &y, sizeof y, 0, &r2, 5000), 0);
    rk_reply_release(a, &copy); /* the first reply's copy: not r2's record */
    /* r2's record is still taken: a window of 1 has no room for another */
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, &x, sizeof x, 0, NULL, 0), -RK_EBUSY);
    assert_int_equal(*(const int *)r2.data, 2);
    rk_reply_release(a, &r2);
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r1, 5000), 0);
    rk_reply_release(a, &r1);
    rk_runtime_close(rt);
}

static void test_actor_limits_and_close_inflight(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.max_actors = 3;
    c.arena_size = 4 << 20;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a[3], *extra;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_actor_open(rt, &a[i]), 0);
    assert_int_equal(rk_actor_open(rt, &extra), -RK_EBUSY);
    assert_non_null(strstr(rk_last_detail(), "3 actor slots"));
    extra = (rk_actor *)&extra;
    assert_int_equal(rk_actor_open(NULL, &extra), -RK_EINVAL);
    assert_null(extra); /* NULL on every failure */
    /* close with arena requests in flight: their space comes back when the
     * replies arrive, and the slot is reusable */
    uint8_t *buf = calloc(1, 512 << 10);
    for (int i = 0; i < 2; i++)
        assert_int_equal(rk_actor_send(a[0], RK_OP_ECHO, buf, 512 << 10, 0, NULL, 5000), 0);
    rk_actor_close(a[0]);
    /* another actor's wait routes the orphaned replies */
    rk_reply r;
    assert_int_equal(rk_actor_call(a[1], RK_OP_ECHO, buf, 16, 0, &r, 5000), 0);
    rk_reply_release(a[1], &r);
    rk_stats st;
    for (int tries = 0; tries < 500; tries++) {
        rk_runtime_stats(rt, &st);
        if (st.arena_used == 0)
            break;
        assert_int_equal(rk_actor_call(a[1], RK_OP_ECHO, buf, 16, 0, &r, 5000), 0);
        rk_reply_release(a[1], &r);
        usleep(1000);
    }
    assert_int_equal(st.arena_used, 0);
    assert_int_equal(rk_actor_open(rt, &extra), 0);
    /* close the runtime with requests in flight and replies unreleased */
    assert_int_equal(rk_actor_send(extra, RK_OP_ECHO, buf, 512 << 10, 0, NULL, 5000), 0);
    assert_int_equal(rk_actor_call(a[2], RK_OP_ECHO, buf, 100, 0, &r, 5000), 0);
    free(buf);
    rk_runtime_close(rt); /* no leak under ASan */
}

/* A send that waits for arena space held by a closed actor's requests
 * gets it once their replies are in: the waiting sender routes them (no
 * other thread waits for a reply here) and the space comes back, as
 * rk_actor_close promises; before, the send waited out its timeout with
 * the replies unrouted, -RK_ENOSPC (-1: for ever). */
static void test_arena_wait_reclaims_closed(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.arena_size = 1 << 20;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_open(rt, &b), 0);
    size_t n = 256 << 10; /* echo: 256 KiB in + 256 KiB out: two fill the arena */
    uint8_t *buf = calloc(1, n);
    for (int i = 0; i < 2; i++)
        assert_int_equal(rk_actor_send(a, RK_OP_ECHO, buf, n, 0, NULL, 5000), 0);
    rk_actor_close(a);
    rk_reply r;
    int rc = rk_actor_call(b, RK_OP_ECHO, buf, n, 0, &r, 3000);
    if (rc)
        fail_msg("a send after the closed actor's requests: %s: %s", rk_err_name(rc), rk_last_detail());
    assert_int_equal(r.len, n);
    rk_reply_release(b, &r);
    free(buf);
    rk_runtime_close(rt);
}

static void test_relaunch_cpu_records(void **state)
{
    (void)state;
    rk_runtime *rt = open_cpu(NULL);
    assert_int_equal(rk_runtime_relaunch(rt, 7, 128, 1024), 0);
    rk_info in;
    rk_runtime_info(rt, &in);
    assert_int_equal(in.grid, 7);
    assert_int_equal(in.block, 128);
    assert_int_equal(in.smem, 1024);
    /* a shape no device runs is refused and changes nothing; the most
     * that any may is recorded */
    const uint32_t bad[][3] = {{7, 4096, 0}, {7, 128, RK_SMEM_MAX + 1}, {RK_GRID_MAX + 1u, 128, 0}};
    const int code[] = {RK_EBLOCK, RK_ESMEM, RK_EGRID};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rk_runtime_relaunch(rt, bad[i][0], bad[i][1], bad[i][2]), -code[i]);
        rk_runtime_info(rt, &in);
        assert_int_equal(in.grid, 7);
        assert_int_equal(in.block, 128);
    }
    assert_int_equal(rk_runtime_relaunch(rt, RK_GRID_MAX, RK_BLOCK_MAX, RK_SMEM_MAX), 0);
    assert_int_equal(rk_runtime_relaunch(rt, 7, 128, 1024), 0);
    assert_int_equal(rk_runtime_health(rt), 0);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, "hi", 2, 0, &r, 5000), 0);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
    rk_runtime_close(NULL);
    rk_actor_close(NULL);
}

/* Many actors on many threads through one runtime: each gets exactly its
 * own replies. */
typedef struct {
    rk_runtime *rt;
    int id;
    int n;
    int bad;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    rk_actor *a;
    if (rk_actor_open(w->rt, &a)) {
        w->bad = 1;
        return NULL;
    }
    for (int i = 0; i < w->n; i++) {
        int msg[2] = {w->id, i};
        rk_reply r;
        if (rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 10000) || r.status ||
            r.len != sizeof msg || memcmp(r.data, msg, sizeof msg))
            w->bad++;
        else
            rk_reply_release(a, &r);
    }
    rk_actor_close(a);
    return NULL;
}

static void test_actors_on_threads(void **state)
{
    (void)state;
    rk_runtime *rt = open_cpu(NULL);
    enum { T = 6 };
    pthread_t t[T];
    worker_arg w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker_arg){rt, i, 5000, 0};
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.replies, T * 5000);
    rk_runtime_close(rt);
}

/* Zero-copy sends: fill in place (inline staging or arena), send, and the
 * reply is the same as a copying send's; abandoned buffers come back. */
static void test_zero_copy_buffers(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.arena_size = 4 << 20;
    c.actor_window = 4;
    rk_runtime *rt = open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    size_t sizes[] = {8, 96, 4096, 1 << 20};
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k] / 8; /* vadd of n floats: payload a || b */
        rk_buf b;
        assert_int_equal(rk_actor_buf_alloc(a, RK_OP_VADD, n * 8, 0, &b, 1000), 0);
        assert_non_null(b.data);
        assert_int_equal(b.len, n * 8);
        assert_int_equal((uintptr_t)b.data % 4, 0);
        float *x = b.data;
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)i;
            x[n + i] = 0.5f;
        }
        uint64_t id;
        assert_int_equal(rk_actor_buf_send(a, &b, &id, 1000), 0);
        assert_null(b.data);
        assert_int_equal(rk_actor_buf_send(a, &b, &id, 1000), -RK_EINVAL); /* sent already */
        rk_reply r;
        assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
        assert_int_equal(r.id, id);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.len, n * 4);
        const float *cv = r.data;
        for (size_t i = 0; i < n; i++)
            assert_true(cv[i] == (float)i + 0.5f);
        rk_reply_release(a, &r);
    }
    /* abandoned buffers give their window slot and arena block back */
    rk_buf held[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 512 << 10, 0, &held[i], 0), 0);
    rk_buf more;
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 8, 0, &more, 0), -RK_EBUSY);
    for (int i = 0; i < 4; i++)
        rk_actor_buf_abandon(a, &held[i]);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.arena_used, 0);
    assert_int_equal(st.requests, 4);
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 8 << 20, 0, &more, 0), -RK_EMSGSIZE);
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_VADD, 12, 0, &more, 0), -RK_EINVAL);
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 8, 0, NULL, 0), -RK_EINVAL);
    /* closing with a staged buffer frees it (ASan checks) */
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 1 << 20, 0, &more, 0), 0);
    rk_actor_close(a);
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.arena_used, 0);
    rk_runtime_close(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_backend_choice),
        cmocka_unit_test(test_echo_sizes_inline_and_arena),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_arena_exhaustion_and_reuse),
        cmocka_unit_test(test_arena_wait_reclaims_closed),
        cmocka_unit_test(test_user_actor_and_timeouts),
        cmocka_unit_test(test_call_keeps_other_replies),
        cmocka_unit_test(test_double_release),
        cmocka_unit_test(test_actor_limits_and_close_inflight),
        cmocka_unit_test(test_relaunch_cpu_records),
        cmocka_unit_test(test_actors_on_threads),
        cmocka_unit_test(test_zero_copy_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
