/* bridge/server/cpus.c - how many CPUs the bridge may use, for the choices
 * that depend on it (--io-threads auto, --zmq-io-threads auto, whether
 * threads spin before they sleep): the CPUs of its affinity mask (taskset,
 * a container's cpuset), capped by its cgroup's CPU quota (cgroup v2
 * cpu.max: `docker --cpus`, systemd's CPUQuota=), rounded up. The machine's
 * online count saw every core of the host: a bridge given 2 CPUs of a
 * 64-core host started 3 workers and a frontend that spin. */
#include "cpus.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The quota of the process's own cgroup in CPUs, rounded up; 0 when it has
 * none ("max"), or there is no cgroup v2 line or cpu.max to read. */
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
    snprintf(path, sizeof path, "%.100s%s/cpu.max", root, strcmp(line + 3, "/") ? line + 3 : "");
    if (!(f = fopen(path, "r")))
        return 0;
    char quota[32];
    long long period = 0;
    long n = 0;
    if (fscanf(f, "%31s %lld", quota, &period) == 2 && strcmp(quota, "max") && period > 0)
        n = (long)((atoll(quota) + period - 1) / period);
    fclose(f);
    return n > 0 ? n : 0;
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
