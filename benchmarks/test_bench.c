/* test_bench.c - rk-bench's row statistics and record (bench.c): the
 * late share of a latency row and its one-read-late part, and a record
 * that holds only what a row measured. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench.h"

/* 1 000 round trips: 989 at 2 us, one exactly BENCH_LATE_NS over p50 (not
 * late), ten a read time late (+1.5 us): 1 %, all of them one read late. */
static void fill(uint64_t *s)
{
    for (int i = 0; i < 1000; i++)
        s[i] = 2000;
    s[500] = 2000 + (uint64_t)BENCH_LATE_NS;
    for (int i = 0; i < 10; i++)
        s[7 + 97 * i] = 3500;
}

static void test_late_pct(void **state)
{
    (void)state;
    bench_report rep = {0};
    uint64_t s[1000];
    fill(s);
    bench_result *r = bench_add(&rep, "ring_echo_64", "cuda");
    bench_latency_stats(r, s, 1000);
    assert_true(r->p50_ns == 2000.0);
    assert_true(r->late_pct == 1.0);
    assert_true(r->read_late_pct == 1.0);
    /* late by other amounts: +0.7 us (a late reply), +1.0 us (the window's
     * start, in it), +1.8 us (its end, out), +4 us */
    fill(s);
    s[7] = 2700;
    s[104] = 3000;
    s[201] = 3800;
    s[298] = 6000;
    bench_latency_stats(r, s, 1000);
    assert_true(r->late_pct == 1.0);
    assert_true(r->read_late_pct == 0.7);
    /* none late; then 499 of 1 000 a read late (the nearest-rank p50 is
     * the fast mode's) */
    for (int i = 0; i < 1000; i++)
        s[i] = 2000;
    bench_latency_stats(r, s, 1000);
    assert_true(r->late_pct == 0.0);
    for (int i = 0; i < 1000; i++)
        s[i] = i % 2 && i < 999 ? 3300 : 2200;
    bench_latency_stats(r, s, 1000);
    assert_true(r->p50_ns == 2200.0);
    assert_true(r->late_pct == 49.9);
    assert_true(r->read_late_pct == 49.9);
    bench_report_free(&rep);
}

/* bench_pct_in: shares of a row's round trips between two bounds, from
 * its kept samples, all of them or every other one past
 * BENCH_SAMPLES_KEPT; none for a row without samples. */
