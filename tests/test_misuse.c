/* test_misuse.c - the public API given what a careless or hostile caller
 * gives it: sizes that wrap, NULL where an object belongs, ring headers
 * that lie. Each call must answer with an error code (or do nothing, for
 * the void ones), never crash or corrupt memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <rk/rk.h>

#include "cpu_common.h"

static void assert_detail_has(const char *part)
{
    if (!strstr(rk_last_detail(), part))
        fail_msg("detail \"%s\" lacks \"%s\"", rk_last_detail(), part);
}

/* rk_runtime_open refuses c (CPU backend): -RK_EINVAL, *out left NULL,
 * the detail holding part */
static void assert_open_refused(rk_config *c, const char *part)
{
    c->backend = RK_BACKEND_CPU;
    rk_runtime *rt = (rk_runtime *)1;
    int rc = rk_runtime_open(&rt, c);
    if (rc == 0)
        rk_runtime_close(rt);
    assert_int_equal(rc, -RK_EINVAL);
    assert_null(rt);
    assert_detail_has(part);
}

/* iov lengths whose sum wraps past SIZE_MAX: the small sum passed the
 * max_payload check and the gather copied the real lengths (heap
 * corruption, then an abort) */
static void test_iov_lengths_wrap(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    static char buf[512];
    const rk_iov v[2] = {{buf, SIZE_MAX - 300}, {buf, 400}}; /* sum: 99 B */
    uint64_t id;
    assert_int_equal(rk_actor_sendv(a, RK_OP_ECHO, v, 2, 0, &id, 100), -RK_EMSGSIZE);
    assert_detail_has("iov[1]");
    rk_send_req q = {.type = RK_OP_ECHO, .iov = v, .iovcnt = 2};
    assert_int_equal(rk_actor_send_batch(a, &q, 1, NULL, 100), -RK_EMSGSIZE);
    assert_int_equal(rk_actor_inflight(a), 0);
    /* nothing went, nothing broke */
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, "ok", 2, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    assert_memory_equal(r.data, "ok", 2);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
}

/* An arena_size that wraps the region's size when rounded up to pages:
 * the region came out small, the allocator believed the arena and wrote
 * past the mapping (SIGSEGV at the first arena payload) */
static void test_arena_size_wraps(void **state)
{
    (void)state;
    const size_t sizes[] = {SIZE_MAX - 100, SIZE_MAX - 8191};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        rk_config c;
        rk_config_init(&c);
        c.arena_size = sizes[i];
        assert_open_refused(&c, "arena_size");
    }
}

/* A max_payload just past its limit, 2^32 - RK_ARENA_ALIGN: the detail
 * names that limit (it said "exceeds the 4 GiB" of a value below 4 GiB) */
static void test_max_payload_limit(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.max_payload = ((size_t)1 << 32) - RK_ARENA_ALIGN + 1;
    assert_open_refused(&c, "max_payload 4294967041 B exceeds 4294967040 B");
}

/* Supervision limits past what the supervisor can keep: a fault_limit of
 * billions was one calloc of that many times ("out of memory"), a
 * heartbeat_ms over ~17 million wrapped the worker's stamping period */
static void test_supervision_limits(void **state)
{
    (void)state;
    const struct {
        uint32_t hb, limit;
        const char *part;
    } cases[] = {{RK_HEARTBEAT_MS_MAX + 1, 10, "heartbeat_ms 3600001 exceeds 3600000"},
                 {4294967295u, 10, "heartbeat_ms 4294967295 exceeds"},
                 {1000, RK_FAULT_LIMIT_MAX + 1, "fault_limit 65537 exceeds 65536"},
                 {1000, 4000000000u, "fault_limit 4000000000 exceeds"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rk_config c;
        rk_config_init(&c);
        c.heartbeat_ms = cases[i].hb;
        c.fault_limit = cases[i].limit;
        assert_open_refused(&c, cases[i].part);
    }
    /* the limits themselves are fine */
    rk_config c;
    rk_config_init(&c);
    c.heartbeat_ms = RK_HEARTBEAT_MS_MAX;
    c.fault_limit = RK_FAULT_LIMIT_MAX;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, "ok", 2, 0, &r, 5000), 0);
    assert_memory_equal(r.data, "ok", 2);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
}

