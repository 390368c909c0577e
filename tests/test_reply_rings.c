/* test_reply_rings.c - several reply (D2H) rings (rk_config.reply_rings):
 * the configuration's every bad value, which ring an actor's replies come
 * back on, a ring whose actors nobody waits for (waiters of another ring
 * drain it, or its full ring would stop the consumer and every actor with
 * it), and a reply that arrives on the wrong ring (dropped and counted;
 * its request still gets exactly one reply). Each case checks what
 * happened to every request: answered once, with its bytes, in order.
 * On the CPU backend; RK_TEST_ISOLATION=process runs the same on a worker
 * process. Reaches internals (an actor's ring, the rings' counts), so it
 * links librk's static library. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "actor.h"
#include "cpu_common.h"
#include "internal.h"

/* Payload of request `seq` of actor `who`: 8 bytes of each, then a pattern. */
static void fill(uint8_t *p, size_t len, uint32_t who, uint32_t seq)
{
    memcpy(p, &who, 4);
    memcpy(p + 4, &seq, 4);
    for (size_t i = 8; i < len; i++)
        p[i] = (uint8_t)(seq * 131 + i * 7 + who);
}

static void check_reply(const rk_reply *r, size_t len, uint32_t who, uint32_t seq)
{
    uint8_t want[64];
    fill(want, len, who, seq);
    assert_int_equal(r->status, 0);
    assert_int_equal(r->len, len);
    assert_memory_equal(r->data, want, len);
}

/* One echo of `len` bytes from `who` through actor a, answered with its bytes. */
static void call_ok(rk_actor *a, size_t len, uint32_t who, uint32_t seq)
{
    uint8_t msg[64];
    fill(msg, len, who, seq);
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, msg, len, 0, &r, 5000), 0);
    check_reply(&r, len, who, seq);
    rk_reply_release(a, &r);
}

/* The reply rings' lock word (internal.h rk__lock): one holder at a
 * time, a try fails while it is held, a blocked taker gets it once it is
 * given back, and what a holder did is seen by the next one (TSan checks
 * the counter below: no other ordering covers it). */
enum { LOCK_THREADS = 4, LOCK_ROUNDS = 20000 };
static struct {
    rk__lock lock;
    uint64_t counter; /* plain: only under the lock */
    _Atomic int inside;
    _Atomic int overlaps;
} lk;

static void *lock_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < LOCK_ROUNDS; i++) {
        if (i % 2 || !rk__lock_try(&lk.lock))
            rk__lock_take(&lk.lock);
        if (atomic_fetch_add(&lk.inside, 1) != 0)
            atomic_fetch_add(&lk.overlaps, 1);
        lk.counter++;
        atomic_fetch_sub(&lk.inside, 1);
        rk__unlock(&lk.lock);
    }
    return NULL;
}

static void *lock_late_taker(void *arg)
{
    rk__lock_take(&lk.lock);
    *(int64_t *)arg = rk__now_ns();
    rk__unlock(&lk.lock);
    return NULL;
}

static void test_ring_lock(void **state)
{
    (void)state;
    memset(&lk, 0, sizeof lk);
    assert_true(rk__lock_try(&lk.lock));
    assert_false(rk__lock_try(&lk.lock)); /* held: a try fails */
    /* a taker blocked on the held lock gets it only after it is given back */
    int64_t got = 0;
    pthread_t late;
    assert_int_equal(pthread_create(&late, NULL, lock_late_taker, &got), 0);
    usleep(20000);
    const int64_t released = rk__now_ns();
    rk__unlock(&lk.lock);
    assert_int_equal(pthread_join(late, NULL), 0);
    assert_true(got >= released);
    /* contention: every increment under the lock, none overlapping */
    pthread_t t[LOCK_THREADS];
    for (int i = 0; i < LOCK_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, lock_worker, NULL), 0);
    for (int i = 0; i < LOCK_THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(lk.counter, (uint64_t)LOCK_THREADS * LOCK_ROUNDS);
    assert_int_equal(atomic_load(&lk.overlaps), 0);
    assert_true(rk__lock_try(&lk.lock)); /* given back by all */
    rk__unlock(&lk.lock);
}

