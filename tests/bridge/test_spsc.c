/* tests/bridge/test_spsc.c - the bridge's single-producer/single-consumer
 * ring (bridge/server/spsc.h): sizes, full/empty, in-place slots, 32-bit index
 * wrap-around, and two threads moving millions of items (no loss, no
 * duplicate, no reordering) plus real zmq_msg_t frames moved by struct copy
 * and closed on the other thread (what rk-bridge does). Runs under the
 * sanitizer builds too; RKB_SPSC_ITEMS sets the two-thread item count
 * (default 4 M). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "spsc.h"

typedef struct item {
    uint64_t seq;
    uint64_t check; /* ~seq: a torn or stale item shows */
    unsigned char pad[40];
} item;

static rkb_spsc *ring_new(uint32_t entries, size_t item_size)
{
    size_t sz = rkb_spsc_memsize(entries, item_size);
    assert_true(sz > 0);
    assert_int_equal(sz % RKB_SPSC_ALIGN, 0);
    rkb_spsc *r = aligned_alloc(RKB_SPSC_ALIGN, sz);
    assert_non_null(r);
    assert_int_equal(rkb_spsc_init(r, entries, item_size), 0);
    return r;
}

/* A waiting side that does not starve the other on a 2-core machine. */
static void backoff(unsigned *spins)
{
    if (++*spins > 64) {
        *spins = 0;
        sched_yield();
    }
}

static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(rkb_spsc_memsize(0, 8), 0);
    assert_int_equal(rkb_spsc_memsize(3, 8), 0);
    assert_int_equal(rkb_spsc_memsize(1000, 8), 0);
    assert_int_equal(rkb_spsc_memsize(8, 0), 0);
    assert_int_equal(rkb_spsc_memsize(UINT32_C(1) << 31, 1) > 0, 1);
    /* the header keeps the shared indices on lines of their own */
    assert_int_equal(offsetof(rkb_spsc, tail) % RKB_SPSC_ALIGN, 0);
    assert_int_equal(offsetof(rkb_spsc, head) % RKB_SPSC_ALIGN, 0);
    assert_true(offsetof(rkb_spsc, head) - offsetof(rkb_spsc, tail) >= RKB_SPSC_ALIGN);
    assert_true(offsetof(rkb_spsc, c_head) / RKB_SPSC_ALIGN != offsetof(rkb_spsc, tail) / RKB_SPSC_ALIGN);
    assert_true(offsetof(rkb_spsc, p_tail) / RKB_SPSC_ALIGN != offsetof(rkb_spsc, head) / RKB_SPSC_ALIGN);
    /* items: a 64-byte stride, never sharing a line */
    assert_int_equal(rkb_spsc_memsize(4, 65) - rkb_spsc_memsize(4, 64), 4 * 64);
    rkb_spsc r;
    assert_int_equal(rkb_spsc_init(&r, 6, 8), -1);
}

static void test_fill_drain(void **state)
{
    (void)state;
    enum { N = 8 };
    rkb_spsc *r = ring_new(N, sizeof(item));
    assert_int_equal(rkb_spsc_entries(r), N);
    assert_null(rkb_spsc_sc_peek(r));
    /* a slot is not taken until committed */
    item *s0 = rkb_spsc_sp_slot(r);
    assert_non_null(s0);
    assert_ptr_equal(rkb_spsc_sp_slot(r), s0);
    assert_null(rkb_spsc_sc_peek(r));
    for (uint64_t i = 0; i < N; i++) {
        item *s = rkb_spsc_sp_slot(r);
        assert_non_null(s);
        assert_int_equal((uintptr_t)s % RKB_SPSC_ITEM_ALIGN, 0);
        s->seq = i, s->check = ~i;
        rkb_spsc_sp_commit(r);
        assert_int_equal(rkb_spsc_count(r), i + 1);
    }
    assert_null(rkb_spsc_sp_slot(r)); /* full */
    item *p = rkb_spsc_sc_peek(r);
    assert_non_null(p);
    assert_ptr_equal(rkb_spsc_sc_peek(r), p); /* peeking does not consume */
    for (uint64_t i = 0; i < N; i++) {
        p = rkb_spsc_sc_peek(r);
        assert_non_null(p);
        assert_int_equal(p->seq, i);
        assert_int_equal(p->check, ~i);
        rkb_spsc_sc_release(r);
        if (i == 0) /* room again after one release */
            assert_non_null(rkb_spsc_sp_slot(r));
    }
    assert_null(rkb_spsc_sc_peek(r));
    assert_int_equal(rkb_spsc_count(r), 0);
    free(r);
}

