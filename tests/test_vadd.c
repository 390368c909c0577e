/* test_vadd.c - vadd through the runtime against a double-precision
 * reference: sizes around every boundary (inline, warp, arena), random
 * sizes, and NaN / inf / denormal / signed-zero inputs. Bit-exact: for one
 * addition, rounding the exact double sum to float is the correctly
 * rounded float sum, which IEEE float32 addition must produce. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <rk/rk.h>

static rk_runtime *rt;
static rk_actor *act;

static int setup(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    const char *b = getenv("RK_TEST_BACKEND");
    c.backend = RK_BACKEND_CPU;
    if (b && rk_backend_parse(b, &c.backend))
        return -1;
    if (rk_runtime_open(&rt, &c) || rk_actor_open(rt, &act))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rk_runtime_close(rt);
    return 0;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Runs vadd over n elements and checks every element bit for bit. */
static void check_vadd(const float *a, const float *b, size_t n)
{
    rk_iov iov[2] = {{a, n * 4}, {b, n * 4}};
    uint64_t id;
    assert_int_equal(rk_actor_sendv(act, RK_OP_VADD, iov, 2, 0, &id, 10000), 0);
    rk_reply r;
    assert_int_equal(rk_actor_recv(act, &r, 60000), 0);
    assert_int_equal(r.id, id);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, n * 4);
    const float *c = r.data;
    for (size_t i = 0; i < n; i++) {
        float ref = (float)((double)a[i] + (double)b[i]);
        if (isnan(ref)) {
            if (!isnan(c[i]))
                fail_msg("c[%zu] = %a, want NaN (a %a, b %a)", i, c[i], a[i], b[i]);
        } else if (bits(c[i]) != bits(ref)) {
            fail_msg("c[%zu] = %a, want %a (a %a, b %a)", i, c[i], ref, a[i], b[i]);
        }
    }
    rk_reply_release(act, &r);
}

static void run_size(size_t n, int special)
{
    float *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        if (special) {
            /* any bit pattern: NaNs, infinities, denormals, -0 */
            a[i] = from_bits(rnd());
            b[i] = from_bits(rnd());
        } else {
            a[i] = (float)((int32_t)rnd()) / 65536.0f;
            b[i] = (float)((int32_t)rnd()) / 1048576.0f;
        }
    }
    check_vadd(a, b, n);
    free(a);
    free(b);
}

static void test_boundary_sizes(void **state)
{
    (void)state;
    size_t sizes[] = {1, 2, 3, 12, 13, 31, 32, 33, 1000, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        run_size(sizes[i], 0);
        run_size(sizes[i], 1);
    }
}

static void test_largest_operands(void **state)
{
    (void)state;
    run_size((size_t)1 << 24, 1); /* 64 MiB per operand: the default maximum */
}

static void test_random_sizes(void **state)
{
    (void)state;
    for (int i = 0; i < 40; i++)
        run_size(1 + rnd() % 70000, i & 1);
}

static void test_special_values(void **state)
{
    (void)state;
    const float inf = INFINITY, nan = NAN;
    const float den = from_bits(0x00000001u), maxf = from_bits(0x7f7fffffu);
    float a[] = {inf, -inf, inf, nan, 1.0f, den, den, -den, 0.0f, -0.0f, -0.0f, maxf, -maxf, 1e-45f, from_bits(0x7fc00001u)};
    float b[] = {1.0f, 1.0f, -inf, 2.0f, nan, den, -den, -den, -0.0f, -0.0f, 0.0f, maxf, -maxf, 1e-45f, 0.0f};
    check_vadd(a, b, sizeof a / sizeof *a);
    /* spot checks the reference itself cannot get wrong */
    rk_iov iov[2] = {{a, sizeof a}, {b, sizeof b}};
    assert_int_equal(rk_actor_sendv(act, RK_OP_VADD, iov, 2, 0, NULL, 1000), 0);
    rk_reply r;
    assert_int_equal(rk_actor_recv(act, &r, 5000), 0);
    const float *c = r.data;
    assert_true(isinf(c[0]) && c[0] > 0);
    assert_true(isinf(c[1]) && c[1] < 0);
    assert_true(isnan(c[2])); /* inf + -inf */
    assert_true(isnan(c[3]) && isnan(c[4]));
    assert_int_equal(bits(c[5]), 0x00000002u); /* denormals are not flushed */
    assert_int_equal(bits(c[8]), 0x00000000u); /* 0 + -0 = +0 */
    assert_int_equal(bits(c[9]), 0x80000000u); /* -0 + -0 = -0 */
    assert_true(isinf(c[11]));                 /* overflow */
    rk_reply_release(act, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_sizes),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_random_sizes),
        cmocka_unit_test(test_largest_operands),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