static void test_bad_config(void **state)
{
    (void)state;
    static const uint32_t bad[] = {3, 6, 9, 16, 1024, 0x80000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rk_config c;
        rk_config_init(&c);
        c.backend = RK_BACKEND_CPU;
        c.reply_rings = bad[i];
        rk_runtime *rt = (rk_runtime *)1;
        assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
        assert_null(rt);
        char want[64];
        snprintf(want, sizeof want, "reply_rings %u", bad[i]);
        assert_non_null(strstr(rk_last_detail(), want));
        assert_non_null(strstr(rk_last_detail(), "1..8"));
    }
    /* 0 is the default; the default and each valid value work */
    static const uint32_t good[] = {0, 1, 2, 4, 8};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        rk_config c;
        rk_config_init(&c);
        c.reply_rings = good[i];
        rk_runtime *rt = test_open_cpu(&c);
        assert_int_equal(rt->n_d2h, good[i] ? good[i] : RK_REPLY_RINGS_MAX);
        rk_info info;
        rk_runtime_info(rt, &info);
        assert_int_equal(info.reply_rings, rt->n_d2h);
        rk_actor *a;
        assert_int_equal(rk_actor_open(rt, &a), 0);
        call_ok(a, 40, 7, 1);
        rk_runtime_close(rt);
    }
}

/* Actor i replies on ring i % reply_rings, and only there. */
static void test_actor_rings(void **state)
{
    (void)state;
    enum { N = 10, RINGS = 4, EACH = 50 };
    rk_config c;
    rk_config_init(&c);
    c.reply_rings = RINGS;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a[N];
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(rk_actor_open(rt, &a[i]), 0);
        assert_int_equal(a[i]->index, i);
        assert_int_equal(a[i]->d2h->index, i % RINGS);
    }
    /* every actor pipelines, then reaps: each reply on its own ring */
    for (uint32_t i = 0; i < N; i++)
        for (uint32_t s = 0; s < EACH; s++) {
            uint8_t msg[32];
            fill(msg, sizeof msg, i, s);
            assert_int_equal(rk_actor_send(a[i], RK_OP_ECHO, msg, sizeof msg, 0, NULL, 5000), 0);
        }
    for (uint32_t i = N; i-- > 0;)
        for (uint32_t s = 0; s < EACH; s++) {
            rk_reply r;
            assert_int_equal(rk_actor_recv(a[i], &r, 5000), 0);
            check_reply(&r, 32, i, s); /* in order */
            rk_reply_release(a[i], &r);
        }
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, N * EACH);
    assert_int_equal(st.replies, N * EACH);
    assert_int_equal(st.errors, 0);
    rk_runtime_close(rt);
}

typedef struct {
    rk_actor *a;
    uint32_t calls;
    int err;
    char why[256];
} caller;

static void *call_many(void *p)
{
    caller *c = p;
    for (uint32_t s = 0; s < c->calls; s++) {
        uint8_t msg[48];
        fill(msg, sizeof msg, 2, s);
        rk_reply r;
        int rc = rk_actor_call(c->a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 10000);
        if (rc || r.status || r.len != sizeof msg || memcmp(r.data, msg, sizeof msg)) {
            c->err = rc ? rc : -RK_EPROTO;
            snprintf(c->why, sizeof c->why, "call %u: %s", s, rc ? rk_last_detail() : "wrong reply");
            if (!rc)
                rk_reply_release(c->a, &r);
            return NULL;
        }
        rk_reply_release(c->a, &r);
    }
    return NULL;
}

/* Actor 0 fills its ring and stops reading: the consumer blocks on that
 * full ring with more of actor 0's requests in hand, and actor 1's
 * requests queue behind them. Actor 1's waiter must drain ring 0 (its own
 * stays empty until then), so that all its calls are answered; actor 0
 * then finds all its replies, in order. */
