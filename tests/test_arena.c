/* test_arena.c - the data arena allocator: bounds, exhaustion with and
 * without waiting, reuse and coalescing. Uses librk internals. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

#define KB 1024u

static void test_alloc_free_alignment(void **state)
{
    (void)state;
    static uint8_t mem[64 * KB];
    rk__arena ar;
    assert_int_equal(rk__arena_init(&ar, mem, sizeof mem), 0);
    uint64_t a, b, c;
    assert_int_equal(rk__arena_alloc(&ar, 1, 0, &a), 0);
    assert_int_equal(rk__arena_alloc(&ar, 300, 0, &b), 0);
    assert_int_equal(rk__arena_alloc(&ar, 0, 0, &c), 0);
    assert_int_equal(a % RK_ARENA_ALIGN, 0);
    assert_int_equal(b % RK_ARENA_ALIGN, 0);
    assert_int_equal(c % RK_ARENA_ALIGN, 0);
    assert_true(b >= a + RK_ARENA_ALIGN);
    assert_true(c >= b + 2 * RK_ARENA_ALIGN); /* 300 B rounds to 512 */
    size_t used, peak;
    rk__arena_usage(&ar, &used, &peak);
    assert_int_equal(used, 4 * RK_ARENA_ALIGN);
    rk__arena_free(&ar, b, 300);
    rk__arena_free(&ar, a, 1);
    rk__arena_free(&ar, c, 0);
    rk__arena_usage(&ar, &used, &peak);
    assert_int_equal(used, 0);
    assert_int_equal(peak, 4 * RK_ARENA_ALIGN);
    rk__arena_destroy(&ar);
}

static void test_too_big_and_exhaustion(void **state)
{
    (void)state;
    static uint8_t mem[16 * KB];
    rk__arena ar;
    assert_int_equal(rk__arena_init(&ar, mem, sizeof mem), 0);
    uint64_t off;
    assert_int_equal(rk__arena_alloc(&ar, sizeof mem + 1, 0, &off), -RK_EMSGSIZE);
    assert_non_null(strstr(rk_last_detail(), "16384"));
    uint64_t whole;
    assert_int_equal(rk__arena_alloc(&ar, sizeof mem, 0, &whole), 0);
    /* full: fails at once with deadline "now", after the wait with a short one */
    assert_int_equal(rk__arena_alloc(&ar, 1, 0, &off), -RK_ENOSPC);
    assert_non_null(strstr(rk_last_detail(), "arena full"));
    int64_t t0 = rk__now_ns();
    assert_int_equal(rk__arena_alloc(&ar, 1, rk__deadline(50), &off), -RK_ENOSPC);
    assert_true(rk__now_ns() - t0 >= 45 * 1000 * 1000);
    rk__arena_free(&ar, whole, sizeof mem);
    assert_int_equal(rk__arena_alloc(&ar, sizeof mem, 0, &off), 0);
    assert_int_equal(off, 0);
    rk__arena_free(&ar, off, sizeof mem);
    rk__arena_destroy(&ar);
}

typedef struct {
    rk__arena *ar;
    uint64_t off;
    size_t len;
} freer_arg;

static void *late_free(void *p)
{
    freer_arg *f = p;
    usleep(30000);
    rk__arena_free(f->ar, f->off, f->len);
    return NULL;
}

static void test_waiter_gets_freed_space(void **state)
{
    (void)state;
    static uint8_t mem[8 * KB];
    rk__arena ar;
    assert_int_equal(rk__arena_init(&ar, mem, sizeof mem), 0);
    uint64_t off;
    assert_int_equal(rk__arena_alloc(&ar, sizeof mem, 0, &off), 0);
    freer_arg f = {&ar, off, sizeof mem};
    pthread_t t;
    pthread_create(&t, NULL, late_free, &f);
    uint64_t got;
    assert_int_equal(rk__arena_alloc(&ar, 4 * KB, rk__deadline(10000), &got), 0);
    pthread_join(t, NULL);
    rk__arena_free(&ar, got, 4 * KB);
    rk__arena_destroy(&ar);
}

/* Fragment the arena into many blocks, free them in a random order, and
 * the whole arena must come back as one extent. */
static void test_coalescing_random_order(void **state)
{
    (void)state;
    enum { N = 256 };
    static uint8_t mem[N * 512];
    rk__arena ar;
    assert_int_equal(rk__arena_init(&ar, mem, sizeof mem), 0);
    uint64_t offs[2 * N + 1];
    size_t lens[2 * N + 1];
    size_t n = 0;
    srand(7);
    for (;;) {
        size_t len = (size_t)(rand() % 3 + 1) * RK_ARENA_ALIGN;
        if (rk__arena_alloc(&ar, len, 0, &offs[n]) != 0)
            break;
        lens[n++] = len;
        assert_true(n <= 2 * N);
    }
    for (size_t i = n; i > 1; i--) { /* shuffle */
        size_t j = (size_t)rand() % i;
        uint64_t o = offs[i - 1];
        size_t l = lens[i - 1];
        offs[i - 1] = offs[j], lens[i - 1] = lens[j];
        offs[j] = o, lens[j] = l;
    }
    for (size_t i = 0; i < n; i++)
        rk__arena_free(&ar, offs[i], lens[i]);
    assert_int_equal(ar.n_free, 1);
    uint64_t off;
    assert_int_equal(rk__arena_alloc(&ar, sizeof mem, 0, &off), 0);
    rk__arena_free(&ar, off, sizeof mem);
    rk__arena_destroy(&ar);
}

static void test_empty_arena(void **state)
{
    (void)state;
    rk__arena ar;
    assert_int_equal(rk__arena_init(&ar, NULL, 0), 0);
    uint64_t off;
    assert_int_equal(rk__arena_alloc(&ar, 1, 0, &off), -RK_EMSGSIZE);
    rk__arena_destroy(&ar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free_alignment),
        cmocka_unit_test(test_too_big_and_exhaustion),
        cmocka_unit_test(test_waiter_gets_freed_space),
        cmocka_unit_test(test_coalescing_random_order),
        cmocka_unit_test(test_empty_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