/* A burst publishes once: pushed items are not the consumer's until the
 * producer publishes, popped slots not the producer's until the consumer
 * publishes; sc_ahead sees only what the consumer already knows of. */
static void test_burst_publish(void **state)
{
    (void)state;
    enum { N = 8 };
    rkb_spsc *r = ring_new(N, sizeof(item));
    for (uint64_t i = 0; i < 3; i++) {
        item *s = rkb_spsc_sp_slot(r);
        assert_non_null(s);
        s->seq = i, s->check = ~i;
        assert_int_equal(rkb_spsc_sp_push(r, UINT32_MAX), i + 1); /* waiting for the publish */
        assert_ptr_not_equal(rkb_spsc_sp_slot(r), s); /* the next slot, though unpublished */
    }
    assert_null(rkb_spsc_sc_peek(r));
    assert_int_equal(rkb_spsc_count(r), 0);
    rkb_spsc_sp_publish(r);
    rkb_spsc_sp_publish(r); /* a second publish changes nothing */
    assert_int_equal(rkb_spsc_count(r), 3);
    item *p = rkb_spsc_sc_peek(r);
    assert_non_null(p);
    assert_int_equal(p->seq, 0);
    assert_ptr_equal(rkb_spsc_sc_ahead(r, 2), (char *)p + 2 * r->stride);
    assert_null(rkb_spsc_sc_ahead(r, 3));
    /* fill the rest: the ring is full until the consumer publishes */
    for (int i = 3; i < N; i++) {
        assert_non_null(rkb_spsc_sp_slot(r));
        rkb_spsc_sp_commit(r);
    }
    assert_null(rkb_spsc_sp_slot(r));
    for (uint64_t i = 0; i < 3; i++) {
        p = rkb_spsc_sc_peek(r);
        assert_int_equal(p->seq, i);
        assert_int_equal(p->check, ~i);
        assert_int_equal(rkb_spsc_sc_pop(r, 4), i + 1); /* below 4: none published */
    }
    assert_null(rkb_spsc_sp_slot(r)); /* popped, not yet given back */
    rkb_spsc_sc_publish(r);
    assert_non_null(rkb_spsc_sp_slot(r));
    assert_int_equal(rkb_spsc_count(r), N - 3);
    /* `every`: the pop or push that makes that many waiting publishes them */
    assert_non_null(rkb_spsc_sc_peek(r));
    assert_int_equal(rkb_spsc_sc_pop(r, 2), 1);
    assert_int_equal(rkb_spsc_count(r), N - 3);
    assert_non_null(rkb_spsc_sc_peek(r));
    assert_int_equal(rkb_spsc_sc_pop(r, 2), 0);
    assert_int_equal(rkb_spsc_count(r), N - 5);
    assert_non_null(rkb_spsc_sp_slot(r));
    assert_int_equal(rkb_spsc_sp_push(r, 2), 1);
    assert_int_equal(rkb_spsc_count(r), N - 5);
    assert_non_null(rkb_spsc_sp_slot(r));
    assert_int_equal(rkb_spsc_sp_push(r, 2), 0);
    assert_int_equal(rkb_spsc_count(r), N - 3);
    free(r);
}

/* The 32-bit indices wrap: full and empty stay right across 2^32. */
/* The producer's pending count: exact once it reaches `upto` (it then
 * re-reads the consumer's index), an upper bound below it (cached). */