/* NULL where a runtime, an actor or an out pointer belongs */
static void test_null_arguments(void **state)
{
    (void)state;
    assert_int_equal(rk_runtime_health(NULL), -RK_EINVAL);
    assert_int_equal(rk_actor_inflight(NULL), 0);
    assert_null(rk_runtime_actor_find(NULL, "echo", NULL));
    assert_int_equal(rk_backend_parse("cpu", NULL), -RK_EINVAL);
    rk_info in;
    rk_stats st;
    rk_worker_info w;
    rk_runtime_info(NULL, &in);
    rk_runtime_stats(NULL, &st);
    rk_runtime_worker(NULL, &w);
    rk_config_init(NULL);
    rk_config c;
    rk_config_init(&c);
    rk_runtime *rt = test_open_cpu(&c);
    rk_runtime_info(rt, NULL);
    rk_runtime_stats(rt, NULL);
    rk_runtime_worker(rt, NULL);
    assert_int_equal(rk_runtime_health(rt), 0);
    rk_runtime_close(rt);
}

/* A ring header (from another process's memory) whose order is 32 or
 * more: 1u << order is undefined, and x86's shift by 32 % 32 made order
 * 32 pass for a ring of one slot, whose flags then never matched */
static void test_ring_check_order(void **state)
{
    (void)state;
    const size_t size = rk_ring_memsize(1, 64);
    /* aligned_alloc wants a multiple of the alignment */
    void *mem = aligned_alloc(RK_RING_ALIGN, (size + RK_RING_ALIGN - 1) & ~(size_t)(RK_RING_ALIGN - 1));
    assert_non_null(mem);
    assert_int_equal(rk_ring_init(mem, size, 1, 64), 0);
    assert_int_equal(rk_ring_check(mem, size), 0);
    rk_ring *r = mem;
    volatile uint32_t order = 32; /* (not folded at compile time) */
    r->order = order;
    assert_int_equal(rk_ring_check(mem, size), -RK_EPROTO);
    assert_detail_has("order 32");
    free(mem);
}

/* A reply or a buffer of another actor, given to this one: the first
 * request of every actor takes tag 0 and id 1, so tag and id alone took
 * it for this actor's own (rk_reply_release gave back the record of a
 * reply still held, rk_reply_detail answered for it, rk_actor_buf_send
 * sent this actor's own staged buffer in its place, rk_actor_buf_abandon
 * freed it under its holder) */
static void test_other_actors_reply_and_buf(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.actor_window = 1;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_open(rt, &b), 0);
    rk_reply ra, rb;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, "a", 1, 0, &ra, 5000), 0);
    assert_int_equal(rk_actor_call(b, RK_OP_ECHO, "b", 1, 0, &rb, 5000), 0);
    assert_int_equal(ra.tag_, rb.tag_);
    assert_int_equal(ra.id, rb.id);
    char why[64];
    assert_int_equal(rk_reply_detail(b, &ra, why, sizeof why), -RK_EINVAL);
    rk_reply_release(b, &ra); /* not b's: nothing */
    /* rb's record is still taken: a window of 1 has no room for another */
    assert_int_equal(rk_actor_send(b, RK_OP_ECHO, "x", 1, 0, NULL, 0), -RK_EBUSY);
    assert_memory_equal(rb.data, "b", 1);
    rk_reply_release(a, &ra);
    rk_reply_release(b, &rb);

    rk_buf ba, bb;
    assert_int_equal(rk_actor_buf_alloc(a, RK_OP_ECHO, 8, 0, &ba, 0), 0);
    assert_int_equal(rk_actor_buf_alloc(b, RK_OP_ECHO, 8, 0, &bb, 0), 0);
    assert_int_equal(ba.tag_, bb.tag_);
    memcpy(ba.data, "AAAAAAAA", 8);
    memcpy(bb.data, "BBBBBBBB", 8);
    uint64_t id;
    assert_int_equal(rk_actor_buf_send(a, &bb, &id, 1000), -RK_EINVAL);
    assert_detail_has("not a buffer");
    rk_send_req q = {.buf = &bb};
    assert_int_equal(rk_actor_send_batch(a, &q, 1, NULL, 1000), -RK_EINVAL);
    rk_actor_buf_abandon(a, &bb); /* not a's: nothing */
    assert_int_equal(rk_actor_inflight(a), 0);
    /* both buffers are still their actors' and go as written */
    rk_reply r;
    assert_int_equal(rk_actor_buf_send(a, &ba, &id, 1000), 0);
    assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
    assert_memory_equal(r.data, "AAAAAAAA", 8);
    rk_reply_release(a, &r);
    assert_int_equal(rk_actor_buf_send(b, &bb, &id, 1000), 0);
    assert_int_equal(rk_actor_recv(b, &r, 5000), 0);
    assert_memory_equal(r.data, "BBBBBBBB", 8);
    rk_reply_release(b, &r);
    rk_runtime_close(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iov_lengths_wrap),
        cmocka_unit_test(test_arena_size_wraps),
        cmocka_unit_test(test_max_payload_limit),
        cmocka_unit_test(test_supervision_limits),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_ring_check_order),
        cmocka_unit_test(test_other_actors_reply_and_buf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