static void test_pct_in(void **state)
{
    (void)state;
    bench_report rep = {0};
    uint64_t s[1000];
    fill(s);
    bench_result *r = bench_add(&rep, "ring_echo_64", "cuda");
    assert_false(bench_has(bench_pct_in(r, 0, INFINITY))); /* nothing measured yet */
    bench_latency_stats(r, s, 1000);
    assert_true(bench_pct_in(r, 0, INFINITY) == 100.0);
    assert_true(bench_pct_in(r, 3000, INFINITY) == 1.0);  /* the ten a read late */
    assert_true(bench_pct_in(r, 2600, 2601) == 0.1);      /* [lo, hi): the one at +600 */
    assert_true(bench_pct_in(r, 2000, 2000) == 0.0);
    assert_true(bench_pct_in(r, 3501, INFINITY) == 0.0);
    /* 40 000 round trips, 1 % of them 5 us late: every other one kept */
    size_t n = 2 * BENCH_SAMPLES_KEPT;
    uint64_t *big = malloc(n * sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = i % 100 == 3 ? 7000 : 2000;
    bench_latency_stats(r, big, n);
    assert_int_equal(r->n_samples, BENCH_SAMPLES_KEPT);
    assert_true(fabs(bench_pct_in(r, 6000, INFINITY) - 1.0) < 0.01);
    free(big);
    bench_report_free(&rep);
}

/* late_pct_by_block: the late ones counted where they came in the run (a
 * burst in its last twentieth, one in the first), not where sorting puts
 * them; the blocks' mean is late_pct. */
static void test_late_blocks(void **state)
{
    (void)state;
    bench_report rep = {0};
    uint64_t s[2000];
    for (int i = 0; i < 2000; i++)
        s[i] = i >= 1950 ? 4000 : 2000; /* 50 late at the end: block 19 has 100 round trips */
    s[3] = 3500;
    bench_result *r = bench_add(&rep, "ring_echo_64", "cuda");
    bench_latency_stats(r, s, 2000);
    assert_true(r->late_pct == 2.55);
    assert_true(r->late_by_block[0] == 1.0);
    assert_true(r->late_by_block[19] == 50.0);
    double sum = 0;
    for (int b = 0; b < BENCH_LATE_BLOCKS; b++) {
        sum += r->late_by_block[b];
        if (b && b < 19)
            assert_true(r->late_by_block[b] == 0.0);
    }
    assert_true(sum / BENCH_LATE_BLOCKS == r->late_pct);
    assert_true(s[0] == 2000 && s[1999] == 4000); /* s is sorted on return, as before */
    /* fewer round trips than blocks: none */
    bench_latency_stats(r, s, 10);
    assert_false(bench_has(r->late_by_block[0]));
    bench_report_free(&rep);
}

/* The record: late_pct on the latency row, absent from a throughput row. */
static void test_record(void **state)
{
    (void)state;
    bench_report rep = {0};
    snprintf(rep.device_json, sizeof rep.device_json, "null");
    uint64_t s[1000];
    fill(s);
    bench_latency_stats(bench_add(&rep, "ring_echo_64", "cuda"), s, 1000);
    bench_add(&rep, "throughput_echo_64", "cuda")->msgs_per_s = 2e7;
    char path[] = "/tmp/rk-test-bench-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(bench_write_json(&rep, path, "gpu", 0), 0);
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    const char *row = strstr(buf, "\"ring_echo_64\""), *thr = strstr(buf, "\"throughput_echo_64\"");
    assert_non_null(row);
    assert_non_null(thr);
    const char *late = strstr(row, "\"late_pct\": 1.000");
    assert_non_null(late);
    assert_true(late < thr);              /* on the latency row */
    assert_null(strstr(thr, "late_pct")); /* not on the throughput row */
    assert_null(strstr(late + strlen("\"late_pct\""), "\"late_pct\"")); /* once */
    const char *rl = strstr(row, "\"read_late_pct\": 1.000");
    assert_non_null(rl);
    assert_true(rl < thr);
    /* fill's ten late ones, one in each hundred from the 8th: blocks of 50
     * alternate 2 % and 0 % */
    const char *bl = strstr(row, "\"late_pct_by_block\": [2.00, 0.00, 2.00, 0.00,");
    assert_non_null(bl);
    assert_true(bl < thr);
    assert_null(strstr(thr, "late_pct_by_block"));
    bench_report_free(&rep);
}

/* bench_num, bench_real: a value whole and in range, else refused (2)
 * with *out left as it was: not read as its digits, as 0 or in hex. */
static void test_numbers(void **state)
{
    (void)state;
    long v = 7;
    assert_int_equal(bench_num("ring", "--count", "10", 1, 100, &v), 0);
    assert_int_equal(v, 10);
    assert_int_equal(bench_num("ring", "--count", "010", 1, 100, &v), 0);
    assert_int_equal(v, 10); /* decimal */
    const char *bad[] = {"", "abc", "10x", "0x10", "0", "101", "-1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 7;
        assert_int_equal(bench_num("ring", "--count", bad[i], 1, 100, &v), 2);
        assert_int_equal(v, 7);
    }
    double d = 7;
    assert_int_equal(bench_real("bridge", "--timeout", "0.5", 0.001, 3600, &d), 0);
    assert_true(d == 0.5);
    const char *badr[] = {"", "abc", "1s", "0", "nan", "inf", "0x1p2", "3601", "-1"};
    for (size_t i = 0; i < sizeof badr / sizeof *badr; i++) {
        d = 7;
        assert_int_equal(bench_real("bridge", "--timeout", badr[i], 0.001, 3600, &d), 2);
        assert_true(d == 7);
    }
}

/* bench_set_device: the record's "device" names the GPU, its strings
 * escaped, and an object too long for it is left out whole (null). */
static void test_device(void **state)
{
    (void)state;
    bench_report rep = {0};
    bench_set_device(&rep, "NVIDIA \"H100\"", "9.0", 132, "the bridge's status");
    assert_string_equal(rep.device_json, "{\"name\": \"NVIDIA \\\"H100\\\"\", \"cc\": \"9.0\", \"sm_count\": 132, "
                                         "\"source\": \"the bridge's status\"}");
    bench_set_device(&rep, "NVIDIA H200", NULL, -1, NULL);
    assert_string_equal(rep.device_json, "{\"name\": \"NVIDIA H200\"}");
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    bench_set_device(&rep, big, "9.0", 1, NULL);
    assert_string_equal(rep.device_json, "{\"name\": \"NVIDIA H200\"}"); /* kept, not cut */
    bench_report_free(&rep);
}

/* bench_json_check: a path that cannot be written is refused with its
 * reason; one that can is left as it was (an existing record not cut, no
 * new file left behind). */
static void test_json_check(void **state)
{
    (void)state;
    char dir[] = "/tmp/rk-test-bench-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/no/r.json", dir);
    errno = 0;
    assert_int_equal(bench_json_check(path), -1);
    assert_int_equal(errno, ENOENT);
    errno = 0;
    assert_int_equal(bench_json_check(dir), -1);
    assert_int_equal(errno, EISDIR);
    snprintf(path, sizeof path, "%s/r.json", dir);
    assert_int_equal(bench_json_check(path), 0);
    assert_int_equal(access(path, F_OK), -1); /* not left behind */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("kept", f);
    fclose(f);
    assert_int_equal(bench_json_check(path), 0);
    char buf[16] = {0};
    f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 4);
    fclose(f);
    assert_string_equal(buf, "kept");
    unlink(path);
    rmdir(dir);
}

/* The table's name column is as wide as the run's longest row name: the
 * bridge's broker_bridge_throughput_echo_64 (32) pushed its row's values
 * out of their columns. */
static void test_table_width(void **state)
{
    (void)state;
    bench_report rep = {0};
    bench_add(&rep, "ring_echo_64", "cpu")->msgs_per_s = 1e6;
    bench_add(&rep, "broker_bridge_throughput_echo_64", "cpu")->msgs_per_s = 1e6;
    FILE *f = tmpfile();
    assert_non_null(f);
    bench_print_table(&rep, f);
    rewind(f);
    char lines[3][256];
    for (int i = 0; i < 3; i++)
        assert_non_null(fgets(lines[i], sizeof lines[i], f));
    fclose(f);
    /* the backend starts in the same column in the header and both rows */
    size_t at = strstr(lines[0], "backend") - lines[0];
    assert_true(at > strlen("broker_bridge_throughput_echo_64"));
    assert_int_equal(strstr(lines[1], " cpu ") + 1 - lines[1], at);
    assert_int_equal(strstr(lines[2], " cpu ") + 1 - lines[2], at);
    bench_report_free(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_pct),
        cmocka_unit_test(test_pct_in),
        cmocka_unit_test(test_late_blocks),
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_json_check),
        cmocka_unit_test(test_table_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