static void test_pending(void **state)
{
    (void)state;
    rkb_spsc *r = ring_new(64, sizeof(item));
    assert_int_equal(rkb_spsc_sp_pending(r, 4), 0);
    for (int i = 0; i < 10; i++) {
        assert_non_null(rkb_spsc_sp_slot(r));
        rkb_spsc_sp_commit(r);
    }
    assert_int_equal(rkb_spsc_sp_pending(r, 32), 10);
    for (int i = 0; i < 7; i++) {
        assert_non_null(rkb_spsc_sc_peek(r));
        rkb_spsc_sc_release(r);
    }
    /* below upto: the cached (stale) count, never less than the truth */
    assert_int_equal(rkb_spsc_sp_pending(r, 32), 10);
    /* at or above upto: refreshed */
    assert_int_equal(rkb_spsc_sp_pending(r, 8), 3);
    assert_int_equal(rkb_spsc_sp_pending(r, 32), 3);
    free(r);
}

static void test_wrap(void **state)
{
    (void)state;
    enum { N = 4 };
    rkb_spsc *r = ring_new(N, sizeof(item));
    rkb_spsc__seek(r, UINT32_MAX - 5);
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 8; round++) {
        /* fill completely, then drain a varying number */
        item *s;
        while ((s = rkb_spsc_sp_slot(r))) {
            s->seq = next_in, s->check = ~next_in;
            next_in++;
            rkb_spsc_sp_commit(r);
        }
        assert_int_equal(next_in - next_out, N);
        assert_int_equal(rkb_spsc_count(r), N);
        for (int k = 0; k <= round % N; k++) {
            item *p = rkb_spsc_sc_peek(r);
            assert_non_null(p);
            assert_int_equal(p->seq, next_out);
            assert_int_equal(p->check, ~next_out);
            next_out++;
            rkb_spsc_sc_release(r);
        }
    }
    item *p;
    while ((p = rkb_spsc_sc_peek(r))) {
        assert_int_equal(p->seq, next_out);
        next_out++;
        rkb_spsc_sc_release(r);
    }
    assert_int_equal(next_out, next_in);
    assert_true(r->c_head < 100); /* it did wrap */
    free(r);
}

/* ---- two threads --------------------------------------------------------- */

typedef struct pc {
    rkb_spsc *r;
    uint64_t n;
    uint64_t bad; /* consumer: items out of order, torn or duplicated */
    uint32_t burst; /* 0: commit/release each item; k: publish every k, and before waiting */
} pc;

static uint64_t items_n(void)
{
    const char *s = getenv("RKB_SPSC_ITEMS");
    return s ? strtoull(s, NULL, 0) : 4000000;
}

static void *producer_main(void *arg)
{
    pc *x = arg;
    unsigned spins = 0;
    for (uint64_t i = 0; i < x->n; i++) {
        item *s;
        while (!(s = rkb_spsc_sp_slot(x->r))) {
            rkb_spsc_sp_publish(x->r); /* (a full ring of unpublished items waits forever) */
            backoff(&spins);
        }
        s->seq = i;
        s->check = ~i;
        if (!x->burst)
            rkb_spsc_sp_commit(x->r);
        else
            rkb_spsc_sp_push(x->r, x->burst);
    }
    rkb_spsc_sp_publish(x->r);
    return NULL;
}

