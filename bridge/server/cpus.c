/* bridge/server/cpus.c - how many CPUs the bridge may use, for the choices
 * that depend on it (--io-threads auto, --zmq-io-threads auto, whether
 * threads spin before they sleep): the CPUs of its affinity mask (taskset,
 * a container's cpuset), capped by the tightest CPU quota on its cgroup v2
 * path (cpu.max of its cgroup and each parent: `docker --cpus`, systemd's
 * CPUQuota= on the service or its slice), rounded up. The machine's
 * online count saw every core of the host: a bridge given 2 CPUs of a
 * 64-core host started 3 workers and a frontend that spin. Then what
 * --io-threads auto, the spin window and --zmq-io-threads auto make of
 * that count, each measured (benchmarks/results/h200_bridge_small_cpus_
 * 4870421.txt, h200_bridge_zmq_io_threads_cpus_4870421.txt). */
#include "cpus.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One cgroup's cpu.max in CPUs, rounded up; 0 for none ("max"), no file
 * or one that does not parse. */
static long rkb__quota_at(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char quota[32];
    long long period = 0;
    long n = 0;
    if (fscanf(f, "%31s %lld", quota, &period) == 2 && strcmp(quota, "max") && period > 0)
        n = (long)((atoll(quota) + period - 1) / period);
    fclose(f);
    return n > 0 ? n : 0;
}

/* The tightest CPU quota on the process's cgroup v2 path, its own cgroup
 * and each parent up to root (a systemd slice's CPUQuota= limits every
 * service in it), in CPUs; 0 when none has one or there is no v2 line. */
static long rkb__cgroup_cpus(const char *proc_cgroup, const char *root)
{
    char line[400], path[512]; /* room for root, the cgroup and "/cpu.max" */
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    bool v2 = false;
    while (!v2 && fgets(line, sizeof line, f))
        v2 = !strncmp(line, "0::", 3); /* the unified hierarchy's line */
    fclose(f);
    if (!v2)
        return 0;
    line[strcspn(line, "\n")] = 0;
    long best = 0;
    for (char *cg = line + 3, *slash; cg[0] == '/' && cg[1]; *slash = 0) {
        snprintf(path, sizeof path, "%.100s%s/cpu.max", root, cg);
        long n = rkb__quota_at(path);
        if (n > 0 && (best == 0 || n < best))
            best = n;
        slash = strrchr(cg, '/');
        if (slash == cg) /* the last component: the root itself has no cpu.max */
            break;
    }
    return best;
}

long rkb_cpus_from(const char *proc_cgroup, const char *cgroup_root)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set; /* 1 024 CPUs; on a larger machine the call fails and n stays */
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    long q = rkb__cgroup_cpus(proc_cgroup, cgroup_root);
    if (q > 0 && q < n)
        n = q;
    return n > 0 ? n : 1;
}

long rkb_cpus(void)
{
    return rkb_cpus_from("/proc/self/cgroup", "/sys/fs/cgroup");
}

/* One thread does everything where CPUs are few (a frontend and workers
 * would only take turns on them); with CPUs to spare, workers decode,
 * encode and drive the ring in parallel (H200 host, 16 cores, tcp, 8
 * clients x 128: 0.84 M msg/s with 1 thread, 1.43 M with 2 workers, 1.53 M
 * with 3). Given 4 CPUs, two workers that spin (rkb_spin_ns) beat one loop
 * in latency and throughput (+21-67 %) on both backends; given 3, only on
 * CUDA; given 2 they are far worse (bridge/README.md, "How many threads on
 * a few CPUs"). */
int rkb_auto_io_threads(long cpus)
{
    return cpus > 8 ? 3 : cpus > 3 ? 2 : 1;
}

/* Spin while work is owed only where there are CPUs to spare: on 2 a
 * spinning bridge holds the CPU the CPU worker or ZeroMQ's I/O thread
 * needs (two spinning workers there: p50 +235-246 us over raw ZeroMQ on
 * the cpu backend); from 4 on, a frontend and workers that sleep after
 * each request pay two eventfd wake-ups a round trip (~20 us), and each
 * sched_yield round a system call that a reply 2-3 us away does not need. */
int64_t rkb_spin_ns(long cpus)
{
    const char *e = getenv("RKB_SPIN_NS"); /* experiments */
    return e ? atoll(e) : cpus > 3 ? 100000 : 0;
}

/* Behind a frontend with CPUs to spare, one ZeroMQ I/O thread doing every
 * tcp connection's framing is what saturates (H100 host, 16 cores, 8
 * clients x 128: 96-99 % of a core; two took the bridge's pipelined echo
 * from ~0.87 to ~0.96 x raw ZeroMQ). Given 6 or 8 CPUs of an H200 host, two
 * were 7-17 % faster in each of six pairs; given 5, +13 / +6 % on one host
 * and -7 / -5 % on another; given 4, -8 to -37 % (bridge/README.md, "How
 * many threads on a few CPUs"). Over ipc a second did not help. */
int rkb_auto_zmq_io_threads(bool tcp, long cpus)
{
    return tcp && cpus > 5 ? 2 : 1;
}
