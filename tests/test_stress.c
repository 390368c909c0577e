/* test_stress.c - the soak: >= 10 million messages from 4 producer threads
 * (one actor each) through one runtime, pipelined: none lost, none
 * duplicated, each actor's replies in the order it sent. RK_STRESS_MESSAGES
 * scales it down for sanitizer builds; RK_TEST_BACKEND picks the backend. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
