/* test_ring.c - the ring on its own: layout errors, empty, full, exact
 * capacity, index wraparound, every slot size, torn messages, many
 * producers, the consumer's sleep and doorbell. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <rk/rk.h>

static void *ring_alloc(uint32_t slots, uint32_t slot_size, size_t *size)
{
    *size = rk_ring_memsize(slots, slot_size);
    assert_true(*size > 0);
    void *m = aligned_alloc(RK_RING_ALIGN, (*size + RK_RING_ALIGN - 1) / RK_RING_ALIGN * RK_RING_ALIGN);
    assert_non_null(m);
    assert_int_equal(rk_ring_init(m, *size, slots, slot_size), 0);
    return m;
}

static void test_memsize_and_init_errors(void **state)
{
    (void)state;
    assert_int_equal(rk_ring_memsize(0, 256), 0);
    assert_int_equal(rk_ring_memsize(3, 256), 0);
    assert_int_equal(rk_ring_memsize(8, 32), 0);
    assert_int_equal(rk_ring_memsize(8, 96), 0);
    assert_int_equal(rk_ring_memsize(8, 8192), 0);
    assert_int_equal(rk_ring_memsize(8, 256), RK_RING_HDR_BYTES + 8 * 256);

    size_t size = rk_ring_memsize(8, 256);
    char *m = aligned_alloc(RK_RING_ALIGN, size + RK_RING_ALIGN);
    assert_int_equal(rk_ring_init(m + 8, size, 8, 256), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "aligned"));
    assert_int_equal(rk_ring_init(m, size, 6, 256), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "slots 6"));
    assert_int_equal(rk_ring_init(m, size, 8, 100), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "slot size 100"));
    assert_int_equal(rk_ring_init(m, size - 1, 8, 256), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "below"));
    assert_int_equal(rk_ring_init(NULL, size, 8, 256), -RK_EINVAL);
    /* a failed init leaves no ring behind */
    memset(m, 0, size);
    assert_int_equal(rk_ring_check((rk_ring *)m, size), -RK_EPROTO);
    assert_int_equal(rk_ring_init(m, size, 8, 256), 0);
    assert_int_equal(rk_ring_check((rk_ring *)m, size), 0);
    assert_int_equal(rk_ring_check((rk_ring *)m, size - 1), -RK_EPROTO);
    ((rk_ring *)m)->order = 5; /* corrupt constants */
    assert_int_equal(rk_ring_check((rk_ring *)m, size), -RK_EPROTO);
    free(m);
}

static void test_layout_offsets(void **state)
{
    (void)state;
    /* the device mirrors these offsets: they are part of the contract */
    assert_int_equal(offsetof(rk_ring, flags), 16);
    assert_int_equal(offsetof(rk_ring, prod_tail), 128);
    assert_int_equal(offsetof(rk_ring, cons_head), 256);
    assert_int_equal(offsetof(rk_ring, cons_sleeping), 384);
    assert_int_equal(sizeof(rk_ring), RK_RING_HDR_BYTES);
    assert_int_equal(sizeof(rk_msg_hdr), 24);
    assert_int_equal(sizeof(rk_arena_ref), 24);
}

static void test_empty(void **state)
{
    (void)state;
    size_t size;
    rk_ring *r = ring_alloc(4, 128, &size);
    uint8_t buf[64];
    uint32_t len = 99;
    assert_int_equal(rk_ring_sc_peek(r, buf, sizeof buf, &len), -RK_EAGAIN);
    assert_int_equal(rk_ring_sc_dequeue(r, buf, sizeof buf, &len), -RK_EAGAIN);
    assert_int_equal(len, 99); /* untouched */
    assert_int_equal(rk_ring_count(r), 0);
    /* zero-length messages are messages */
    assert_int_equal(rk_ring_mp_enqueue(r, NULL, 0), 0);
    assert_int_equal(rk_ring_sc_dequeue(r, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(rk_ring_sc_peek(r, buf, sizeof buf, &len), -RK_EAGAIN);
    free(r);
}

static void test_full_exact_capacity(void **state)
{
    (void)state;
    for (uint32_t slots = 1; slots <= 64; slots *= 2) {
        size_t size;
        rk_ring *r = ring_alloc(slots, 128, &size);
        for (uint32_t i = 0; i < slots; i++)
            assert_int_equal(rk_ring_mp_enqueue(r, &i, sizeof i), 0);
        assert_int_equal(rk_ring_count(r), slots);
        uint32_t x = 1234, len;
        assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), -RK_EAGAIN);
        assert_int_equal(rk_ring_sp_enqueue(r, &x, sizeof x), -RK_EAGAIN);
        /* one out, exactly one more in, and FIFO order throughout */
        uint32_t v;
        assert_int_equal(rk_ring_sc_dequeue(r, &v, sizeof v, &len), 0);
        assert_int_equal(v, 0);
        assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), 0);
        assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), -RK_EAGAIN);
        for (uint32_t i = 1; i < slots; i++) {
            assert_int_equal(rk_ring_sc_dequeue(r, &v, sizeof v, &len), 0);
            assert_int_equal(v, i);
        }
        assert_int_equal(rk_ring_sc_dequeue(r, &v, sizeof v, &len), 0);
        assert_int_equal(v, 1234);
        assert_int_equal(rk_ring_sc_dequeue(r, &v, sizeof v, &len), -RK_EAGAIN);
        free(r);
    }
}