static void two_threads(uint32_t burst)
{
    /* a small ring: it goes full and empty over and over */
    pc x = {ring_new(64, sizeof(item)), items_n(), 0, burst};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, producer_main, &x), 0);
    unsigned spins = 0;
    for (uint64_t i = 0; i < x.n; i++) {
        item *p;
        while (!(p = rkb_spsc_sc_peek(x.r))) {
            rkb_spsc_sc_publish(x.r);
            backoff(&spins);
        }
        if (p->seq != i || p->check != ~i) {
            if (x.bad++ < 5)
                fprintf(stderr, "item %llu: got seq %llu check %llx\n", (unsigned long long)i,
                        (unsigned long long)p->seq, (unsigned long long)p->check);
        }
        if (!burst)
            rkb_spsc_sc_release(x.r);
        else
            rkb_spsc_sc_pop(x.r, burst);
    }
    pthread_join(t, NULL);
    assert_null(rkb_spsc_sc_peek(x.r)); /* nothing extra */
    assert_int_equal(x.bad, 0);
    fprintf(stderr, "  %llu items moved in order (burst %u)\n", (unsigned long long)x.n, burst);
    free(x.r);
}

static void test_two_threads(void **state)
{
    (void)state;
    two_threads(0);
}

/* the same with indices published per burst (rk-bridge's frontend and
 * workers: RKB_PUBLISH_EVERY) */
static void test_two_threads_bursts(void **state)
{
    (void)state;
    two_threads(5);
    two_threads(16);
}

/* What rk-bridge moves: zmq_msg_t frames, by struct copy, closed by the
 * consumer. Small (inline) and large (heap, refcounted) frames both. */
typedef struct frames {
    zmq_msg_t body;
    zmq_msg_t env;
    uint32_t n;
} frames;

static void *msg_producer_main(void *arg)
{
    pc *x = arg;
    unsigned spins = 0;
    for (uint64_t i = 0; i < x->n; i++) {
        zmq_msg_t env, body;
        size_t blen = i % 3 ? 16 : 200 + i % 100; /* inline and heap bodies */
        /* not a cmocka assert: this is not the test's thread */
        if (zmq_msg_init_size(&env, 5) || zmq_msg_init_size(&body, blen))
            abort();
        memcpy(zmq_msg_data(&env), "\0abcd", 5);
        memset(zmq_msg_data(&body), (int)(i & 0xff), blen);
        memcpy(zmq_msg_data(&body), &i, sizeof i);
        frames *s;
        while (!(s = rkb_spsc_sp_slot(x->r)))
            backoff(&spins);
        s->env = env; /* moved: this thread no longer touches env/body */
        s->body = body;
        s->n = (uint32_t)blen;
        rkb_spsc_sp_commit(x->r);
    }
    return NULL;
}

static void test_zmq_msg_move(void **state)
{
    (void)state;
    uint64_t n = items_n() / 10 + 1;
    pc x = {ring_new(128, sizeof(frames)), n, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, msg_producer_main, &x), 0);
    unsigned spins = 0;
    for (uint64_t i = 0; i < x.n; i++) {
        frames *p;
        while (!(p = rkb_spsc_sc_peek(x.r)))
            backoff(&spins);
        zmq_msg_t env = p->env, body = p->body;
        uint32_t blen = p->n;
        rkb_spsc_sc_release(x.r); /* the frames are ours now, the slot is not */
        uint64_t seq;
        const unsigned char *d = zmq_msg_data(&body);
        memcpy(&seq, d, sizeof seq);
        bool ok = zmq_msg_size(&body) == blen && seq == i && zmq_msg_size(&env) == 5 &&
                  !memcmp(zmq_msg_data(&env), "\0abcd", 5) && d[blen - 1] == (i & 0xff);
        if (!ok && x.bad++ < 5)
            fprintf(stderr, "message %llu is wrong (seq %llu, %zu B)\n", (unsigned long long)i,
                    (unsigned long long)seq, zmq_msg_size(&body));
        zmq_msg_close(&env);
        zmq_msg_close(&body);
    }
    pthread_join(t, NULL);
    assert_null(rkb_spsc_sc_peek(x.r));
    assert_int_equal(x.bad, 0);
    fprintf(stderr, "  %llu frame pairs moved and closed across threads\n", (unsigned long long)n);
    free(x.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_fill_drain),
        cmocka_unit_test(test_burst_publish),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_two_threads),
        cmocka_unit_test(test_two_threads_bursts),
        cmocka_unit_test(test_zmq_msg_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