static void test_orphan_ring_drained(void **state)
{
    (void)state;
    enum { SLOTS = 16, CALLS = 200 };
    rk_config c;
    rk_config_init(&c);
    c.reply_rings = 2;
    c.ring_slots = SLOTS;
    c.actor_window = 64;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a0, *a1;
    assert_int_equal(rk_actor_open(rt, &a0), 0);
    assert_int_equal(rk_actor_open(rt, &a1), 0);
    assert_int_equal(a0->d2h->index, 0);
    assert_int_equal(a1->d2h->index, 1);
    uint8_t bufs[2 * SLOTS][24];
    rk_send_req q[2 * SLOTS];
    for (uint32_t s = 0; s < 2 * SLOTS; s++) {
        fill(bufs[s], sizeof bufs[s], 0, s);
        q[s] = (rk_send_req){.type = RK_OP_ECHO, .data = bufs[s], .len = sizeof bufs[s]};
    }
    /* a full ring 0 ... */
    assert_int_equal(rk_actor_send_batch(a0, q, SLOTS, NULL, 5000), SLOTS);
    rk_ring *ring0 = rt->d2h[0].ring;
    for (int w = 0; w < 5000 && rk_ring_count(ring0) < SLOTS; w++)
        usleep(1000);
    assert_int_equal(rk_ring_count(ring0), SLOTS);
    /* ... and as many requests again in H2D, the first one in the
     * consumer's hands, its reply waiting for room */
    assert_int_equal(rk_actor_send_batch(a0, q + SLOTS, SLOTS, NULL, 5000), SLOTS);
    caller cl = {.a = a1, .calls = CALLS};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, call_many, &cl), 0);
    pthread_join(th, NULL);
    if (cl.err)
        fail_msg("actor 1 (ring 1) behind a ring nobody drained: %s: %s", rk_err_name(cl.err), cl.why);
    /* actor 0's replies: every one, once, in order, with its bytes */
    for (uint32_t s = 0; s < 2 * SLOTS; s++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(a0, &r, 5000), 0);
        check_reply(&r, sizeof bufs[s], 0, s);
        rk_reply_release(a0, &r);
    }
    rk_reply r;
    assert_int_equal(rk_actor_recv(a0, &r, 0), -RK_EAGAIN);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, 2 * SLOTS + CALLS);
    assert_int_equal(st.replies, 2 * SLOTS + CALLS);
    assert_int_equal(st.errors, 0);
    rk_runtime_close(rt);
}

/* A full reply ring that nobody drains, for longer than the heartbeat
 * allows: the consumer waits for room with its reply in hand, alive (on a
 * worker process: no fault, nobody blamed; it stamped no heartbeat there
 * until 2026-11-26 and was killed), and rk_runtime_close returns promptly
 * (it hung for good in process: the consumer never saw its stop), with
 * every reply of a relaunch in between taken by the waiter. */
