/* bridge/server/cpus.h - how many CPUs the bridge may use (cpus.c). No
 * state; callable from any thread. */
#ifndef RKB_CPUS_H
#define RKB_CPUS_H

/* The CPUs this process may use: its affinity mask, capped by the tightest
 * CPU quota (cgroup v2 cpu.max) of its cgroup and its parents, rounded up.
 * At least 1. */
long rkb_cpus(void);

/* The same with the process's cgroup read from proc_cgroup (a
 * /proc/self/cgroup) and its cpu.max looked up under cgroup_root (a
 * /sys/fs/cgroup): for tests. */
long rkb_cpus_from(const char *proc_cgroup, const char *cgroup_root);

#endif
