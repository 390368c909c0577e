/* bench_bridge.h - rk-bench's bridge mode (against a running rk-bridge).
 *
 *   rk-bench bridge --endpoint E [--count N] [--threads T] [--window W]
 *                   [--messages M] [--size B] [--raw-endpoint R] [--no-ring]
 *                   [--no-latency] [--timeout S] [--broker] [--raw-io-threads N]
 *                   [--rounds R]
 *
 * Results (names in results/README.md): zmq_raw_echo_64 (raw DEALER/ROUTER echo,
 * no msgpack, no ring, against a ROUTER echo thread the bench binds on a
 * sibling endpoint of the same transport), bridge_echo_64 (protocol v1 echo
 * round trip through the bridge), bridge_throughput_echo_64 (T client
 * threads, W requests in flight each); plus zmq_raw_throughput_echo_64 and
 * ring_echo_64 (the bridge's own in-process ring round trip, measured by
 * the bridge at start-up and read from its status: count, p50, p99 only)
 * for the must-show check: bridge p50 <= raw p50 + 1.2 x ring p50. The
 * throughput rows alternate, raw, bridge, raw, ..., R rounds each (default
 * 3): msgs_per_s is all of a row's messages over all its rounds' time,
 * count its messages, its extra's "rounds" each round's msg/s; the bound
 * bridge / raw >= 0.85 is printed over all rounds and per round. The
 * bridge row's extra carries bridge_cpu_us_per_msg (the bridge's process
 * CPU time over its rounds, from its status counters, per request).
 * When no bridge answers a status request within --timeout (3 s), the run
 * ends at once with a message naming the endpoint. */
#ifndef RK_BENCH_BRIDGE_H
#define RK_BENCH_BRIDGE_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "bridge"; --json/--samples were already taken out. Returns 0
 * or a non-zero exit status (with a message on stderr). */
int bench_bridge_run(int argc, char **argv, bench_report *rep);

/* Prints the bridge mode's options to f. */
void bench_bridge_usage(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
