/* bridge/server/cpus.h - how many CPUs the bridge may use (cpus.c). No
 * state; callable from any thread. */
#ifndef RKB_CPUS_H
#define RKB_CPUS_H

#include <stdbool.h>
#include <stdint.h>

/* The CPUs this process may use: its affinity mask, capped by the tightest
 * CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us) of its cgroup and its
 * parents up to the hierarchy's root (a container's own cgroup), rounded
 * up. At least 1. */
long rkb_cpus(void);

/* The same with the process's cgroup read from proc_cgroup (a
 * /proc/self/cgroup) and the hierarchies' mounts from mountinfo (a
 * /proc/self/mountinfo): for tests. */
long rkb_cpus_from(const char *proc_cgroup, const char *mountinfo);

/* --io-threads auto for that many CPUs: 1 (up to 3), 2 (4-8) or 3. */
int rkb_auto_io_threads(long cpus);

/* How long the bridge's threads spin for more work before they sleep, in
 * ns: 100 us from 4 CPUs on, else 0 (env RKB_SPIN_NS overrides). */
int64_t rkb_spin_ns(long cpus);

/* --zmq-io-threads auto: 2 where a --bind is tcp and there are more than 5
 * CPUs, else 1. */
int rkb_auto_zmq_io_threads(bool tcp, long cpus);

#endif
