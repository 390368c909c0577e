/* bridge/server/cpus.c - how many CPUs the bridge may use, for the choices
 * that depend on it (--io-threads auto, --zmq-io-threads auto, whether
 * threads spin before they sleep): the CPUs of its affinity mask (taskset,
 * a container's cpuset), capped by the tightest CPU quota on its cgroup
 * path (its cgroup and each parent up to the hierarchy's root: `docker
 * --cpus`, systemd's CPUQuota= on the service or its slice; cgroup v2's
 * cpu.max, or v1's cpu.cfs_quota_us / cpu.cfs_period_us), rounded up. The
 * machine's online count saw every core of the host: a bridge given 2 CPUs
 * of a 64-core host started 3 workers and a frontend that spin. Then what
 * --io-threads auto, the spin window and --zmq-io-threads auto make of
 * that count, each measured (in benchmarks/results/:
 * h200_bridge_small_cpus_4870421.txt and
 * h200_bridge_zmq_io_threads_cpus_4870421.txt). */
#include "cpus.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A quota in CPUs, rounded up; 0 for none. */
static long rkb__cpus_of(long long quota, long long period)
{
    return quota > 0 && period > 0 ? (long)((quota + period - 1) / period) : 0;
}

/* The first line of dir/name into buf; false when there is none. */
static bool rkb__read(const char *dir, const char *name, char *buf, int cap)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, cap, f) != NULL;
    fclose(f);
    return ok;
}

/* One cgroup's CPU quota in CPUs, rounded up; 0 for none ("max", -1), no
 * file or one that does not parse. v2: cpu.max ("QUOTA PERIOD"); v1:
 * cpu.cfs_quota_us over cpu.cfs_period_us. */
static long rkb__quota_at(const char *dir, bool v1)
{
    char q[64], p[64];
    if (v1)
        return rkb__read(dir, "cpu.cfs_quota_us", q, sizeof q) && rkb__read(dir, "cpu.cfs_period_us", p, sizeof p)
                   ? rkb__cpus_of(atoll(q), atoll(p))
                   : 0;
    /* "QUOTA PERIOD", or "max PERIOD" for none (atoll of "max": 0) */
    if (!rkb__read(dir, "cpu.max", q, sizeof q) || sscanf(q, "%*s %63s", p) != 1)
        return 0;
    return rkb__cpus_of(atoll(q), atoll(p));
}

/* Whether the comma list `list` holds `item` ("cpu" in "rw,cpu,cpuacct",
 * not in "cpuacct" or "cpuset"). */
static bool rkb__has_item(const char *list, const char *item)
{
    const size_t n = strlen(item);
    for (const char *p = list; p; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (!strncmp(p, item, n) && (p[n] == ',' || p[n] == 0))
            return true;
    }
    return false;
}

/* Where the hierarchy is mounted (from a /proc/self/mountinfo): the
 * cgroup2 mount, or (v1) the cgroup mount holding the cpu controller. Its
 * mount point in point, and which cgroup that is in root (a container sees
 * its own cgroup as the mount's root). */
static bool rkb__mount_of(const char *mountinfo, bool v1, char *root, char *point)
{
    FILE *f = fopen(mountinfo, "r");
    if (!f)
        return false;
    char line[1024], fstype[32], opts[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        const char *sep = strstr(line, " - "); /* the optional fields end here */
        opts[0] = 0;
        if (!sep || sscanf(sep + 3, "%31s %*s %511s", fstype, opts) < 1 ||
            strcmp(fstype, v1 ? "cgroup" : "cgroup2") || (v1 && !rkb__has_item(opts, "cpu")))
            continue;
        found = sscanf(line, "%*s %*s %*s %255s %255s", root, point) == 2;
    }
    fclose(f);
    return found;
}

/* The process's cgroup in the hierarchy (from a /proc/self/cgroup): v2's
 * "0::PATH", or v1's "ID:CONTROLLERS:PATH" whose controllers hold cpu. */
static bool rkb__cgroup_of(const char *proc_cgroup, bool v1, char *path, size_t cap)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0; /* line: the hierarchy's ID, c1 + 1: its controllers */
        found = v1 ? strcmp(line, "0") && rkb__has_item(c1 + 1, "cpu") : !strcmp(line, "0") && c1[1] == 0;
        if (found)
            snprintf(path, cap, "%s", c2 + 1);
    }
    fclose(f);
    return found;
}

/* The tightest CPU quota on the process's path in one hierarchy: its own
 * cgroup and each parent up to the mount's root, the root included (a
 * systemd slice's CPUQuota= limits every service in it; inside a container
 * the root is the container's cgroup, where `docker --cpus` puts it; a
 * host's root has none). In CPUs; 0 when none has one. */
static long rkb__cgroup_cpus(const char *proc_cgroup, const char *mountinfo, bool v1)
{
    char root[256], point[256], cg[256], dir[520];
    if (!rkb__mount_of(mountinfo, v1, root, point) || !rkb__cgroup_of(proc_cgroup, v1, cg, sizeof cg))
        return 0;
    /* the cgroup below the mount's root; one the mount does not show
     * (another namespace's) counts as the root itself */
    const size_t rl = strcmp(root, "/") ? strlen(root) : 0;
    const char *rel = !strncmp(cg, root, rl) && (cg[rl] == '/' || cg[rl] == 0) ? cg + rl : "";
    const size_t top = strlen(point);
    snprintf(dir, sizeof dir, "%s%s", point, strcmp(rel, "/") ? rel : "");
    long best = 0;
    for (;;) {
        long n = rkb__quota_at(dir, v1);
        if (n > 0 && (best == 0 || n < best))
            best = n;
        char *slash = strlen(dir) > top ? strrchr(dir + top, '/') : NULL;
        if (!slash)
            break;
        *slash = 0;
    }
    return best;
}

long rkb_cpus_from(const char *proc_cgroup, const char *mountinfo)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set; /* 1 024 CPUs; on a larger machine the call fails and n stays */
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    /* both hierarchies: a hybrid system mounts v2 beside v1's controllers */
    for (int v1 = 0; v1 < 2; v1++) {
        long q = rkb__cgroup_cpus(proc_cgroup, mountinfo, v1);
        if (q > 0 && q < n)
            n = q;
    }
    return n > 0 ? n : 1;
}

long rkb_cpus(void)
{
    return rkb_cpus_from("/proc/self/cgroup", "/proc/self/mountinfo");
}

/* One thread does everything where CPUs are few (a frontend and workers
 * would only take turns on them); with CPUs to spare, workers decode,
 * encode and drive the ring in parallel (H200 host, 16 cores, tcp, 8
 * clients x 128: 0.84 M msg/s with 1 thread, 1.43 M with 2 workers, 1.53 M
 * with 3). Given 4 CPUs, two workers that spin (rkb_spin_ns) beat one loop
 * in latency and throughput (+21-67 %) on both backends; given 3, only on
 * CUDA; given 2 they are far worse (bridge/NOTES.md, "How many threads on
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
 * and -7 / -5 % on another; given 4, -8 to -37 % (bridge/NOTES.md, "How
 * many threads on a few CPUs"). Over ipc a second did not help. */
int rkb_auto_zmq_io_threads(bool tcp, long cpus)
{
    return tcp && cpus > 5 ? 2 : 1;
}
