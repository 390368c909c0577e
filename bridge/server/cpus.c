/* bridge/server/cpus.c - how many CPUs the bridge may use, for the choices
 * that depend on it (--io-threads auto, --zmq-io-threads auto, whether
 * threads spin before they sleep): the CPUs of its affinity mask (taskset,
 * a container's cpuset), capped by the tightest CPU quota on its cgroup v2
 * path (cpu.max of its cgroup and each parent: `docker --cpus`, systemd's
 * CPUQuota= on the service or its slice), rounded up. The machine's
 * online count saw every core of the host: a bridge given 2 CPUs of a
 * 64-core host started 3 workers and a frontend that spin. */
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
