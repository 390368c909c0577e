/* test_stress.c - the soak: >= 10 million messages from 4 producer threads
 * (one actor each) through one runtime, pipelined: none lost, none
 * duplicated, each actor's replies in the order it sent. RK_STRESS_MESSAGES
 * scales it down for sanitizer builds; RK_TEST_BACKEND picks the backend.
 * `test_stress batch`: the same checks through the batch API (8 threads,
 * batches of 1..64, every reply's bytes). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <rk/rk.h>

enum { PRODUCERS = 4, WINDOW = 128 };

typedef struct {
    rk_runtime *rt;
    uint32_t id;
    uint64_t n;
    uint64_t sent, received, out_of_order, wrong, dup;
    int err;
    char why[256];
} prod;

static void *run(void *p)
{
    prod *w = p;
    rk_actor *a;
    if ((w->err = rk_actor_open(w->rt, &a)))
        return NULL;
    uint64_t next_expected = 0;
    uint8_t *seen = calloc(w->n, 1);
    while (w->received < w->n) {
        while (w->sent < w->n && w->sent - w->received < WINDOW) {
            uint64_t msg[2] = {w->id, w->sent};
            /* echo of 16..48 bytes: exercises several line counts */
            size_t len = 16 + (w->sent % 3) * 16;
            uint64_t buf[6] = {msg[0], msg[1], ~msg[1], msg[1] * 3, 5, 6};
            int rc = rk_actor_send(a, RK_OP_ECHO, buf, len, 0, NULL, 10000);
            if (rc) {
                w->err = rc;
                snprintf(w->why, sizeof w->why, "send: %s", rk_last_detail());
                goto out;
            }
            w->sent++;
        }
        rk_reply r;
        int rc = rk_actor_recv(a, &r, 10000);
        if (rc || r.status) {
            w->err = rc ? rc : r.status;
            snprintf(w->why, sizeof w->why, "recv: %s", rk_last_detail());
            goto out;
        }
        const uint64_t *m = r.data;
        if (r.len < 16 || m[0] != w->id || m[1] >= w->n || (r.len >= 24 && m[2] != ~m[1])) {
            w->wrong++;
        } else {
            if (seen[m[1]]++)
                w->dup++;
            if (m[1] != next_expected)
                w->out_of_order++;
            next_expected = m[1] + 1;
        }
        rk_reply_release(a, &r);
        w->received++;
    }
out:
    free(seen);
    rk_actor_close(a);
    return NULL;
}

static void test_soak(void **state)
{
    (void)state;
    uint64_t total = 10000000;
    const char *s = getenv("RK_STRESS_MESSAGES");
    if (s)
        total = strtoull(s, NULL, 10);
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    const char *b = getenv("RK_TEST_BACKEND");
    if (b)
        assert_int_equal(rk_backend_parse(b, &c.backend), 0);
    rk_runtime *rt;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    pthread_t t[PRODUCERS];
    prod w[PRODUCERS];
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        w[i] = (prod){.rt = rt, .id = i, .n = total / PRODUCERS + (i < total % PRODUCERS)};
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    uint64_t got = 0;
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].err)
            fail_msg("producer %d: %s: %s", i, rk_err_name(w[i].err), w[i].why);
        assert_int_equal(w[i].received, w[i].n);
        assert_int_equal(w[i].wrong, 0);
        assert_int_equal(w[i].dup, 0);
        assert_int_equal(w[i].out_of_order, 0);
        got += w[i].received;
    }
    assert_int_equal(got, total);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, total);
    assert_int_equal(st.replies, total);
    assert_int_equal(st.errors, 0);
    printf("soak: %llu messages from %d producers: 0 lost, 0 duplicated, order kept\n",
           (unsigned long long)total, PRODUCERS);
    rk_runtime_close(rt);
}

/* ---- the batch API under load ---- */

enum { BATCH_THREADS = 8, BATCH_MAX = 64 };

/* Payload word k of message seq of producer id: every byte is checked. */
static uint64_t word(uint32_t id, uint64_t seq, int k)
{
    return ((uint64_t)id << 56) ^ (seq * 0x9e3779b97f4a7c15ull) ^ (uint64_t)k * 0x100000001b3ull;
}

/* Sends batches of 1, 2, .. 64, 1, .. echoes of 8..64 B (some as
 * two-part gather lists) and reaps with recv_batch; every reply's bytes,
 * each seq once, in order. */
