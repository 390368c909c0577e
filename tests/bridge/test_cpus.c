/* test_cpus.c - rkb_cpus_from (bridge/server/cpus.c): the CPUs the bridge
 * may use are its affinity mask capped by its own cgroup's cpu.max,
 * rounded up, from files laid out as /proc/self/cgroup and /sys/fs/cgroup
 * would be; and what --io-threads auto, --zmq-io-threads auto and the
 * spin window make of a count. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpus.h"

static char g_dir[64];

static void put(const char *rel, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static long affinity(void)
{
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

/* The count for a /proc/self/cgroup of `cgroup`, a cpu.max of `max` in
 * the cgroup /a/b and `parent` in /a (NULL: none). */
static long with_parent(const char *cgroup, const char *max, const char *parent)
{
    char pc[128], root[128];
    snprintf(pc, sizeof pc, "%s/cgroup", g_dir);
    snprintf(root, sizeof root, "%s/root", g_dir);
    put("cgroup", cgroup);
    char p[256];
    snprintf(p, sizeof p, "%s/root/a/b/cpu.max", g_dir);
    unlink(p);
    if (max)
        put("root/a/b/cpu.max", max);
    snprintf(p, sizeof p, "%s/root/a/cpu.max", g_dir);
    unlink(p);
    if (parent)
        put("root/a/cpu.max", parent);
    return rkb_cpus_from(pc, root);
}

static long with(const char *cgroup, const char *max)
{
    return with_parent(cgroup, max, NULL);
}

static void test_quota(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/rkbt-cpus-XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    char p[256];
    snprintf(p, sizeof p, "%s/root", g_dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/root/a", g_dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/root/a/b", g_dir);
    mkdir(p, 0700);
    const long aff = affinity();
    const char *v2 = "0::/a/b\n";
    /* a quota of one CPU, and of 1.5 (rounded up: 2) */
    assert_int_equal(with(v2, "100000 100000\n"), 1);
    assert_int_equal(with(v2, "150000 100000\n"), aff < 2 ? aff : 2);
    /* a quota above the mask: the mask */
    assert_int_equal(with(v2, "100000000 100000\n"), aff);
    /* no quota, no file, a malformed file, a cgroup v1-only process: the mask */
    assert_int_equal(with(v2, "max 100000\n"), aff);
    assert_int_equal(with(v2, NULL), aff);
    assert_int_equal(with(v2, "garbage\n"), aff);
    assert_int_equal(with(v2, "100000 0\n"), aff);
    assert_int_equal(with("4:cpu:/a/b\n1:memory:/\n", "100000 100000\n"), aff);
    /* the v2 line among v1 lines counts */
    assert_int_equal(with("4:cpu:/x\n0::/a/b\n", "100000 100000\n"), 1);
    /* a parent's quota (a systemd slice's) limits too; the tightest wins */
    assert_int_equal(with_parent(v2, "max 100000\n", "100000 100000\n"), 1);
    assert_int_equal(with_parent(v2, "100000 100000\n", "400000 100000\n"), 1);
    assert_int_equal(with_parent(v2, NULL, "50000 100000\n"), 1);
    assert_int_equal(with_parent("0::/a\n", "100000 100000\n", "max 100000\n"), aff);
    /* the process's own affinity narrowed: one CPU */
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &all)) {
            CPU_SET(i, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(with(v2, "max 100000\n"), 1);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    /* the real files: at least 1, at most the mask */
    long real = rkb_cpus();
    assert_true(real >= 1 && real <= aff);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    assert_int_equal(system(cmd), 0);
}

/* What --io-threads auto, --zmq-io-threads auto and the spin window make
 * of a CPU count: the boundaries measured (cpus.c) */
static void test_auto_threads(void **state)
{
    (void)state;
    static const struct {
        long cpus;
        int io, zmq_tcp;
        int64_t spin;
    } T[] = {{1, 1, 1, 0},      {2, 1, 1, 0},      {3, 1, 1, 0},      {4, 2, 1, 100000}, {5, 2, 1, 100000},
             {6, 2, 2, 100000}, {8, 2, 2, 100000}, {9, 3, 2, 100000}, {16, 3, 2, 100000}, {128, 3, 2, 100000}};
    unsetenv("RKB_SPIN_NS");
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        assert_int_equal(rkb_auto_io_threads(T[i].cpus), T[i].io);
        assert_int_equal(rkb_spin_ns(T[i].cpus), T[i].spin);
        assert_int_equal(rkb_auto_zmq_io_threads(true, T[i].cpus), T[i].zmq_tcp);
        /* ipc or inproc only: one, whatever the count */
        assert_int_equal(rkb_auto_zmq_io_threads(false, T[i].cpus), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_quota), cmocka_unit_test(test_auto_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
