/* test_cpus.c - rkb_cpus_from (bridge/server/cpus.c): the CPUs the bridge
 * may use are its affinity mask capped by the tightest CPU quota on its
 * cgroup path, rounded up, from files laid out as /proc/self/cgroup,
 * /proc/self/mountinfo and the cgroup hierarchies (v2 and v1) would be;
 * and what --io-threads auto, --zmq-io-threads auto and the spin window
 * make of a count. */
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

/* Writes (text) or removes (NULL) the file rel under g_dir. */
static void set(const char *rel, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    unlink(p);
    if (text)
        put(rel, text);
}

/* A mountinfo with the cgroup2 hierarchy at g_dir/root and, when v1_root
 * is given, v1's cpu controller (with `v1_opts`) at g_dir/v1, showing the
 * cgroup v1_root as its root (a container's view). */
static void mounts(const char *v1_root, const char *v1_opts)
{
    char m[1024];
    int n = snprintf(m, sizeof m,
                     "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                     "30 25 0:26 / %s/root rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", g_dir);
    if (v1_root)
        snprintf(m + n, sizeof m - (size_t)n, "31 25 0:27 %s %s/v1 rw,nosuid shared:5 - cgroup cgroup %s\n",
                 v1_root, g_dir, v1_opts);
    put("mountinfo", m);
}

static long count(const char *cgroup)
{
    char pc[128], mi[128];
    snprintf(pc, sizeof pc, "%s/cgroup", g_dir);
    snprintf(mi, sizeof mi, "%s/mountinfo", g_dir);
    put("cgroup", cgroup);
    return rkb_cpus_from(pc, mi);
}

/* The count for a /proc/self/cgroup of `cgroup`, a cpu.max of `max` in
 * the cgroup /a/b and `parent` in /a (NULL: none), v2 only. */
static long with_parent(const char *cgroup, const char *max, const char *parent)
{
    mounts(NULL, NULL);
    set("root/a/b/cpu.max", max);
    set("root/a/cpu.max", parent);
    return count(cgroup);
}

static long with(const char *cgroup, const char *max)
{
    return with_parent(cgroup, max, NULL);
}

/* cgroup v1: quota / period (us) in the cpu hierarchy's dir `at` (below
 * g_dir/v1); quota NULL: no files */
static void v1_quota(const char *at, const char *quota, const char *period)
{
    char q[128], p[128];
    snprintf(q, sizeof q, "v1%s/cpu.cfs_quota_us", at);
    snprintf(p, sizeof p, "v1%s/cpu.cfs_period_us", at);
    set(q, quota);
    set(p, quota ? period : NULL);
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
    static const char *const dirs[] = {"v1", "v1/a", "v1/a/b"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, dirs[i]);
        mkdir(p, 0700);
    }
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
    /* inside a container (a private cgroup namespace) the process is at
     * "/" and its quota is the hierarchy root's cpu.max */
    set("root/cpu.max", "100000 100000\n");
    assert_int_equal(with("0::/\n", NULL), 1);
    assert_int_equal(with("0::/a/b\n", "max 100000\n"), 1); /* the root is a parent too */
    set("root/cpu.max", NULL);
    assert_int_equal(with("0::/\n", NULL), aff);
    /* cgroup v1: the cpu controller's hierarchy, its own cgroup and each
     * parent (cpu.cfs_quota_us / cpu.cfs_period_us; -1: none) */
    const char *v1 = "5:cpu,cpuacct:/a/b\n4:memory:/a/b\n1:name=systemd:/a/b\n";
    mounts("/", "rw,nosuid,cpu,cpuacct");
    v1_quota("/a/b", "100000\n", "100000\n");
    assert_int_equal(count(v1), 1);
    v1_quota("/a/b", "-1\n", "100000\n");
    assert_int_equal(count(v1), aff);
    v1_quota("/a", "50000\n", "100000\n"); /* a parent's */
    assert_int_equal(count(v1), 1);
    v1_quota("/a", NULL, NULL);
    v1_quota("/a/b", "100000\n", "0\n"); /* period 0: none */
    assert_int_equal(count(v1), aff);
    /* a v1 container: its cgroup (/docker/x) is the mount's root */
    mounts("/docker/x", "rw,cpu,cpuacct");
    v1_quota("/a/b", NULL, NULL);
    v1_quota("", "100000\n", "100000\n");
    assert_int_equal(count("5:cpu,cpuacct:/docker/x\n"), 1);
    assert_int_equal(count("5:cpuacct,cpu:/docker/x\n"), 1);
    /* a hierarchy without the cpu controller (cpuacct, cpuset) is not it */
    mounts("/docker/x", "rw,cpuacct");
    assert_int_equal(count("5:cpuacct:/docker/x\n"), aff);
    mounts("/docker/x", "rw,cpuset");
    assert_int_equal(count("5:cpuset:/docker/x\n"), aff);
    v1_quota("", NULL, NULL);
    /* no mountinfo: no quota read, the mask */
    set("mountinfo", NULL);
    assert_int_equal(count("0::/a/b\n"), aff);
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