static void *run_batch(void *p)
{
    prod *w = p;
    rk_actor *a;
    if ((w->err = rk_actor_open(w->rt, &a)))
        return NULL;
    uint8_t *seen = calloc(w->n, 1);
    uint64_t pay[BATCH_MAX][8], next_expected = 0, ids[BATCH_MAX];
    rk_send_req q[BATCH_MAX];
    rk_iov iov[BATCH_MAX][2];
    rk_reply r[BATCH_MAX];
    for (int size = 1; w->received < w->n; size = size % BATCH_MAX + 1) {
        int n = 0;
        for (; n < size && w->sent + (uint64_t)n < w->n; n++) {
            uint64_t seq = w->sent + (uint64_t)n;
            int words = 1 + (int)(seq % 8);
            for (int k = 0; k < words; k++)
                pay[n][k] = k ? word(w->id, seq, k) : seq;
            q[n] = (rk_send_req){.type = RK_OP_ECHO, .data = pay[n], .len = (size_t)words * 8};
            if (seq % 5 == 0 && words > 1) {
                iov[n][0] = (rk_iov){pay[n], 8};
                iov[n][1] = (rk_iov){pay[n] + 1, (size_t)(words - 1) * 8};
                q[n].iov = iov[n];
                q[n].iovcnt = 2;
            }
        }
        int k = n ? rk_actor_send_batch(a, q, n, ids, 10000) : 0;
        if (k < 0 && k != -RK_EBUSY) {
            w->err = k;
            snprintf(w->why, sizeof w->why, "send_batch: %s", rk_last_detail());
            goto out;
        }
        for (int i = 1; i < k; i++)
            if (ids[i] <= ids[i - 1])
                w->dup++; /* ids must grow */
        w->sent += (uint64_t)(k > 0 ? k : 0);
        int got = rk_actor_recv_batch(a, r, 1 + (int)(w->sent % BATCH_MAX), 10000);
        if (got < 0) {
            w->err = got;
            snprintf(w->why, sizeof w->why, "recv_batch: %s", rk_last_detail());
            goto out;
        }
        for (int i = 0; i < got; i++) {
            const uint64_t *m = r[i].data;
            uint64_t seq = r[i].len >= 8 ? m[0] : ~0ull;
            bool ok = r[i].status == 0 && seq < w->n && r[i].len == 8 * (1 + seq % 8);
            for (int j = 1; ok && j < (int)(r[i].len / 8); j++)
                ok = m[j] == word(w->id, seq, j);
            if (!ok) {
                w->wrong++;
                continue;
            }
            if (seen[seq]++)
                w->dup++;
            if (seq != next_expected)
                w->out_of_order++;
            next_expected = seq + 1;
        }
        rk_reply_release_batch(a, r, got);
        w->received += (uint64_t)got;
    }
out:
    free(seen);
    rk_actor_close(a);
    return NULL;
}

static void test_batch_soak(void **state)
{
    (void)state;
    uint64_t total = 2000000;
    const char *s = getenv("RK_STRESS_MESSAGES");
    if (s)
        total = strtoull(s, NULL, 10) / 5 + BATCH_THREADS;
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    c.actor_window = 96; /* a batch of 64 often meets a full window: -RK_EBUSY midway */
    const char *b = getenv("RK_TEST_BACKEND");
    if (b)
        assert_int_equal(rk_backend_parse(b, &c.backend), 0);
    rk_runtime *rt;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    pthread_t t[BATCH_THREADS];
    prod w[BATCH_THREADS];
    for (uint32_t i = 0; i < BATCH_THREADS; i++) {
        w[i] = (prod){.rt = rt, .id = i, .n = total / BATCH_THREADS};
        pthread_create(&t[i], NULL, run_batch, &w[i]);
    }
    uint64_t got = 0;
    for (int i = 0; i < BATCH_THREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].err)
            fail_msg("producer %d: %s: %s", i, rk_err_name(w[i].err), w[i].why);
        assert_int_equal(w[i].received, w[i].n);
        assert_int_equal(w[i].sent, w[i].n);
        assert_int_equal(w[i].wrong, 0);
        assert_int_equal(w[i].dup, 0);
        assert_int_equal(w[i].out_of_order, 0);
        got += w[i].received;
    }
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.requests, got);
    assert_int_equal(st.replies, got);
    printf("batch soak: %llu messages from %d threads in batches of 1..%d: 0 lost, 0 duplicated, "
           "order kept\n", (unsigned long long)got, BATCH_THREADS, BATCH_MAX);
    rk_runtime_close(rt);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest soak[] = {cmocka_unit_test(test_soak)};
    const struct CMUnitTest batch[] = {cmocka_unit_test(test_batch_soak)};
    if (argc > 1 && !strcmp(argv[1], "batch"))
        return cmocka_run_group_tests(batch, NULL, NULL);
    return cmocka_run_group_tests(soak, NULL, NULL);
}