static void test_full_ring_nobody_drains(void **state)
{
    (void)state;
    enum { SLOTS = 16 };
    rk_config c;
    rk_config_init(&c);
    c.reply_rings = 1;
    c.ring_slots = SLOTS;
    c.actor_window = 64;
    c.heartbeat_ms = 300;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    uint8_t bufs[2 * SLOTS][24];
    rk_send_req q[2 * SLOTS];
    for (uint32_t s = 0; s < 2 * SLOTS; s++) {
        fill(bufs[s], sizeof bufs[s], 0, s);
        q[s] = (rk_send_req){.type = RK_OP_ECHO, .data = bufs[s], .len = sizeof bufs[s]};
    }
    assert_int_equal(rk_actor_send_batch(a, q, 2 * SLOTS, NULL, 5000), 2 * SLOTS);
    usleep(1000 * 1000); /* > 3 heartbeats with the ring full */
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    assert_int_equal(w.faults, 0);
    assert_int_equal(rk_runtime_health(rt), 0);
    /* a relaunch waits for the consumer, which has a reply in hand: it
     * drains the ring meanwhile, and every reply still comes, in order */
    assert_int_equal(rk_runtime_relaunch(rt, 0, 0, 0), 0);
    for (uint32_t s = 0; s < 2 * SLOTS; s++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
        check_reply(&r, sizeof bufs[s], 0, s);
        rk_reply_release(a, &r);
    }
    /* full again, then closed without a reply taken */
    assert_int_equal(rk_actor_send_batch(a, q, 2 * SLOTS, NULL, 5000), 2 * SLOTS);
    usleep(100 * 1000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rk_runtime_close(rt);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (s > 2.0)
        fail_msg("rk_runtime_close took %.1f s with a full reply ring", s);
}

/* A reply for actor 0 that comes back on ring 1 (a producer's bug or a
 * torn region): ring 1's router drops it, says so and counts an error;
 * actor 0's request is answered exactly once, by its own ring. */
static void test_reply_on_wrong_ring(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.reply_rings = 2;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a0, *a1;
    assert_int_equal(rk_actor_open(rt, &a0), 0);
    assert_int_equal(rk_actor_open(rt, &a1), 0);
    uint8_t msg[32];
    fill(msg, sizeof msg, 0, 0);
    uint64_t id = 0;
    assert_int_equal(rk_actor_send(a0, RK_OP_ECHO, msg, sizeof msg, 0, &id, 5000), 0);
    /* the forgery: actor 0's header, on ring 1, before ring 1 has anything
     * else (the consumer does not produce on it meanwhile) */
    uint8_t forged[sizeof(rk_msg_hdr) + sizeof msg];
    rk_msg_hdr h = {.type = RK_OP_ECHO, .actor = 0, .tag = 0, .id = id, .len = sizeof msg};
    memcpy(forged, &h, sizeof h);
    memset(forged + sizeof h, 0xee, sizeof msg);
    assert_int_equal(rk_ring_mp_enqueue(rt->d2h[1].ring, forged, sizeof forged), 0);
    /* actor 1's round trip drains ring 1: the forgery first */
    call_ok(a1, 16, 1, 0);
    /* actor 0: its real reply, once */
    rk_reply r;
    assert_int_equal(rk_actor_recv(a0, &r, 5000), 0);
    assert_int_equal(r.id, id);
    check_reply(&r, sizeof msg, 0, 0);
    rk_reply_release(a0, &r);
    assert_int_equal(rk_actor_recv(a0, &r, 0), -RK_EAGAIN);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.replies, 2);
    assert_int_equal(st.errors, 1);
    rk_runtime_close(rt);
}

/* rk_actor_call takes its reply straight from its ring when the reply
 * at the ring's head is the one it waits for (recv.c, router.c:
 * rk__take_own_locked). A stale reply there for the same tag (an old id:
 * a producer's bug or a torn region) is dropped, said and counted like
 * any unmatched reply, and consumed; the call still gets its own reply,
 * once, and the ring goes on. */
static void test_call_drops_stale_own_reply(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.reply_rings = 2;
    rk_runtime *rt = test_open_cpu(&c);
    rk_actor *a0;
    assert_int_equal(rk_actor_open(rt, &a0), 0);
    /* the forgery: actor 0, tag 0 (the first call's), an id it never had */
    uint8_t forged[sizeof(rk_msg_hdr) + 16];
    rk_msg_hdr h = {.type = RK_OP_ECHO, .actor = 0, .tag = 0, .id = 999, .len = 16};
    memcpy(forged, &h, sizeof h);
    memset(forged + sizeof h, 0xee, 16);
    assert_int_equal(rk_ring_mp_enqueue(rt->d2h[0].ring, forged, sizeof forged), 0);
    for (uint32_t seq = 0; seq < 3; seq++)
        call_ok(a0, 16, 0, seq);
    rk_reply r;
    assert_int_equal(rk_actor_recv(a0, &r, 0), -RK_EAGAIN);
    assert_int_equal(rk_actor_inflight(a0), 0);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.replies, 3);
    assert_int_equal(st.errors, 1);
    /* everything consumed: the ring's head is where the producer is */
    assert_int_equal(__atomic_load_n(&rt->d2h[0].ring->cons_head, __ATOMIC_ACQUIRE),
                     __atomic_load_n(&rt->d2h[0].ring->prod_tail, __ATOMIC_ACQUIRE));
    rk_runtime_close(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_lock),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_actor_rings),
        cmocka_unit_test(test_orphan_ring_drained),
        cmocka_unit_test(test_full_ring_nobody_drains),
        cmocka_unit_test(test_reply_on_wrong_ring),
        cmocka_unit_test(test_call_drops_stale_own_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