/* Positions are free-running u64s and flags are u32 laps: start just below
 * 2^64 so both wrap during the test. Every slot is primed with the flag of
 * the lap before, as a ring that really ran that long would hold. */
static void test_index_wraparound(void **state)
{
    (void)state;
    const uint32_t slots = 8, ss = 128;
    size_t size;
    rk_ring *r = ring_alloc(slots, ss, &size);
    uint64_t start = UINT64_MAX - 3 * slots + 3;
    for (uint64_t p = start - slots; p != start; p++) {
        uint64_t *slot = rk_ring_slot(r, p);
        for (uint32_t l = 0; l < ss / 8; l++)
            slot[l] = (uint64_t)rk_ring_flag(r, p) << 32 | 0xdeadu;
    }
    r->prod_tail = r->cons_head = start;
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 10 * (int)slots; round++) {
        /* fill a little more than we drain to hit full on the way */
        for (int k = 0; k < 3; k++) {
            int rc = rk_ring_mp_enqueue(r, &next_in, sizeof next_in);
            if (rc == -RK_EAGAIN)
                break;
            assert_int_equal(rc, 0);
            next_in++;
        }
        for (int k = 0; k < 2; k++) {
            uint64_t v;
            uint32_t len;
            if (rk_ring_sc_dequeue(r, &v, sizeof v, &len) != 0)
                break;
            assert_int_equal(len, sizeof v);
            assert_int_equal(v, next_out);
            next_out++;
        }
    }
    uint64_t v;
    uint32_t len;
    while (rk_ring_sc_dequeue(r, &v, sizeof v, &len) == 0)
        assert_int_equal(v, next_out++);
    assert_int_equal(next_in, next_out);
    assert_true(r->cons_head < start); /* the u64 position really wrapped */
    assert_true(next_in > 3 * slots);
    free(r);
}

static void test_every_slot_size(void **state)
{
    (void)state;
    for (uint32_t ss = RK_RING_SLOT_MIN; ss <= RK_RING_SLOT_MAX; ss *= 2) {
        size_t size;
        rk_ring *r = ring_alloc(4, ss, &size);
        uint32_t max = rk_ring_msg_max(r);
        assert_int_equal(max, ss / 2 - 4);
        uint8_t *in = malloc(max + 1), *out = malloc(max + 1);
        for (uint32_t len = 0; len <= max; len += (len < 16 ? 1 : 13)) {
            for (uint32_t i = 0; i < len; i++)
                in[i] = (uint8_t)(rand() & 0xff);
            assert_int_equal(rk_ring_mp_enqueue(r, in, len), 0);
            uint32_t got;
            assert_int_equal(rk_ring_sc_dequeue(r, out, max, &got), 0);
            assert_int_equal(got, len);
            assert_memory_equal(in, out, len);
        }
        /* exactly the maximum, then one byte more */
        assert_int_equal(rk_ring_sp_enqueue(r, in, max), 0);
        uint32_t got;
        assert_int_equal(rk_ring_sc_dequeue(r, out, max, &got), 0);
        assert_int_equal(got, max);
        assert_int_equal(rk_ring_mp_enqueue(r, in, max + 1), -RK_EMSGSIZE);
        assert_int_equal(rk_ring_sp_enqueue(r, in, max + 1), -RK_EMSGSIZE);
        assert_int_equal(rk_ring_sc_peek(r, out, max, &got), -RK_EAGAIN); /* nothing was written */
        free(in);
        free(out);
        free(r);
    }
}

static void test_small_buffer_keeps_message(void **state)
{
    (void)state;
    size_t size;
    rk_ring *r = ring_alloc(4, 256, &size);
    char msg[40] = "a message that does not fit";
    assert_int_equal(rk_ring_mp_enqueue(r, msg, sizeof msg), 0);
    char small[8], big[64];
    uint32_t len;
    assert_int_equal(rk_ring_sc_peek(r, small, sizeof small, &len), -RK_EMSGSIZE);
    assert_int_equal(rk_ring_sc_dequeue(r, small, sizeof small, &len), -RK_EMSGSIZE);
    assert_int_equal(rk_ring_sc_dequeue(r, big, sizeof big, &len), 0);
    assert_int_equal(len, sizeof msg);
    assert_memory_equal(big, msg, sizeof msg);
    free(r);
}

/* A consumer must not accept a message until every line it needs carries
 * this lap's flag: lines may land in any order (PCIe, another core). */
