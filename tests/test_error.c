/* test_error.c - error values (rk/error.h): errno-compatible where an
 * errno fits, RK_ERRNO_BASE and up otherwise; every code unique; names and
 * sentences for both signs, for errno values that are no RK code and for
 * values that are neither. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <rk/rk.h>

typedef struct code {
    int value;
    const char *name;
} code;
static const code codes[] = {
#define X(name, num, msg) {RK_##name, "RK_" #name},
    RK_ERRNO_MAP(X)
#undef X
};
enum { N_CODES = sizeof codes / sizeof codes[0] };

/* The name -> value direction: the table a program would build. */
static int value_of(const char *name)
{
    for (int i = 0; i < N_CODES; i++)
        if (!strcmp(codes[i].name, name))
            return codes[i].value;
    return 0;
}

static void test_unique_and_named(void **state)
{
    (void)state;
    for (int i = 0; i < N_CODES; i++) {
        int v = codes[i].value;
        assert_true(v > 0);
        for (int j = 0; j < i; j++)
            if (codes[j].value == v)
                fail_msg("%s and %s share the value %d", codes[i].name, codes[j].name, v);
        /* names round-trip, either sign */
        assert_string_equal(rk_err_name(v), codes[i].name);
        assert_string_equal(rk_err_name(-v), codes[i].name);
        assert_int_equal(value_of(rk_err_name(-v)), v);
        assert_string_not_equal(rk_strerror(-v), "unknown error");
        assert_string_equal(rk_strerror(v), rk_strerror(-v));
    }
    assert_string_equal(rk_strerror(0), "success");
    assert_string_equal(rk_err_name(0), "RK_OK");
    assert_string_equal(rk_err_name(-RK_EGRID), "RK_EGRID");
    assert_string_equal(rk_strerror(-RK_EGRID), "grid size outside the co-residency limit");
}

/* Below RK_ERRNO_BASE a code IS the errno of the same name; from it up no
 * code is an errno at all. */
static void test_errno_compatible(void **state)
{
    (void)state;
    assert_int_equal(RK_EINVAL, EINVAL);
    assert_int_equal(RK_ENOMEM, ENOMEM);
    assert_int_equal(RK_ETIMEDOUT, ETIMEDOUT);
    assert_int_equal(RK_ENODEV, ENODEV);
    int n_errno = 0, n_own = 0;
    for (int i = 0; i < N_CODES; i++) {
        int v = codes[i].value;
        if (v < RK_ERRNO_BASE) {
            n_errno++;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
            /* "RK_EINVAL" -> "EINVAL"; Linux names ENOTSUP's value EOPNOTSUPP */
            const char *sys = v == ENOTSUP ? "ENOTSUP" : strerrorname_np(v);
            if (!sys || strcmp(sys, codes[i].name + 3))
                fail_msg("%s = %d, but errno %d is %s", codes[i].name, v, v, sys ? sys : "no errno");
#endif
        } else {
            n_own++;
            assert_true(v < RK_ERRNO_BASE + 1000);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
            assert_null(strerrorname_np(v));
#endif
        }
    }
    assert_true(n_errno >= 10 && n_own >= 10);
    /* a failing call returns -errno: both spellings compare equal */
    char mem[1024];
    int rc = rk_ring_init(NULL, sizeof mem, 8, 256);
    assert_int_equal(rc, -EINVAL);
    assert_int_equal(rc, -RK_EINVAL);
    assert_string_equal(rk_strerror(-EINVAL), rk_strerror(rc));
    assert_string_equal(rk_err_name(-EINVAL), "RK_EINVAL");
}

static void test_unknown_values(void **state)
{
    (void)state;
    /* an errno that is no RK code: the system's name and sentence */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
    assert_string_equal(rk_err_name(-ENOENT), "ENOENT");
    assert_string_equal(rk_strerror(-ENOENT), "No such file or directory");
    assert_string_equal(rk_err_name(EPIPE), "EPIPE");
#endif
    /* neither: fixed strings, never NULL, also at the extremes */
    const int odd[] = {RK_ERRNO_BASE + 999, -(RK_ERRNO_BASE + 500), 999, -999, 123456, INT_MAX,
                       INT_MIN, INT_MIN + 1};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        assert_string_equal(rk_strerror(odd[i]), "unknown error");
        assert_string_equal(rk_err_name(odd[i]), "RK_EUNKNOWN");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unique_and_named),
        cmocka_unit_test(test_errno_compatible),
        cmocka_unit_test(test_unknown_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