static void test_torn_message_not_accepted(void **state)
{
    (void)state;
    size_t size;
    rk_ring *r = ring_alloc(4, 128, &size);
    uint8_t msg[20];
    for (int i = 0; i < 20; i++)
        msg[i] = (uint8_t)(i + 1);
    assert_int_equal(rk_ring_mp_enqueue(r, msg, sizeof msg), 0);
    uint64_t *slot = rk_ring_slot(r, 0);
    uint64_t saved = slot[3];
    slot[3] = saved & 0xffffffffu; /* line 3 still from "lap 0" */
    uint8_t out[64];
    uint32_t len;
    assert_int_equal(rk_ring_sc_peek(r, out, sizeof out, &len), -RK_EAGAIN);
    slot[3] = saved;
    assert_int_equal(rk_ring_sc_peek(r, out, sizeof out, &len), 0);
    assert_memory_equal(out, msg, sizeof msg);
    /* a length word beyond the slot is corruption, not a message */
    rk_ring_sc_release(r);
    assert_int_equal(rk_ring_mp_enqueue(r, msg, 4), 0);
    slot = rk_ring_slot(r, 1);
    slot[0] = (slot[0] & 0xffffffff00000000ull) | 1000u;
    assert_int_equal(rk_ring_sc_peek(r, out, sizeof out, &len), -RK_EPROTO);
    free(r);
}

typedef struct {
    rk_ring *r;
    uint32_t id;
    uint32_t n;
} prod_arg;

static void *producer(void *p)
{
    prod_arg *a = p;
    for (uint32_t i = 0; i < a->n; i++) {
        uint32_t m[2] = {a->id, i};
        while (rk_ring_mp_enqueue(a->r, m, sizeof m) == -RK_EAGAIN)
            ;
    }
    return NULL;
}

static void test_many_producers(void **state)
{
    (void)state;
    enum { P = 4, N = 100000 };
    size_t size;
    rk_ring *r = ring_alloc(64, 128, &size);
    pthread_t t[P];
    prod_arg args[P];
    for (uint32_t i = 0; i < P; i++) {
        args[i] = (prod_arg){r, i, N};
        pthread_create(&t[i], NULL, producer, &args[i]);
    }
    uint32_t next[P] = {0};
    for (uint32_t got = 0; got < P * N;) {
        uint32_t m[2], len;
        int rc = rk_ring_sc_dequeue(r, m, sizeof m, &len);
        if (rc == -RK_EAGAIN)
            continue;
        assert_int_equal(rc, 0);
        assert_int_equal(len, sizeof m);
        assert_true(m[0] < P);
        assert_int_equal(m[1], next[m[0]]); /* per-producer order, no loss, no duplicate */
        next[m[0]]++;
        got++;
    }
    for (int i = 0; i < P; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(next[i], N);
    }
    free(r);
}

static void *late_producer(void *p)
{
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint32_t x = 77;
    rk_ring_mp_enqueue(p, &x, sizeof x);
    return NULL;
}

static void test_sleep_woken_by_doorbell(void **state)
{
    (void)state;
    size_t size;
    rk_ring *r = ring_alloc(4, 128, &size);
    pthread_t t;
    pthread_create(&t, NULL, late_producer, r);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t v, len;
    /* a 20 s timeout: only the doorbell can end this wait in time */
    while (rk_ring_sc_dequeue(r, &v, sizeof v, &len) == -RK_EAGAIN)
        rk_ring_sc_sleep(r, 20LL * 1000 * 1000 * 1000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    assert_int_equal(v, 77);
    assert_true(t1.tv_sec - t0.tv_sec < 10);
    assert_int_equal(r->cons_sleeping, 0);
    free(r);
}

/* The doorbell: rung when the consumer sleeps, skipped when the owner
 * says the consumer never sleeps (a GPU consumer polls). */
static void test_doorbell_and_no_sleep_flag(void **state)
{
    (void)state;
    size_t size;
    rk_ring *r = ring_alloc(4, 128, &size);
    uint32_t x = 1, len;
    assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), 0);
    assert_int_equal(r->doorbell, 0); /* nobody sleeps: no ring */
    r->cons_sleeping = 1;             /* as rk_ring_sc_sleep leaves it */
    assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), 0);
    assert_int_equal(r->doorbell, 1);
    assert_int_equal(rk_ring_sp_enqueue(r, &x, sizeof x), 0);
    assert_int_equal(r->doorbell, 2);
    r->flags |= RK_RING_F_NO_SLEEP;
    assert_int_equal(rk_ring_mp_enqueue(r, &x, sizeof x), 0);
    assert_int_equal(r->doorbell, 2);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rk_ring_sc_dequeue(r, &x, sizeof x, &len), 0);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memsize_and_init_errors),
        cmocka_unit_test(test_layout_offsets),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_full_exact_capacity),
        cmocka_unit_test(test_index_wraparound),
        cmocka_unit_test(test_every_slot_size),
        cmocka_unit_test(test_small_buffer_keeps_message),
        cmocka_unit_test(test_torn_message_not_accepted),
        cmocka_unit_test(test_many_producers),
        cmocka_unit_test(test_sleep_woken_by_doorbell),
        cmocka_unit_test(test_doorbell_and_no_sleep_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
